package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSessionLimiter(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	l := NewSessionLimiter(2, 3)
	l.now = func() time.Time { return now }
	a, b := uuid.New(), uuid.New()

	for i := range 3 {
		require.NoError(t, l.Allow(a), "burst %d", i)
	}
	err := l.Allow(a)
	var r RetryAfterError
	require.ErrorAs(t, err, &r)
	assert.Equal(t, 500*time.Millisecond, r.RetryAfter())
	var k Kinded
	require.ErrorAs(t, err, &k)
	assert.Equal(t, KindRateLimited, k.Kind())

	require.NoError(t, l.Allow(b), "sessions have their own buckets")

	now = now.Add(500 * time.Millisecond)
	require.NoError(t, l.Allow(a), "a refused request took no token")
	require.Error(t, l.Allow(a))

	now = now.Add(2 * time.Minute)
	require.NoError(t, l.Allow(b))
	l.mu.Lock()
	assert.Len(t, l.sessions, 1, "idle sessions are forgotten")
	l.mu.Unlock()
}

type enqueueInput struct {
	ID string `path:"id" format:"uuid" doc:"The session." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
}

func TestQueueLimiterAnswers429(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{QueueRate: 1, QueueBurst: 2}, Deps{})
	register(s.API(), huma.Operation{
		OperationID: "test-enqueue", Method: http.MethodPost, Path: "/test/sessions/{id}/queue", Summary: "Enqueue", Tags: []string{"Test"},
		Security: HumanAuth, Errors: []int{http.StatusTooManyRequests},
	}, func(_ context.Context, in *enqueueInput) (*struct{}, error) {
		return nil, s.QueueLimiter.Allow(uuid.MustParse(in.ID))
	})
	api := testAPI(t, s)
	path := "/test/sessions/" + uuid.NewString() + "/queue"
	alice := bearer(t, "alice")
	assert.Equal(t, 204, api.Post(path, alice).Code)
	assert.Equal(t, 204, api.Post(path, alice).Code)
	resp := api.Post(path, alice)
	require.Equal(t, 429, resp.Code)
	assert.Equal(t, "1", resp.Header().Get("Retry-After"))
	assert.Equal(t, "rate_limited", decodeProblem(t, resp.Body.Bytes())["kind"])
	assert.Equal(t, 204, api.Post("/test/sessions/"+uuid.NewString()+"/queue", alice).Code)

	op := s.API().OpenAPI().Paths["/test/sessions/{id}/queue"].Post
	require.Contains(t, op.Responses, "429")
	assert.Contains(t, op.Responses["429"].Headers, "Retry-After")
}
