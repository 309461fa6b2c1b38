package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/testenv"
)

type counterInput struct {
	Name string `path:"name" doc:"The counter." example:"a"`
	Body struct {
		Amount int    `json:"amount" doc:"How much to add." example:"1"`
		Mode   string `json:"mode,omitempty" enum:"ok,fail,conflict,block" doc:"How the handler behaves." example:"ok"`
	}
}

type counterOutput struct {
	Location string `header:"Location" doc:"The counter's URL." example:"/test/counters/a"`
	Status   int
	Body     struct {
		Total     int    `json:"total" doc:"The counter's total." example:"3"`
		CommandID string `json:"commandId" doc:"The command's id." example:"6f1c2b0e-3d4a-4e5f-8a9b-0c1d2e3f4a5b"`
	}
}

// counters is a handler with an observable effect: it adds to a counter.
type counters struct {
	mu      sync.Mutex
	totals  map[string]int
	calls   atomic.Int64
	block   chan struct{}
	entered chan struct{}
}

func (c *counters) add(ctx context.Context, in *counterInput) (*counterOutput, error) {
	c.calls.Add(1)
	switch in.Body.Mode {
	case "fail":
		return nil, errors.New("database is down")
	case "conflict":
		return nil, NewKindError(KindConflict, "counter is frozen").WithCurrentStatus("Frozen")
	case "block":
		c.entered <- struct{}{}
		<-c.block
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.totals[in.Name] += in.Body.Amount
	out := &counterOutput{Location: "/test/counters/" + in.Name, Status: http.StatusCreated}
	out.Body.Total = c.totals[in.Name]
	out.Body.CommandID = CommandID(ctx).String()
	return out, nil
}

func (c *counters) total(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.totals[name]
}

func idempotentServer(t *testing.T, store IdempotencyStore) (*Server, *counters) {
	t.Helper()
	s := newServer(t, Config{}, Deps{Idempotency: store})
	c := &counters{totals: map[string]int{}, block: make(chan struct{}), entered: make(chan struct{}, 1)}
	register(s.API(), huma.Operation{
		OperationID: "test-add", Method: http.MethodPost, Path: "/test/counters/{name}", Summary: "Add", Tags: []string{"Test"},
		Security: HumanAuth, DefaultStatus: http.StatusCreated,
	}, c.add)
	return s, c
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	store := NewPostgresIdempotency(testenv.Postgres(t))
	s, c := idempotentServer(t, store)
	api := testAPI(t, s)
	alice, bob := bearer(t, "alice"), bearer(t, "bob")
	body := func(amount int, mode string) map[string]any { return map[string]any{"amount": amount, "mode": mode} }

	first := api.Post("/test/counters/a", alice, "Idempotency-Key: k1", body(2, "ok"))
	require.Equal(t, 201, first.Code, first.Body.String())
	assert.Equal(t, 2, c.total("a"))
	assert.Empty(t, first.Header().Get(IdempotentReplayedHeader))

	t.Run("repeat returns the first response and changes nothing", func(t *testing.T) {
		again := api.Post("/test/counters/a", alice, "Idempotency-Key: k1", body(2, "ok"))
		require.Equal(t, 201, again.Code)
		assert.Equal(t, first.Body.String(), again.Body.String())
		assert.Equal(t, "/test/counters/a", again.Header().Get("Location"))
		assert.Equal(t, "application/json", again.Header().Get("Content-Type"))
		assert.Equal(t, "true", again.Header().Get(IdempotentReplayedHeader))
		assert.Equal(t, 2, c.total("a"))
	})
	t.Run("same key with another body is refused", func(t *testing.T) {
		resp := api.Post("/test/counters/a", alice, "Idempotency-Key: k1", body(5, "ok"))
		require.Equal(t, 422, resp.Code, resp.Body.String())
		p := decodeProblem(t, resp.Body.Bytes())
		assert.Equal(t, "header.Idempotency-Key", p["errors"].([]any)[0].(map[string]any)["location"])
		assert.Equal(t, 2, c.total("a"))
	})
	t.Run("the key is per path", func(t *testing.T) {
		resp := api.Post("/test/counters/b", alice, "Idempotency-Key: k1", body(2, "ok"))
		require.Equal(t, 201, resp.Code)
		assert.Equal(t, 2, c.total("b"))
	})
	t.Run("the key is per owner", func(t *testing.T) {
		resp := api.Post("/test/counters/a", bob, "Idempotency-Key: k1", body(2, "ok"))
		require.Equal(t, 201, resp.Code)
		assert.Empty(t, resp.Header().Get(IdempotentReplayedHeader))
		assert.Equal(t, 4, c.total("a"))
	})
	t.Run("without a key every request runs", func(t *testing.T) {
		before := c.total("c")
		api.Post("/test/counters/c", alice, body(1, "ok"))
		api.Post("/test/counters/c", alice, body(1, "ok"))
		assert.Equal(t, before+2, c.total("c"))
	})
	t.Run("client errors are remembered", func(t *testing.T) {
		calls := c.calls.Load()
		r1 := api.Post("/test/counters/d", alice, "Idempotency-Key: k-conflict", body(1, "conflict"))
		r2 := api.Post("/test/counters/d", alice, "Idempotency-Key: k-conflict", body(1, "conflict"))
		require.Equal(t, 409, r1.Code)
		require.Equal(t, 409, r2.Code)
		assert.Equal(t, r1.Body.String(), r2.Body.String())
		assert.Equal(t, "application/problem+json", r2.Header().Get("Content-Type"))
		assert.Equal(t, calls+1, c.calls.Load())
	})
	t.Run("validation errors are remembered", func(t *testing.T) {
		r1 := api.Post("/test/counters/d", alice, "Idempotency-Key: k-invalid", map[string]any{"amount": "x"})
		r2 := api.Post("/test/counters/d", alice, "Idempotency-Key: k-invalid", map[string]any{"amount": "x"})
		require.Equal(t, 422, r1.Code)
		assert.Equal(t, r1.Body.String(), r2.Body.String())
		assert.Equal(t, "true", r2.Header().Get(IdempotentReplayedHeader))
	})
	t.Run("server errors are not remembered", func(t *testing.T) {
		calls := c.calls.Load()
		r1 := api.Post("/test/counters/e", alice, "Idempotency-Key: k-fail", body(1, "fail"))
		require.Equal(t, 500, r1.Code)
		r2 := api.Post("/test/counters/e", alice, "Idempotency-Key: k-fail", body(1, "fail"))
		require.Equal(t, 500, r2.Code)
		assert.Equal(t, calls+2, c.calls.Load())
	})
	t.Run("unauthenticated requests never reach the store", func(t *testing.T) {
		resp := api.Post("/test/counters/a", "Idempotency-Key: k1", body(2, "ok"))
		require.Equal(t, 401, resp.Code)
	})
	t.Run("a key longer than 255 characters is refused", func(t *testing.T) {
		resp := api.Post("/test/counters/a", alice, "Idempotency-Key: "+strings.Repeat("k", 256), body(2, "ok"))
		require.Equal(t, 422, resp.Code)
	})
	t.Run("command id follows the key", func(t *testing.T) {
		r1 := api.Post("/test/counters/f", alice, "Idempotency-Key: k-cmd", body(1, "ok"))
		r2 := api.Post("/test/counters/f", alice, "Idempotency-Key: k-cmd2", body(1, "ok"))
		r3 := api.Post("/test/counters/f", alice, body(1, "ok"))
		ids := map[string]bool{}
		for _, r := range []*struct{ b []byte }{{r1.Body.Bytes()}, {r2.Body.Bytes()}, {r3.Body.Bytes()}} {
			var out map[string]any
			require.NoError(t, json.Unmarshal(r.b, &out))
			ids[out["commandId"].(string)] = true
		}
		assert.Len(t, ids, 3)
		k := IdempotencyScope{Caller: "user:alice", Method: "POST", Path: "/test/counters/f", Key: "k-cmd"}
		want := CommandID(context.WithValue(context.Background(), idempotencyKey{}, k))
		assert.True(t, ids[want.String()], "the id is derived from the key")
	})
}

func TestIdempotencyConcurrentRepeat(t *testing.T) {
	t.Parallel()
	store := NewPostgresIdempotency(testenv.Postgres(t))
	s, c := idempotentServer(t, store)
	api := testAPI(t, s)
	alice := bearer(t, "alice")
	body := map[string]any{"amount": 1, "mode": "block"}

	done := make(chan int)
	go func() {
		done <- api.Post("/test/counters/a", alice, "Idempotency-Key: k", body).Code
	}()
	<-c.entered
	resp := api.Post("/test/counters/a", alice, "Idempotency-Key: k", body)
	require.Equal(t, 409, resp.Code, "the first request still runs")
	assert.Equal(t, "conflict", decodeProblem(t, resp.Body.Bytes())["kind"])
	close(c.block)
	require.Equal(t, 201, <-done)
	again := api.Post("/test/counters/a", alice, "Idempotency-Key: k", body)
	require.Equal(t, 201, again.Code)
	assert.Equal(t, 1, c.total("a"))
	assert.EqualValues(t, 1, c.calls.Load())
}

func TestPostgresIdempotencyExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &PostgresIdempotency{Pool: testenv.Postgres(t), TTL: 300 * time.Millisecond, LockTimeout: 200 * time.Millisecond}
	k := IdempotencyScope{Caller: "user:alice", Method: "POST", Path: "/x", Key: uuid.NewString()}
	h := [32]byte{1}

	got, err := store.Begin(ctx, k, h)
	require.NoError(t, err)
	require.Nil(t, got, "a new key is claimed")
	_, err = store.Begin(ctx, k, h)
	require.ErrorIs(t, err, ErrIdempotencyInProgress)

	time.Sleep(250 * time.Millisecond)
	got, err = store.Begin(ctx, k, h)
	require.NoError(t, err)
	require.Nil(t, got, "a key whose holder's lock ran out is taken over")

	require.NoError(t, store.Finish(ctx, k, StoredResponse{Status: 201, Header: http.Header{"Location": {"/x/1"}}, Body: []byte(`{"id":1}`)}))
	got, err = store.Begin(ctx, k, h)
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, 201, got.Status)
	assert.Equal(t, "/x/1", got.Header.Get("Location"))
	assert.JSONEq(t, `{"id":1}`, string(got.Body))
	_, err = store.Begin(ctx, k, [32]byte{2})
	require.ErrorIs(t, err, ErrIdempotencyMismatch)

	time.Sleep(350 * time.Millisecond)
	n, err := store.DeleteExpired(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	got, err = store.Begin(ctx, k, [32]byte{2})
	require.NoError(t, err)
	assert.Nil(t, got, "an expired key is free again")

	require.NoError(t, store.Abandon(ctx, k))
	got, err = store.Begin(ctx, k, h)
	require.NoError(t, err)
	assert.Nil(t, got, "an abandoned key is free again")
}
