package queries_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/postgres/queries"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The Store is what the HTTP API authenticates agents and session owners with.
var (
	_ api.AgentKeys     = (*queries.Store)(nil)
	_ api.SessionOwners = (*queries.Store)(nil)
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

type fixture struct {
	db    *pgxpool.Pool
	store *queries.Store
	pool  domain.SessionPool
	now   time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := testenv.Postgres(t)
	pool, err := domain.NewSessionPool(domain.SessionPoolConfig{MaxConcurrentSessions: 3})
	require.NoError(t, err)
	f := &fixture{db: db, pool: pool, now: t0.Add(24 * time.Hour)}
	f.store = queries.New(db, pool)
	f.store.Now = func() time.Time { return f.now }
	return f
}

// session stores a new session of owner created at createdAt, moved on by
// the steps (each a domain operation), and returns it with its API key.
func (f *fixture) session(t *testing.T, owner uuid.UUID, createdAt time.Time, steps ...func(*domain.AgentSession, time.Time) error) (*domain.AgentSession, string) {
	t.Helper()
	ctx := context.Background()
	s, err := domain.NewAgentSession(domain.NewSessionParams{
		ID: uuid.New(), OwnerID: owner, WorkingDirectory: "/work/repo", Objective: "Add retries to the HTTP client",
		ModelID: "claude-sonnet-4-5", Budget: domain.SessionBudget{HardCapUsd: domain.Dollars(10), WarnAtPercent: 80},
		Now: createdAt,
	})
	require.NoError(t, err)
	key, err := s.GenerateAPIKey(rand.Reader)
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, f.db, func(tx pgx.Tx) error { return postgres.Sessions{}.Add(ctx, tx, s) }))
	if len(steps) == 0 {
		return s, key
	}
	require.NoError(t, pgx.BeginFunc(ctx, f.db, func(tx pgx.Tx) error {
		var err error
		s, err = postgres.Sessions{}.Update(ctx, tx, s.ID(), func(s *domain.AgentSession) error {
			at := createdAt
			for _, step := range steps {
				at = at.Add(time.Minute)
				if err := step(s, at); err != nil {
					return err
				}
			}
			return nil
		})
		return err
	}))
	return s, key
}

func (f *fixture) start(s *domain.AgentSession, at time.Time) error { return f.pool.Allocate(s, 0, at) }

func turnCompleted(s *domain.AgentSession, at time.Time) error { return s.RecordTurnCompleted(at) }

func TestSessionIsScopedToItsOwner(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	alice, bob := uuid.New(), uuid.New()
	s, _ := f.session(t, alice, t0, f.start)

	got, err := f.store.Session(ctx, alice, s.ID())
	require.NoError(t, err)
	assert.Equal(t, s.ID(), got.ID)
	assert.Equal(t, domain.StatusRunning, got.Status)
	assert.EqualValues(t, 2, got.Version)
	assert.Empty(t, got.APIKeyHash, "the key's hash never leaves the store")

	for name, call := range map[string]func() error{
		"another owner's":  func() error { _, err := f.store.Session(ctx, bob, s.ID()); return err },
		"an unknown":       func() error { _, err := f.store.Session(ctx, alice, uuid.New()); return err },
		"task list":        func() error { _, err := f.store.TaskList(ctx, bob, s.ID()); return err },
		"plan":             func() error { _, err := f.store.Plan(ctx, bob, s.ID()); return err },
		"metrics":          func() error { _, err := f.store.Metrics(ctx, bob, s.ID()); return err },
		"queue":            func() error { _, err := f.store.Queue(ctx, bob, s.ID()); return err },
		"permissions":      func() error { _, err := f.store.PendingPermissions(ctx, bob, s.ID()); return err },
		"unknown's owner":  func() error { _, err := f.store.Owner(ctx, uuid.New()); return err },
		"unknown key hash": func() error { _, _, err := f.store.LookupSession(ctx, [32]byte{1}); return err },
	} {
		err := call()
		require.ErrorIs(t, err, queries.ErrNotFound, name)
		var k interface{ Kind() string }
		require.ErrorAs(t, err, &k, name)
		assert.Equal(t, api.KindNotFound, k.Kind(), name)
	}
}

func TestListSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	alice, bob := uuid.New(), uuid.New()
	var ids []uuid.UUID
	for i := range 5 {
		var steps []func(*domain.AgentSession, time.Time) error
		if i%2 == 1 {
			steps = append(steps, f.start)
		}
		s, _ := f.session(t, alice, t0.Add(time.Duration(i)*time.Hour), steps...)
		ids = append(ids, s.ID())
	}
	f.session(t, bob, t0)

	tests := []struct {
		name      string
		params    queries.ListSessionsParams
		wantIDs   []uuid.UUID
		wantTotal int
		wantPage  int
		wantSize  int
	}{
		{"all, newest first", queries.ListSessionsParams{Owner: alice}, []uuid.UUID{ids[4], ids[3], ids[2], ids[1], ids[0]}, 5, 1, queries.DefaultPageSize},
		{"first page", queries.ListSessionsParams{Owner: alice, Paging: queries.Paging{Page: 1, PageSize: 2}}, []uuid.UUID{ids[4], ids[3]}, 5, 1, 2},
		{"last page", queries.ListSessionsParams{Owner: alice, Paging: queries.Paging{Page: 3, PageSize: 2}}, []uuid.UUID{ids[0]}, 5, 3, 2},
		{"past the end", queries.ListSessionsParams{Owner: alice, Paging: queries.Paging{Page: 9, PageSize: 2}}, []uuid.UUID{}, 5, 9, 2},
		{"by status", queries.ListSessionsParams{Owner: alice, Status: domain.StatusRunning}, []uuid.UUID{ids[3], ids[1]}, 2, 1, queries.DefaultPageSize},
		{"page size capped", queries.ListSessionsParams{Owner: alice, Paging: queries.Paging{PageSize: 1000}}, []uuid.UUID{ids[4], ids[3], ids[2], ids[1], ids[0]}, 5, 1, queries.MaxPageSize},
		{"another owner", queries.ListSessionsParams{Owner: uuid.New()}, []uuid.UUID{}, 0, 1, queries.DefaultPageSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := f.store.ListSessions(ctx, tt.params)
			require.NoError(t, err)
			got := []uuid.UUID{}
			for _, it := range page.Items {
				got = append(got, it.ID)
			}
			assert.Equal(t, tt.wantIDs, got)
			assert.Equal(t, tt.wantTotal, page.Total)
			assert.Equal(t, tt.wantPage, page.Page)
			assert.Equal(t, tt.wantSize, page.PageSize)
		})
	}

	t.Run("by template", func(t *testing.T) {
		carol, tmpl := uuid.New(), uuid.New()
		var fromTemplate uuid.UUID
		for _, template := range []*uuid.UUID{&tmpl, nil, new(uuid.New())} {
			s, err := domain.NewAgentSession(domain.NewSessionParams{
				ID: uuid.New(), OwnerID: carol, WorkingDirectory: "/work/repo", Objective: "Nightly checks",
				ModelID: "claude-sonnet-4-5", Budget: domain.SessionBudget{HardCapUsd: domain.Dollars(10), WarnAtPercent: 80},
				TemplateID: template, Now: t0,
			})
			require.NoError(t, err)
			require.NoError(t, pgx.BeginFunc(ctx, f.db, func(tx pgx.Tx) error { return postgres.Sessions{}.Add(ctx, tx, s) }))
			if template == &tmpl {
				fromTemplate = s.ID()
			}
		}
		page, err := f.store.ListSessions(ctx, queries.ListSessionsParams{Owner: carol, TemplateID: &tmpl})
		require.NoError(t, err)
		require.Len(t, page.Items, 1)
		assert.Equal(t, 1, page.Total)
		assert.Equal(t, fromTemplate, page.Items[0].ID)
		assert.Equal(t, &tmpl, page.Items[0].TemplateID)
		page, err = f.store.ListSessions(ctx, queries.ListSessionsParams{Owner: carol, Status: domain.StatusQueued, TemplateID: &tmpl})
		require.NoError(t, err)
		assert.Equal(t, 1, page.Total, "with a status too")
	})

	t.Run("summary fields", func(t *testing.T) {
		page, err := f.store.ListSessions(ctx, queries.ListSessionsParams{Owner: alice, Status: domain.StatusRunning, Paging: queries.Paging{PageSize: 1}})
		require.NoError(t, err)
		it := page.Items[0]
		assert.Equal(t, "Add retries to the HTTP client", it.Name)
		// Started a minute after creation at t0+3h; the clock is t0+24h.
		assert.Equal(t, 24*time.Hour-3*time.Hour-time.Minute, it.Elapsed)
		require.NotNil(t, it.StartedAt)
	})
	t.Run("unknown status", func(t *testing.T) {
		_, err := f.store.ListSessions(ctx, queries.ListSessionsParams{Owner: alice, Status: "Sleeping"})
		require.ErrorIs(t, err, domain.ErrValidation)
	})
}

func TestHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	alice := uuid.New()
	output := func(s *domain.AgentSession, at time.Time) error {
		return s.RecordOutput(domain.SessionOutput{FilesChanged: 2}, at)
	}
	approved, _ := f.session(t, alice, t0, f.start, output, (*domain.AgentSession).ApproveOutput)
	rejected, _ := f.session(t, alice, t0.Add(24*time.Hour), f.start, output, func(s *domain.AgentSession, at time.Time) error {
		return s.RejectOutput("tests fail", at)
	})
	closed, _ := f.session(t, alice, t0.Add(48*time.Hour), f.start, turnCompleted, (*domain.AgentSession).Close)
	queued, _ := f.session(t, alice, t0.Add(72*time.Hour))

	page, err := f.store.History(ctx, queries.HistoryParams{Owner: alice})
	require.NoError(t, err)
	require.Len(t, page.Items, 4)
	byID := map[uuid.UUID]queries.HistoryItem{}
	for _, it := range page.Items {
		byID[it.ID] = it
	}
	assert.Equal(t, queries.OutcomeApproved, byID[approved.ID()].Outcome)
	assert.Equal(t, 2*time.Minute, byID[approved.ID()].Duration, "from start to approval")
	assert.Equal(t, queries.OutcomeRejected, byID[rejected.ID()].Outcome)
	assert.Equal(t, "tests fail", byID[rejected.ID()].Failure.Message)
	assert.Equal(t, queries.OutcomeClosed, byID[closed.ID()].Outcome)
	assert.Equal(t, queries.OutcomeInProgress, byID[queued.ID()].Outcome)
	assert.Zero(t, byID[queued.ID()].Duration)

	t.Run("date range", func(t *testing.T) {
		page, err := f.store.History(ctx, queries.HistoryParams{Owner: alice, From: t0.Add(24 * time.Hour), To: t0.Add(72 * time.Hour)})
		require.NoError(t, err)
		assert.Equal(t, 2, page.Total)
		require.Len(t, page.Items, 2)
		assert.Equal(t, closed.ID(), page.Items[0].ID)
		assert.Equal(t, rejected.ID(), page.Items[1].ID)
	})
	t.Run("from only, paged", func(t *testing.T) {
		page, err := f.store.History(ctx, queries.HistoryParams{Owner: alice, From: t0.Add(time.Hour), Paging: queries.Paging{Page: 2, PageSize: 2}})
		require.NoError(t, err)
		assert.Equal(t, 3, page.Total)
		require.Len(t, page.Items, 1)
		assert.Equal(t, rejected.ID(), page.Items[0].ID)
	})
	t.Run("from after to", func(t *testing.T) {
		_, err := f.store.History(ctx, queries.HistoryParams{Owner: alice, From: t0, To: t0})
		require.ErrorIs(t, err, domain.ErrValidation)
	})
}

func TestQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	alice := uuid.New()
	s, _ := f.session(t, alice, t0, f.start)

	empty, err := f.store.Queue(ctx, alice, s.ID())
	require.NoError(t, err)
	assert.Equal(t, s.ID(), empty.SessionID)
	assert.Empty(t, empty.Pending)
	assert.Empty(t, empty.Messages)

	ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New(), uuid.New()}
	require.NoError(t, pgx.BeginFunc(ctx, f.db, func(tx pgx.Tx) error {
		_, err := postgres.Queues{}.Update(ctx, tx, s.ID(), alice, func(q *domain.SessionMessageQueue) error {
			for i, p := range []domain.MessagePriority{domain.PriorityQueued, domain.PriorityImmediate, domain.PriorityQueued, domain.PriorityImmediate} {
				if _, err := q.Enqueue(ids[i], "message", p, domain.MessageFromUser, domain.StatusRunning, t0.Add(time.Duration(i)*time.Second)); err != nil {
					return err
				}
			}
			if err := q.MarkDelivered(ids[1], t0.Add(time.Minute)); err != nil {
				return err
			}
			return q.Cancel(ids[2], t0.Add(time.Minute))
		})
		return err
	}))

	view, err := f.store.Queue(ctx, alice, s.ID())
	require.NoError(t, err)
	var pending, all []uuid.UUID
	for _, m := range view.Pending {
		pending = append(pending, m.MessageID)
	}
	for _, m := range view.Messages {
		all = append(all, m.MessageID)
	}
	assert.Equal(t, []uuid.UUID{ids[3], ids[0]}, pending, "Immediate first, then Queued")
	assert.Equal(t, ids, all, "every message in arrival order")
}

