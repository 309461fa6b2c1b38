package webhooks_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/webhooks"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// wait bounds every wait of these tests.
const wait = 30 * time.Second

// fixture is a database and a JetStream with the streams, and the worker
// running on them.
type fixture struct {
	db    *pgxpool.Pool
	js    jetstream.JetStream
	owner uuid.UUID
}

// quick is a configuration whose retries come within milliseconds.
func quick(cfg webhooks.Config) webhooks.Config {
	if cfg.RetrySchedule == nil {
		cfg.RetrySchedule = []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond,
			100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond,
			100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}
	}
	if cfg.AttemptTimeout == 0 {
		cfg.AttemptTimeout = 5 * time.Second
	}
	cfg.PollInterval = 20 * time.Millisecond
	return cfg
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	_, js, _ := bustest.Server(t)
	return &fixture{db: testenv.Postgres(t), js: js, owner: uuid.New()}
}

// run starts the worker with cfg (its DB and JS filled in) until the
// test ends.
func (f *fixture) run(t testing.TB, cfg webhooks.Config) {
	t.Helper()
	cfg.DB, cfg.JS = f.db, f.js
	w, err := webhooks.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// session stores a session of the fixture's owner.
func (f *fixture) session(t testing.TB) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	s, err := domain.NewAgentSession(domain.NewSessionParams{
		ID: uuid.New(), OwnerID: f.owner, WorkingDirectory: "/work/repo", Objective: "Add retries",
		ModelID: "claude-sonnet-4-5", Budget: domain.SessionBudget{HardCapUsd: domain.Dollars(10), WarnAtPercent: 80},
		Now: time.Now().Add(-time.Hour),
	})
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, f.db, func(tx pgx.Tx) error { return postgres.Sessions{}.Add(ctx, tx, s) }))
	return s.ID()
}

// webhook creates a webhook of the owner posting to url and returns its
// id and secret.
func (f *fixture) webhook(t testing.TB, url string, types ...string) (uuid.UUID, string) {
	t.Helper()
	key := make([]byte, domain.WebhookSecretBytes)
	_, _ = rand.Read(key)
	id, secret := uuid.New(), domain.NewWebhookSecret(key)
	require.NoError(t, postgres.CreateWebhook(context.Background(), f.db, postgres.NewWebhook{ID: id, Owner: f.owner, URL: url,
		EventTypes: types, Enabled: true, Secret: secret, Now: time.Now().Add(-time.Minute)}))
	return id, secret
}

// event publishes an event of the session on AGENTS_EVENTS and returns
// its id.
func (f *fixture) event(t testing.TB, session uuid.UUID, e domain.Event) string {
	t.Helper()
	data, err := json.Marshal(e)
	require.NoError(t, err)
	env := bus.Envelope{ID: uuid.NewString(), Type: e.EventType(), Aggregate: domain.AggregateSession,
		AggregateID: session.String(), OwnerID: f.owner.String(), OccurredAt: time.Now(), Data: data}
	ctx := context.Background()
	m, err := bus.NewMsg(ctx, bus.EventSubject(domain.AggregateSession, session.String(), e.EventType()), env)
	require.NoError(t, err)
	_, err = bus.PublishMsg(ctx, f.js, m)
	require.NoError(t, err)
	return env.ID
}
