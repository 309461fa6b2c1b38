package queries_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/postgres/queries"
)

var c0 = time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)

func catalogStore(t *testing.T) (*pgxpool.Pool, *queries.Store) {
	t.Helper()
	db := testenv.Postgres(t)
	pool, err := domain.NewSessionPool(domain.SessionPoolConfig{MaxConcurrentSessions: 10})
	require.NoError(t, err)
	return db, queries.New(db, pool)
}

func inTx(t *testing.T, db *pgxpool.Pool, fn func(ctx context.Context, tx pgx.Tx) error) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return fn(ctx, tx) }))
}

// addAll stores items with add, all in one transaction.
func addAll[T any](t *testing.T, db *pgxpool.Pool, add func(context.Context, pgx.Tx, T) error, items ...T) {
	t.Helper()
	inTx(t, db, func(ctx context.Context, tx pgx.Tx) error {
		for _, item := range items {
			if err := add(ctx, tx, item); err != nil {
				return err
			}
		}
		return nil
	})
}

// spentSession stores a running session of owner named name that spent cost.
func spentSession(t *testing.T, db *pgxpool.Pool, owner uuid.UUID, name string, cost domain.USD, chain *uuid.UUID) *domain.AgentSession {
	t.Helper()
	s, err := domain.NewAgentSession(domain.NewSessionParams{ID: uuid.New(), OwnerID: owner, ChainID: chain, Name: name,
		WorkingDirectory: "/work/repo", Objective: "Port the parser", ModelID: "claude-sonnet-4-5",
		Budget: domain.SessionBudget{HardCapUsd: domain.Dollars(20), WarnAtPercent: 80}, Now: c0})
	require.NoError(t, err)
	_, err = s.GenerateAPIKey(randReader{})
	require.NoError(t, err)
	pool, err := domain.NewSessionPool(domain.SessionPoolConfig{MaxConcurrentSessions: 10})
	require.NoError(t, err)
	require.NoError(t, pool.Allocate(s, 0, c0))
	require.NoError(t, s.UpdateMetrics(domain.MetricsUpdate{ModelID: "claude-sonnet-4-5", Cost: cost,
		Tokens:        domain.TokenUsage{InputTokens: 100, OutputTokens: 10},
		ContextWindow: domain.ContextWindowSnapshot{InputTokens: 100, ModelContextLimit: 200000, RecordedAt: c0}}, c0))
	addAll(t, db, postgres.Sessions{}.Add, s)
	return s
}

// randReader is a deterministic source for API keys in tests.
type randReader struct{}

func (randReader) Read(p []byte) (int, error) {
	u := uuid.New()
	for i := range p {
		p[i] = u[i%16]
	}
	return len(p), nil
}

