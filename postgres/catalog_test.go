package postgres_test

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
)

var r0 = time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)

func tx(t *testing.T, db *pgxpool.Pool, fn func(ctx context.Context, tx pgx.Tx) error) error {
	t.Helper()
	ctx := context.Background()
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return fn(ctx, tx) })
}

func outboxTypes(t *testing.T, db *pgxpool.Pool, id uuid.UUID) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), "SELECT type FROM outbox WHERE aggregate_id = $1 ORDER BY position", id)
	require.NoError(t, err)
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return types
}

func TestChainsStoreAndFindBySession(t *testing.T) {
	db := testenv.Postgres(t)
	owner := uuid.New()
	first, err := domain.NewAgentSession(domain.NewSessionParams{ID: uuid.New(), OwnerID: owner, WorkingDirectory: "/repo",
		Objective: "Port the parser", ModelID: "claude-sonnet-4-5", Budget: domain.SessionBudget{HardCapUsd: domain.Dollars(1), WarnAtPercent: 80}, Now: r0})
	require.NoError(t, err)
	c, err := domain.NewSessionChain(uuid.New(), owner, "Port the parser", first.ID(), r0)
	require.NoError(t, err)
	require.NoError(t, first.AssignToChain(c.ID(), r0))
	require.NoError(t, tx(t, db, func(ctx context.Context, tx pgx.Tx) error {
		if err := (postgres.Sessions{}).Add(ctx, tx, first); err != nil {
			return err
		}
		return postgres.Chains{}.Add(ctx, tx, c)
	}))

	found, err := postgres.Chains{}.GetBySession(context.Background(), db, first.ID())
	require.NoError(t, err)
	assert.Equal(t, c.ID(), found.ID())
	assert.Equal(t, int64(1), found.Version())
	_, err = postgres.Chains{}.GetBySession(context.Background(), db, uuid.New())
	assert.ErrorIs(t, err, postgres.ErrNotFound)

	next := uuid.New()
	require.NoError(t, tx(t, db, func(ctx context.Context, tx pgx.Tx) error {
		_, err := postgres.Chains{}.Update(ctx, tx, c.ID(), func(c *domain.SessionChain) error {
			if _, err := c.InitiateHandoff(uuid.New(), first.ID(), "done", "todo", "", r0.Add(time.Hour)); err != nil {
				return err
			}
			return c.AttachSession(next, r0.Add(2*time.Hour))
		})
		return err
	}))
	var status string
	var updated time.Time
	require.NoError(t, db.QueryRow(context.Background(), "SELECT status, updated_at FROM chains WHERE id = $1", c.ID()).Scan(&status, &updated))
	assert.Equal(t, "Active", status)
	assert.True(t, updated.Equal(r0.Add(2*time.Hour)), "updated_at is the latest change")
	_, err = postgres.Chains{}.GetBySession(context.Background(), db, next)
	assert.ErrorIs(t, err, postgres.ErrNotFound, "a session whose row names no chain is found in none")

	// A stale copy loses to the save that came first.
	stale, err := postgres.Chains{}.Get(context.Background(), db, c.ID())
	require.NoError(t, err)
	require.NoError(t, tx(t, db, func(ctx context.Context, tx pgx.Tx) error {
		_, err := postgres.Chains{}.Update(ctx, tx, c.ID(), func(c *domain.SessionChain) error { return c.Cancel(r0.Add(3 * time.Hour)) })
		return err
	}))
	require.NoError(t, stale.Cancel(r0.Add(4*time.Hour)))
	err = tx(t, db, func(ctx context.Context, tx pgx.Tx) error { return postgres.Chains{}.Save(ctx, tx, stale) })
	assert.ErrorIs(t, err, postgres.ErrVersionConflict)
	require.NoError(t, db.QueryRow(context.Background(), "SELECT status FROM chains WHERE id = $1", c.ID()).Scan(&status))
	assert.Equal(t, "Cancelled", status)
	assert.Equal(t, []string{"session_chain_created", "session_handoff_initiated", "session_added_to_chain", "session_chain_cancelled"},
		outboxTypes(t, db, c.ID()))
}

func TestSkillsAndTemplatesKeepTheirColumnsInSync(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	owner := uuid.New()
	sk, err := domain.NewAgentSkill(uuid.New(), owner, "Go style", "How we write Go", "", nil, nil, r0)
	require.NoError(t, err)
	tmpl, err := domain.NewAgentTemplate(domain.NewTemplateParams{ID: uuid.New(), OwnerID: owner, Name: "Fixer", ModelID: "claude-opus-4-6",
		AllowedTools: []string{"Read"}, DefaultBudget: domain.SessionBudget{HardCapUsd: domain.Dollars(2), WarnAtPercent: 80}, Now: r0})
	require.NoError(t, err)
	require.NoError(t, tx(t, db, func(ctx context.Context, tx pgx.Tx) error {
		if err := (postgres.Skills{}).Add(ctx, tx, sk); err != nil {
			return err
		}
		return postgres.Templates{}.Add(ctx, tx, tmpl)
	}))
	err = tx(t, db, func(ctx context.Context, tx pgx.Tx) error { return postgres.Skills{}.Add(ctx, tx, sk) })
	assert.ErrorIs(t, err, domain.ErrDuplicate)

	require.NoError(t, tx(t, db, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := (postgres.Skills{}).Update(ctx, tx, sk.ID(), func(s *domain.AgentSkill) error {
			if err := s.UpdateDetails("Go conventions", "", r0.Add(time.Hour)); err != nil {
				return err
			}
			return s.Deactivate(r0.Add(time.Hour))
		}); err != nil {
			return err
		}
		_, err := postgres.Templates{}.Update(ctx, tx, tmpl.ID(), func(t *domain.AgentTemplate) error {
			name := "Careful fixer"
			if err := t.Update(domain.TemplateUpdate{Name: &name}, r0.Add(time.Hour)); err != nil {
				return err
			}
			return t.Deactivate(r0.Add(time.Hour))
		})
		return err
	}))
	for _, table := range []struct {
		name string
		id   uuid.UUID
		want string
	}{{"skills", sk.ID(), "Go conventions"}, {"templates", tmpl.ID(), "Careful fixer"}} {
		var (
			name    string
			active  bool
			version int64
			updated time.Time
		)
		require.NoError(t, db.QueryRow(ctx, "SELECT name, is_active, version, updated_at FROM "+table.name+" WHERE id = $1", table.id).
			Scan(&name, &active, &version, &updated))
		assert.Equal(t, table.want, name, table.name)
		assert.False(t, active, table.name)
		assert.Equal(t, int64(2), version, table.name)
		assert.True(t, updated.Equal(r0.Add(time.Hour)), table.name)
	}
	loaded, err := postgres.Skills{}.Get(ctx, db, sk.ID())
	require.NoError(t, err)
	assert.Equal(t, "Go conventions", loaded.Name())
	assert.Equal(t, int64(2), loaded.Version())

	taken, err := postgres.Skills{}.NameTaken(ctx, db, owner, "GO CONVENTIONS", uuid.New())
	require.NoError(t, err)
	assert.True(t, taken)
	taken, err = postgres.Skills{}.NameTaken(ctx, db, owner, "Go conventions", sk.ID())
	require.NoError(t, err)
	assert.False(t, taken, "a skill keeps its own name")
}
