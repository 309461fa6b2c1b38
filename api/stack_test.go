package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/commands"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres/queries"
	"github.com/agentbus/agentbus/sidecar/workspace"
)

// stack is the API over HTTP on the real pipeline: a fresh Postgres
// database, an embedded JetStream server, the commands worker and the
// command client.
type stack struct {
	srv     *Server
	http    *httptest.Server
	db      *pgxpool.Pool
	nats    *server.Server
	client  *command.Client
	workers *commands.Dispatcher
}

// newStack starts the stack; with startWorker false the commands worker is
// not running until st.startWorker is called.
func newStack(t testing.TB, cfg Config, startWorker bool) *stack {
	t.Helper()
	db := testenv.Postgres(t)
	ns, js, nc := bustest.Server(t)
	client, err := command.NewClient(nc, js, commands.Results{Pool: db})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	store := queries.New(db, domain.SessionPool{})
	if cfg.JWTSecret == "" {
		cfg.JWTSecret = testSecret
	}
	if cfg.Workspace == "" {
		cfg.Workspace = workspace.Root(t.TempDir())
	}
	srv, err := New(cfg, Deps{AgentKeys: store, SessionOwners: store, Idempotency: NewPostgresIdempotency(db),
		JetStream: js, Commands: client, Results: commands.Results{Pool: db}, Queries: store, WebhookDB: db})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	st := &stack{srv: srv, http: hs, db: db, nats: ns, client: client}
	st.workers = commands.NewDispatcher(db, nc, commands.Classify)
	commands.Register(st.workers, nil, domain.SessionPool{})
	if startWorker {
		st.startWorker(t)
	}
	return st
}

// startWorker runs the commands worker until the test ends.
func (st *stack) startWorker(t testing.TB) {
	_, wjs := bustest.Connect(t, st.nats)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = bus.Run(ctx, wjs, bus.RunnerConfig{Stream: bus.StreamCommands, Consumer: commands.Consumer,
			Handler: st.workers.Handle, Concurrency: 8})
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// response is an HTTP answer.
type response struct {
	Code   int
	Header http.Header
	Body   []byte
}

func (r response) String() string { return string(r.Body) }

// decode decodes the body into T.
func decode[T any](t testing.TB, r response) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(r.Body, &v), r.String())
	return v
}

// problem decodes a problem+json body.
func (r response) problem(t testing.TB) map[string]any {
	t.Helper()
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), r.String())
	return decode[map[string]any](t, r)
}

// call sends a request; each of headers is "Name: value" (an empty one is
// skipped) and body, when not nil, is sent as JSON (a string as it is).
func (st *stack) call(t testing.TB, method, path string, body any, headers ...string) response {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, st.http.URL+path, r)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		if h == "" {
			continue
		}
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Set(name, value)
	}
	resp, err := st.http.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{Code: resp.StatusCode, Header: resp.Header, Body: raw}
}

// user is a person with a token whose sub is a UUID.
type user struct {
	id   uuid.UUID
	auth string
	// skill is a skill of the user, when a test made one.
	skill uuid.UUID
}

func newUser(t testing.TB) user {
	id := uuid.New()
	tok, err := NewToken(testSecret, id.String(), time.Hour)
	require.NoError(t, err)
	return user{id: id, auth: "Authorization: Bearer " + tok}
}

func agentAuth(key string) string { return AgentKeyHeader + ": " + key }

// startBody is a valid start request.
func startBody() map[string]any {
	return map[string]any{
		"workingDirectory": "src/shop",
		"objective":        "Add retries with backoff to the HTTP client, with tests.",
		"budgetCapUsd":     10,
	}
}

// start starts a session for u and returns it with its agent key.
func (st *stack) start(t testing.TB, u user, extra map[string]any) (SessionDetail, string) {
	t.Helper()
	body := startBody()
	for k, v := range extra {
		body[k] = v
	}
	resp := st.call(t, http.MethodPost, "/api/agents/sessions", body, u.auth)
	require.Equal(t, http.StatusCreated, resp.Code, resp.String())
	out := decode[StartSessionResponse](t, resp)
	require.NotEmpty(t, out.APIKey)
	return out.Session, out.APIKey
}