func TestChainsListAndDetail(t *testing.T) {
	db, store := catalogStore(t)
	ctx := context.Background()
	owner := uuid.New()

	// A chain of two sessions, with a handoff between them.
	first := spentSession(t, db, owner, "Port the parser", domain.Dollars(1)/2, nil)
	chainID := uuid.New()
	chain, err := domain.NewSessionChain(chainID, owner, "Port the parser to Go", first.ID(), c0)
	require.NoError(t, err)
	_, err = chain.InitiateHandoff(uuid.New(), first.ID(), "Lexer done.", "Write the parser.", "", c0.Add(time.Hour))
	require.NoError(t, err)
	second := spentSession(t, db, owner, "Port the parser (part 2)", domain.Dollars(2), &chainID)
	require.NoError(t, chain.AttachSession(second.ID(), c0.Add(2*time.Hour)))
	// A session that names the chain but never joined it does not count.
	spentSession(t, db, owner, "Stray", domain.Dollars(100), &chainID)
	inTx(t, db, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := (postgres.Sessions{}).Update(ctx, tx, first.ID(), func(s *domain.AgentSession) error {
			return s.AssignToChain(chainID, c0)
		}); err != nil {
			return err
		}
		return postgres.Chains{}.Add(ctx, tx, chain)
	})

	// A newer, cancelled chain; and another owner's.
	lone := spentSession(t, db, owner, "Lone", domain.Dollars(1), nil)
	cancelled, err := domain.NewSessionChain(uuid.New(), owner, "Tidy the docs", lone.ID(), c0.Add(24*time.Hour))
	require.NoError(t, err)
	require.NoError(t, cancelled.Cancel(c0.Add(25*time.Hour)))
	theirs := spentSession(t, db, uuid.New(), "Theirs", domain.Dollars(1), nil)
	theirChain, err := domain.NewSessionChain(uuid.New(), theirs.OwnerID(), "Not yours", theirs.ID(), c0)
	require.NoError(t, err)
	addAll(t, db, postgres.Chains{}.Add, cancelled, theirChain)

	page, err := store.ListChains(ctx, queries.ListChainsParams{Owner: owner})
	require.NoError(t, err)
	assert.Equal(t, 2, page.Total)
	require.Len(t, page.Items, 2)
	assert.Equal(t, cancelled.ID(), page.Items[0].ID, "newest first")
	assert.Equal(t, queries.ChainSummary{ID: chainID, OriginalObjective: "Port the parser to Go", Status: domain.ChainActive,
		SessionCount: 2, CurrentSessionID: second.ID(), TotalCostUsd: domain.Dollars(5) / 2, CreatedAt: c0}, page.Items[1])
	assert.Equal(t, domain.Dollars(1), page.Items[0].TotalCostUsd)

	page, err = store.ListChains(ctx, queries.ListChainsParams{Owner: owner, Status: domain.ChainCancelled})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	assert.Equal(t, cancelled.ID(), page.Items[0].ID)
	page, err = store.ListChains(ctx, queries.ListChainsParams{Owner: owner, Paging: queries.Paging{Page: 2, PageSize: 1}})
	require.NoError(t, err)
	assert.Equal(t, 2, page.Total)
	require.Len(t, page.Items, 1)
	assert.Equal(t, chainID, page.Items[0].ID)
	_, err = store.ListChains(ctx, queries.ListChainsParams{Owner: owner, Status: "Paused"})
	assert.ErrorIs(t, err, domain.ErrValidation)

	v, err := store.Chain(ctx, owner, chainID)
	require.NoError(t, err)
	assert.Equal(t, domain.Dollars(5)/2, v.TotalCostUsd)
	assert.Equal(t, second.ID(), v.CurrentSessionID)
	require.Len(t, v.Sessions, 2)
	assert.Equal(t, queries.ChainSession{SessionID: first.ID(), Position: 1, JoinedAt: c0, Name: "Port the parser",
		Status: domain.StatusRunning, TotalCostUsd: domain.Dollars(1) / 2}, v.Sessions[0])
	assert.Equal(t, "Port the parser (part 2)", v.Sessions[1].Name)
	require.Len(t, v.HandoffDocuments, 1)
	assert.Equal(t, second.ID(), v.HandoffDocuments[0].ToSessionID)
	assert.Equal(t, "Write the parser.", v.HandoffDocuments[0].RemainingWork)

	_, err = store.Chain(ctx, owner, theirChain.ID())
	assert.ErrorIs(t, err, queries.ErrNotFound, "another owner's chain does not exist")
	_, err = store.Chain(ctx, owner, uuid.New())
	assert.ErrorIs(t, err, queries.ErrNotFound)
}

