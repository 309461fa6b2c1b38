package webhooks_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
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

func newFixture(t *testing.T) *fixture {
	t.Helper()
	_, js, _ := bustest.Server(t)
	return &fixture{db: testenv.Postgres(t), js: js, owner: uuid.New()}
}

// run starts the worker with cfg (its DB and JS filled in) until the
// test ends.
func (f *fixture) run(t *testing.T, cfg webhooks.Config) {
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
func (f *fixture) session(t *testing.T) uuid.UUID {
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
func (f *fixture) webhook(t *testing.T, url string, types ...string) (uuid.UUID, string) {
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
func (f *fixture) event(t *testing.T, session uuid.UUID, e domain.Event) string {
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

// received is one request a receiver got.
type received struct {
	header http.Header
	body   []byte
	status int
}

// receiver is a webhook endpoint on loopback that records every request
// and answers with answer's status (200 when nil).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(n int) int
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	r := &receiver{answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		status := http.StatusOK
		if r.answer != nil {
			status = r.answer(len(r.got))
		}
		r.got = append(r.got, received{header: req.Header.Clone(), body: body, status: status})
		r.mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte("ok from the receiver"))
	}))
	t.Cleanup(r.Close)
	return r
}

// requests returns what the receiver got so far.
func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// accepted returns the ids of the requests the receiver answered 2xx, in
// the order it got them, each once (a receiver dedupes on webhook-id).
func (r *receiver) accepted() []string {
	var ids []string
	seen := map[string]bool{}
	for _, g := range r.requests() {
		id := g.header.Get(webhooks.HeaderID)
		if g.status/100 == 2 && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// verify checks a request's signature with secret, as a receiver does
// with the Standard Webhooks library.
func verify(t *testing.T, g received, secret string) error {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	return wh.Verify(g.body, g.header)
}