// internal sends an internal session command, as the workers of the
// pipeline do, and requires it to succeed.
func (st *stack) internal(t testing.TB, id uuid.UUID, name string, data any) domain.AgentSessionSnapshot {
	t.Helper()
	cmd, err := command.New(domain.AggregateSession, name, id, "", data)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := st.client.Do(ctx, cmd)
	require.NoError(t, err)
	require.Nil(t, res.Error, "%s: %v", name, res.Error)
	var snap domain.AgentSessionSnapshot
	require.NoError(t, json.Unmarshal(res.State, &snap))
	return snap
}

// skill creates an active skill of u, through the commands worker.
func (st *stack) skill(t testing.TB, u user, name string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	cmd, err := command.New(domain.AggregateSkill, command.CreateSkill, id, u.id.String(),
		command.CreateSkillData{Name: name, Description: "How to " + name, Instructions: "Use exponential backoff."})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := st.client.Do(ctx, cmd)
	require.NoError(t, err)
	require.Nil(t, res.Error, "create skill: %v", res.Error)
	return id
}

// The states a test puts a session in, through the commands the pipeline
// sends when the agent reports.
func (st *stack) running(t testing.TB, u user, extra map[string]any) (SessionDetail, string) {
	s, key := st.start(t, u, extra)
	st.internal(t, s.ID, command.AllocateSession, nil)
	return s, key
}

func (st *stack) idle(t testing.TB, u user, extra map[string]any) SessionDetail {
	s, _ := st.running(t, u, extra)
	st.internal(t, s.ID, command.RecordTurnCompleted, nil)
	return s
}

func (st *stack) inReview(t testing.TB, u user) SessionDetail {
	s, _ := st.running(t, u, nil)
	st.internal(t, s.ID, command.RecordAgentOutput, command.OutputData{Output: domain.SessionOutput{FilesChanged: 3, AllTestsPassing: true}})
	return s
}

func (st *stack) paused(t testing.TB, u user) SessionDetail {
	s, _ := st.running(t, u, nil)
	pausing := st.internal(t, s.ID, command.PauseSession, nil)
	require.Len(t, pausing.AwaitedAcks, 1)
	st.internal(t, s.ID, command.ConfirmPaused, command.AckData{CommandID: pausing.AwaitedAcks[0].CommandID})
	return s
}

func (st *stack) failed(t testing.TB, u user) SessionDetail {
	s, _ := st.running(t, u, nil)
	st.internal(t, s.ID, command.RecordFailure, command.FailureData{Reason: domain.FailureAgentError, Message: "exit 1"})
	return s
}

func (st *stack) waitingForInput(t testing.TB, u user) SessionDetail {
	s, _ := st.running(t, u, nil)
	st.internal(t, s.ID, command.RecordQuestionAsked, command.QuestionData{Content: "POST too?", Options: []string{"Yes", "No"}})
	return s
}

func (st *stack) waitingForPlan(t testing.TB, u user) SessionDetail {
	s, _ := st.running(t, u, nil)
	st.internal(t, s.ID, command.RecordPlanPending, command.PlanData{Content: "1. policy 2. tests", RequiresApproval: true})
	return s
}

func (st *stack) waitingForPermission(t testing.TB, u user) SessionDetail {
	s, _ := st.running(t, u, map[string]any{"toolApproval": map[string]any{"mode": "All"}})
	st.internal(t, s.ID, command.RequestPermission, command.PermissionRequestData{RequestID: "toolu_1", ToolName: "Bash", Input: `{"command":"ls"}`})
	return s
}

// session reads a session through the API.
func (st *stack) session(t testing.TB, u user, id uuid.UUID) SessionDetail {
	t.Helper()
	resp := st.call(t, http.MethodGet, "/api/agents/sessions/"+id.String(), nil, u.auth)
	require.Equal(t, http.StatusOK, resp.Code, resp.String())
	return decode[SessionDetail](t, resp)
}