func TestSkillsListDetailAndPills(t *testing.T) {
	db, store := catalogStore(t)
	ctx := context.Background()
	owner := uuid.New()
	tool, err := domain.NewMCPToolDefinition("search", "Searches", `{"type":"object"}`, "https://mcp.example.com")
	require.NoError(t, err)
	newSkill := func(owner uuid.UUID, name string) *domain.AgentSkill {
		sk, err := domain.NewAgentSkill(uuid.New(), owner, name, "About "+name, "", []domain.MCPToolDefinition{tool}, nil, c0)
		require.NoError(t, err)
		return sk
	}
	sql, golang, retired := newSkill(owner, "SQL"), newSkill(owner, "Go"), newSkill(owner, "Perl")
	require.NoError(t, retired.Deactivate(c0))
	session := uuid.New()
	var pills []uuid.UUID
	for i, content := range []string{"index the foreign keys", "EXPLAIN first", "avoid SELECT *"} {
		p, err := sql.RecordMemoryPill(uuid.New(), session, content, domain.PillTip, c0.Add(time.Duration(i)*time.Minute))
		require.NoError(t, err)
		pills = append(pills, p.ID)
	}
	require.NoError(t, sql.DismissMemoryPill(pills[1], c0.Add(time.Hour)))
	theirs := newSkill(uuid.New(), "Theirs")
	addAll(t, db, postgres.Skills{}.Add, sql, golang, retired, theirs)

	page, err := store.ListSkills(ctx, queries.ListSkillsParams{Owner: owner})
	require.NoError(t, err)
	assert.Equal(t, 3, page.Total)
	require.Len(t, page.Items, 3)
	assert.Equal(t, []string{"Go", "Perl", "SQL"}, []string{page.Items[0].Name, page.Items[1].Name, page.Items[2].Name}, "by name")
	assert.Equal(t, queries.SkillSummary{ID: sql.ID(), Name: "SQL", Description: "About SQL", Version: 1, IsActive: true,
		ToolCount: 1, ActivePillCount: 2, CreatedAt: c0, UpdatedAt: c0.Add(time.Hour)}, page.Items[2])
	active := false
	page, err = store.ListSkills(ctx, queries.ListSkillsParams{Owner: owner, IsActive: &active})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	assert.Equal(t, retired.ID(), page.Items[0].ID)

	detail, err := store.Skill(ctx, owner, sql.ID())
	require.NoError(t, err)
	assert.Len(t, detail.MemoryPills, 3)
	assert.Equal(t, int64(1), detail.Version)
	_, err = store.Skill(ctx, owner, theirs.ID())
	assert.ErrorIs(t, err, queries.ErrNotFound)

	all, err := store.MemoryPills(ctx, queries.MemoryPillsParams{Owner: owner, SkillID: sql.ID()})
	require.NoError(t, err)
	assert.Equal(t, 3, all.Total)
	assert.Equal(t, []uuid.UUID{pills[2], pills[1], pills[0]}, []uuid.UUID{all.Items[0].ID, all.Items[1].ID, all.Items[2].ID}, "newest first")
	live, err := store.MemoryPills(ctx, queries.MemoryPillsParams{Owner: owner, SkillID: sql.ID(), Status: domain.PillActive,
		Paging: queries.Paging{Page: 2, PageSize: 1}})
	require.NoError(t, err)
	assert.Equal(t, 2, live.Total)
	require.Len(t, live.Items, 1)
	assert.Equal(t, pills[0], live.Items[0].ID)
	_, err = store.MemoryPills(ctx, queries.MemoryPillsParams{Owner: owner, SkillID: sql.ID(), Status: "Forgotten"})
	assert.ErrorIs(t, err, domain.ErrValidation)
	_, err = store.MemoryPills(ctx, queries.MemoryPillsParams{Owner: owner, SkillID: theirs.ID()})
	assert.ErrorIs(t, err, queries.ErrNotFound)
}

func TestTemplatesListAndDetail(t *testing.T) {
	db, store := catalogStore(t)
	ctx := context.Background()
	owner := uuid.New()
	newTemplate := func(owner uuid.UUID, name string) *domain.AgentTemplate {
		tmpl, err := domain.NewAgentTemplate(domain.NewTemplateParams{ID: uuid.New(), OwnerID: owner, Name: name,
			ModelID: "claude-opus-4-6", AllowedTools: []string{"Read", "Edit"},
			DefaultBudget: domain.SessionBudget{HardCapUsd: domain.Dollars(4), WarnAtPercent: 80},
			Schedule:      &domain.AgentSchedule{CronExpression: "0 7 * * *", TimeZone: "UTC", IsEnabled: true}, Now: c0})
		require.NoError(t, err)
		return tmpl
	}
	triage, review := newTemplate(owner, "Triage"), newTemplate(owner, "Review")
	require.NoError(t, review.Deactivate(c0.Add(time.Minute)))
	theirs := newTemplate(uuid.New(), "Theirs")
	addAll(t, db, postgres.Templates{}.Add, triage, review, theirs)

	page, err := store.ListTemplates(ctx, queries.ListTemplatesParams{Owner: owner})
	require.NoError(t, err)
	assert.Equal(t, 2, page.Total)
	require.Len(t, page.Items, 2)
	assert.Equal(t, review.ID(), page.Items[0].ID, "by name")
	assert.Equal(t, queries.TemplateSummary{ID: triage.ID(), Name: "Triage", ModelID: "claude-opus-4-6", IsActive: true,
		DefaultBudgetCapUsd: domain.Dollars(4), AllowedToolCount: 2, Scheduled: true, CreatedAt: c0, UpdatedAt: c0}, page.Items[1])
	active := true
	page, err = store.ListTemplates(ctx, queries.ListTemplatesParams{Owner: owner, IsActive: &active})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	assert.Equal(t, triage.ID(), page.Items[0].ID)

	detail, err := store.Template(ctx, owner, triage.ID())
	require.NoError(t, err)
	assert.Equal(t, []string{"Read", "Edit"}, detail.AllowedTools)
	assert.Equal(t, int64(1), detail.Version)
	_, err = store.Template(ctx, owner, theirs.ID())
	assert.ErrorIs(t, err, queries.ErrNotFound)
}
