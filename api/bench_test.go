package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

// benchConcurrency is how many clients send requests at once.
const benchConcurrency = 16

// request builds the i-th request of a load.
type request func(i int) (*http.Request, error)

// send returns the operation of a load that sends the i-th request with
// client and checks it answers want.
func send(client *http.Client, want int, req request) func(i int) error {
	return func(i int) error {
		r, err := req(i)
		if err != nil {
			return err
		}
		resp, err := client.Do(r)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			return fmt.Errorf("status %d: %s", resp.StatusCode, body)
		}
		return nil
	}
}

// load runs op b.N times from benchConcurrency goroutines and reports
// operations per second and the p50 and p99 latencies.
func load(b *testing.B, op func(i int) error) {
	b.Helper()
	latencies := make([]time.Duration, b.N)
	var (
		next   atomic.Int64
		failed atomic.Value
		wg     sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for range benchConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := op(i); err != nil {
					failed.Store(err)
					return
				}
				latencies[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(float64(len(latencies))*p))].Microseconds())
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: benchConcurrency * 2, MaxIdleConnsPerHost: benchConcurrency * 2}}
}

// bare is the baseline: a net/http handler that answers the same body
// without doing anything, so the difference is what the API itself costs.
func bare(b *testing.B, status int, body []byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkGetSession measures GET /api/agents/sessions/{id} (JWT check,
// one Postgres read, JSON) beside a bare net/http handler answering the
// same body, with benchConcurrency clients.
//
//	go test -run '^$' -bench 'BenchmarkGetSession|BenchmarkEnqueueImmediate' -benchtime 3s ./api/
func BenchmarkGetSession(b *testing.B) {
	st := newStack(b, Config{}, true)
	u := newUser(b)
	s, _ := st.running(b, u, nil)
	path := "/api/agents/sessions/" + s.ID.String()
	sample := st.call(b, http.MethodGet, path, nil, u.auth)
	if sample.Code != http.StatusOK {
		b.Fatal(sample.String())
	}
	token := u.auth[len("Authorization: "):]
	get := func(base string) request {
		return func(int) (*http.Request, error) {
			r, err := http.NewRequest(http.MethodGet, base+path, nil)
			if err == nil {
				r.Header.Set("Authorization", token)
			}
			return r, err
		}
	}
	b.Run("api", func(b *testing.B) { load(b, send(benchClient(), http.StatusOK, get(st.http.URL))) })
	b.Run("bare-net-http", func(b *testing.B) {
		load(b, send(benchClient(), http.StatusOK, get(bare(b, http.StatusOK, sample.Body).URL)))
	})
}

// BenchmarkEnqueueImmediate measures POST .../messages/queue with an
// Immediate message: JWT check, owner check, rate limit, the command over
// JetStream to the commands worker (load, domain, save with its outbox
// events in one transaction) and its result back, beside a bare net/http
// handler answering the same body, with benchConcurrency clients spread
// over 64 sessions.
func BenchmarkEnqueueImmediate(b *testing.B) {
	st := newStack(b, Config{QueueRate: 1e9, QueueBurst: 1 << 30}, true)
	u := newUser(b)
	const sessions = 64
	paths := make([]string, sessions)
	ids := make([]uuid.UUID, sessions)
	for i := range paths {
		s, _ := st.start(b, u, nil)
		ids[i] = s.ID
		paths[i] = "/api/agents/sessions/" + s.ID.String() + "/messages/queue"
	}
	body := []byte(`{"content":"Also handle HTTP 429 with Retry-After.","priority":"Immediate"}`)
	sample := st.call(b, http.MethodPost, paths[0], string(body), u.auth)
	if sample.Code != http.StatusCreated {
		b.Fatal(sample.String())
	}
	token := u.auth[len("Authorization: "):]
	post := func(base string) request {
		return func(i int) (*http.Request, error) {
			r, err := http.NewRequest(http.MethodPost, base+paths[i%sessions], bytes.NewReader(body))
			if err == nil {
				r.Header.Set("Authorization", token)
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set(IdempotencyKeyHeader, uuid.NewString())
			}
			return r, err
		}
	}
	b.Run("api", func(b *testing.B) { load(b, send(benchClient(), http.StatusCreated, post(st.http.URL))) })
	b.Run("bare-net-http", func(b *testing.B) {
		load(b, send(benchClient(), http.StatusCreated, post(bare(b, http.StatusCreated, sample.Body).URL)))
	})
	// The same command without HTTP: what the pipeline itself costs.
	b.Run("command-client", func(b *testing.B) {
		load(b, func(i int) error {
			cmd, err := command.New(domain.AggregateQueue, command.EnqueueMessage, ids[i%sessions], u.id.String(),
				command.EnqueueData{MessageID: uuid.New(), Content: "Also handle HTTP 429 with Retry-After.", Priority: domain.PriorityImmediate})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := st.client.Do(ctx, cmd)
			if err == nil && res.Error != nil {
				err = res.Error
			}
			return err
		})
	})
}