func TestSessionParts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	alice := uuid.New()
	bare, _ := f.session(t, alice, t0, f.start)

	list, err := f.store.TaskList(ctx, alice, bare.ID())
	require.NoError(t, err)
	assert.Nil(t, list, "no task list before the agent writes one")
	plan, err := f.store.Plan(ctx, alice, bare.ID())
	require.NoError(t, err)
	assert.Nil(t, plan)
	metrics, err := f.store.Metrics(ctx, alice, bare.ID())
	require.NoError(t, err)
	assert.Zero(t, metrics.TurnCount)
	perms, err := f.store.PendingPermissions(ctx, alice, bare.ID())
	require.NoError(t, err)
	assert.Empty(t, perms)

	full, _ := f.session(t, alice, t0, f.start,
		func(s *domain.AgentSession, at time.Time) error {
			return s.UpdateSessionTaskList([]domain.SessionTask{{ID: "1", Subject: "Write tests", Status: domain.TaskCompleted}}, at)
		},
		func(s *domain.AgentSession, at time.Time) error { return s.RecordPlanCreated("1. tests 2. code", at) },
		func(s *domain.AgentSession, at time.Time) error {
			return s.UpdateMetrics(domain.MetricsUpdate{ModelID: "claude-sonnet-4-5", Cost: domain.Dollars(1),
				Tokens:        domain.TokenUsage{InputTokens: 100, OutputTokens: 50},
				ContextWindow: domain.ContextWindowSnapshot{InputTokens: 1000, ModelContextLimit: 200000}}, at)
		},
	)
	list, err = f.store.TaskList(ctx, alice, full.ID())
	require.NoError(t, err)
	require.NotNil(t, list)
	assert.Equal(t, "Write tests", list.Tasks[0].Subject)
	plan, err = f.store.Plan(ctx, alice, full.ID())
	require.NoError(t, err)
	require.NotNil(t, plan)
	assert.Equal(t, "1. tests 2. code", plan.Content)
	metrics, err = f.store.Metrics(ctx, alice, full.ID())
	require.NoError(t, err)
	assert.Equal(t, domain.Dollars(1), metrics.TotalCostUsd)
	assert.EqualValues(t, 150, metrics.TokenUsageByModel["claude-sonnet-4-5"].TotalTokens())
	assert.InDelta(t, 0.5, metrics.ContextWindowUsagePercent(), 1e-9)
}

func TestPendingPermissions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	alice := uuid.New()
	s, err := domain.NewAgentSession(domain.NewSessionParams{
		ID: uuid.New(), OwnerID: alice, WorkingDirectory: "/work/repo", Objective: "Refactor", ModelID: "m",
		Budget:       domain.SessionBudget{HardCapUsd: domain.Dollars(10), WarnAtPercent: 80},
		ToolApproval: &domain.ToolApprovalPolicy{Mode: domain.ApprovalAll, Timeout: time.Minute, OnTimeout: domain.TimeoutDeny},
		Now:          t0,
	})
	require.NoError(t, err)
	_, err = s.GenerateAPIKey(rand.Reader)
	require.NoError(t, err)
	require.NoError(t, f.pool.Allocate(s, 0, t0))
	_, err = s.RequestToolPermission("req-1", "Bash", `{"command":"ls"}`, t0)
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, f.db, func(tx pgx.Tx) error { return postgres.Sessions{}.Add(ctx, tx, s) }))

	perms, err := f.store.PendingPermissions(ctx, alice, s.ID())
	require.NoError(t, err)
	require.Len(t, perms, 1)
	assert.Equal(t, "req-1", perms[0].RequestID)
	assert.Equal(t, "Bash", perms[0].ToolName)
}

func TestPoolUtilization(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	alice, bob := uuid.New(), uuid.New()
	f.session(t, alice, t0)                                                       // Queued: no slot
	f.session(t, alice, t0, f.start)                                              // Running
	f.session(t, alice, t0, f.start, turnCompleted)                               // Idle
	f.session(t, alice, t0, f.start, turnCompleted, (*domain.AgentSession).Close) // Completed: slot given back
	f.session(t, alice, t0, f.start, (*domain.AgentSession).RequestCancel)        // Cancelling: still live
	f.session(t, bob, t0, f.start)                                                // another owner's pool

	u, err := f.store.PoolUtilization(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, domain.SessionPoolUtilization{ActiveCount: 3, MaxCount: 3, AvailableSlots: 0, UtilizationPercent: 100}, u)

	u, err = f.store.PoolUtilization(ctx, uuid.New())
	require.NoError(t, err)
	assert.Equal(t, 0, u.ActiveCount)
	assert.Equal(t, 3, u.AvailableSlots)
}

func TestAgentKeysAndOwners(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	alice := uuid.New()
	s, key := f.session(t, alice, t0)

	// The API hashes the presented key its way, the domain stored it its
	// way: both must name the same row.
	require.Equal(t, domain.HashAPIKey(key), hexOf(api.HashAgentKey(key)))
	id, owner, err := f.store.LookupSession(ctx, api.HashAgentKey(key))
	require.NoError(t, err)
	assert.Equal(t, s.ID(), id)
	assert.Equal(t, alice.String(), owner)

	_, _, err = f.store.LookupSession(ctx, api.HashAgentKey(key+"x"))
	require.ErrorIs(t, err, queries.ErrNotFound)

	got, err := f.store.Owner(ctx, s.ID())
	require.NoError(t, err)
	assert.Equal(t, alice.String(), got)
}

func hexOf(h [32]byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 64)
	for _, b := range h {
		out = append(out, digits[b>>4], digits[b&15])
	}
	return string(out)
}
