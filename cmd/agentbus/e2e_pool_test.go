package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/bus"
	agentcmd "github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	cmdhandlers "github.com/agentbus/agentbus/handlers/commands"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// TestPool runs the session pool through the whole system: slots freed
// together, a retried session, and a user's own maximum.
func TestPool(t *testing.T) {
	s := startSystem(t)

	t.Run("EverySlotFreedAtOnceIsTaken", func(t *testing.T) {
		owner := s.owner()
		running := make([]uuid.UUID, domain.DefaultMaxConcurrentSessions)
		for i := range running {
			running[i] = s.startSession(t, owner, agentcmd.StartSessionData{})
		}
		for _, id := range running {
			s.waitStatus(t, id, domain.StatusRunning)
			s.sidecar(id).waitStarted(t)
		}
		queued := make([]uuid.UUID, 9*domain.DefaultMaxConcurrentSessions)
		for i := range queued {
			queued[i] = s.startSession(t, owner, agentcmd.StartSessionData{Objective: "Waits for a slot"})
		}
		// Every Queued session was refused a slot before any is freed, so
		// only the releases can start them.
		for _, id := range queued {
			s.waitEvent(t, domain.AggregateSession, id, "session_pool_exhausted")
		}
		s.waitIdle(t)

		var wg sync.WaitGroup
		errs := make(chan error, len(running))
		for _, id := range running {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- s.try(owner, agentcmd.CancelSession, id)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		stops := make([]sidecarCommand, len(running))
		for i, id := range running {
			stops[i] = s.sidecar(id).waitCommand(t, protocol.CommandStop, 1)[0]
		}
		for i, id := range running {
			sc := s.sidecar(id)
			sc.send(t, protocol.EventStopAck, map[string]any{"command_id": stops[i].CommandID, "forced": false})
			sc.end(t, "stopped")
		}

		require.Eventually(t, func() bool {
			n, err := s.countStatusOf(queued, domain.StatusRunning)
			return err == nil && n == len(running)
		},
			4*wait, 50*time.Millisecond, "the %d slots freed at once were not all taken", len(running))
		s.waitIdle(t)
		assert.Equal(t, len(running), s.countStatus(t, queued, domain.StatusRunning))
		assert.Equal(t, len(queued)-len(running), s.countStatus(t, queued, domain.StatusQueued))
		for _, id := range queued[:len(running)] {
			assert.Equal(t, domain.StatusRunning, s.session(t, id).Status(), "the oldest Queued sessions start first")
		}
	})

	t.Run("RetriedSessionIsAllocated", func(t *testing.T) {
		owner := s.owner()
		id, sc := s.runningSession(t, owner, agentcmd.StartSessionData{})
		sc.waitStarted(t)
		s.do(t, "", domain.AggregateSession, agentcmd.RecordFailure, id,
			agentcmd.FailureData{Reason: domain.FailureAgentError, Message: "the agent crashed"})
		s.waitStatus(t, id, domain.StatusFailed)
		// The slot is back before the retry, so the release has nothing to start.
		s.waitEvent(t, domain.AggregateSession, id, "session_released")
		s.waitIdle(t)

		s.do(t, owner, domain.AggregateSession, agentcmd.RetrySession, id, agentcmd.RetryData{})
		s.waitStatus(t, id, domain.StatusRunning)
		s.waitIdle(t)
		assertInOrder(t, s.events(t, domain.AggregateSession, id), "agent_session_failed", "session_released",
			"agent_session_retried", "session_allocated", "agent_session_started")
	})

	t.Run("UsersMaximumThroughTheAPI", func(t *testing.T) {
		owner := s.owner()
		h := s.http(t, owner)
		requirePool := func(t *testing.T, resp httpResponse, active, max int) {
			t.Helper()
			require.Equal(t, http.StatusOK, resp.code, resp.body)
			var got api.PoolUtilization
			require.NoError(t, json.Unmarshal([]byte(resp.body), &got))
			assert.Equal(t, active, got.ActiveCount, resp.body)
			assert.Equal(t, max, got.MaxCount, resp.body)
		}

		invalid := h.do(t, http.MethodPut, "/api/agents/pool", map[string]any{"maxConcurrentSessions": 0})
		require.Equal(t, http.StatusUnprocessableEntity, invalid.code, invalid.body)
		assert.Equal(t, "application/problem+json", invalid.contentType)
		assert.Contains(t, invalid.body, `"location":"body.maxConcurrentSessions"`)

		requirePool(t, h.do(t, http.MethodPut, "/api/agents/pool", map[string]any{"maxConcurrentSessions": 2}), 0, 2)
		requirePool(t, h.do(t, http.MethodGet, "/api/agents/pool", nil), 0, 2)

		ids := make([]uuid.UUID, 3)
		for i := range ids {
			resp := h.do(t, http.MethodPost, "/api/agents/sessions", map[string]any{
				"workingDirectory": "repo", "objective": fmt.Sprintf("Task %d", i), "budgetCapUsd": 10})
			require.Equal(t, http.StatusCreated, resp.code, resp.body)
			var started api.StartSessionResponse
			require.NoError(t, json.Unmarshal([]byte(resp.body), &started))
			ids[i] = started.Session.ID
			if i < 2 {
				// In order, so that the third is the one left waiting.
				s.waitStatus(t, ids[i], domain.StatusRunning)
			}
		}
		s.waitEvent(t, domain.AggregateSession, ids[2], "session_pool_exhausted")
		s.waitIdle(t)
		assert.Equal(t, domain.StatusQueued, s.session(t, ids[2]).Status())
		requirePool(t, h.do(t, http.MethodGet, "/api/agents/pool", nil), 2, 2)

		requirePool(t, h.do(t, http.MethodPut, "/api/agents/pool", map[string]any{"maxConcurrentSessions": 1}), 2, 1)
		s.waitIdle(t)
		for _, id := range ids[:2] {
			assert.Equal(t, domain.StatusRunning, s.session(t, id).Status(), "a smaller pool stops no running session")
		}
		assert.Equal(t, domain.StatusQueued, s.session(t, ids[2]).Status())

		requirePool(t, h.do(t, http.MethodPut, "/api/agents/pool", map[string]any{"maxConcurrentSessions": 3}), 3, 3)
		s.waitStatus(t, ids[2], domain.StatusRunning)
	})

	t.Run("DefaultMaximumOfTheDeployment", func(t *testing.T) {
		// As `agentbus up --pool-max 1` runs the commands worker.
		s.stopWorker(t, "commands")
		s.in.PoolMax = 1
		s.startWorker(t, "commands")
		t.Cleanup(func() {
			s.stopWorker(t, "commands")
			s.in.PoolMax = 0
			s.startWorker(t, "commands")
		})
		owner := s.owner()
		first := s.startSession(t, owner, agentcmd.StartSessionData{})
		s.waitStatus(t, first, domain.StatusRunning)
		second := s.startSession(t, owner, agentcmd.StartSessionData{})
		s.waitEvent(t, domain.AggregateSession, second, "session_pool_exhausted")
		assert.Equal(t, domain.StatusQueued, s.session(t, second).Status())
	})
}

// httpClient calls the HTTP API, built as `agentbus up` builds it, as one user.
type httpClient struct {
	url, auth string
}

type httpResponse struct {
	code        int
	contentType string
	body        string
}

// http serves the API on the system's connections for the test.
func (s *system) http(t *testing.T, owner string) httpClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	const secret = "pool-test-secret"
	srv, err := newAPI(ctx, s.in, nil, secret)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	token, err := api.NewToken(secret, owner, time.Hour)
	require.NoError(t, err)
	return httpClient{url: hs.URL, auth: "Bearer " + token}
}

func (c httpClient) do(t *testing.T, method, path string, body any) httpResponse {
	t.Helper()
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.url+path, r)
	require.NoError(t, err)
	req.Header.Set("Authorization", c.auth)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return httpResponse{code: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: string(raw)}
}

// try sends a command as owner and returns its transport error or refusal,
// for goroutines that must not stop the test.
func (s *system) try(owner, name string, id uuid.UUID) error {
	cmd, err := agentcmd.New(domain.AggregateSession, name, id, owner, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	r, err := s.client.Do(ctx, cmd)
	if err != nil {
		return err
	}
	return r.Err()
}

// countStatus counts the sessions among ids that are in status.
func (s *system) countStatus(t *testing.T, ids []uuid.UUID, status domain.SessionStatus) int {
	t.Helper()
	n, err := s.countStatusOf(ids, status)
	require.NoError(t, err)
	return n
}

// countStatusOf is countStatus for a condition polled off the test's goroutine.
func (s *system) countStatusOf(ids []uuid.UUID, status domain.SessionStatus) (int, error) {
	var n int
	err := s.in.Pool.QueryRow(context.Background(),
		"SELECT count(*) FROM sessions WHERE id = ANY($1) AND status = $2", ids, string(status)).Scan(&n)
	return n, err
}

// waitIdle waits until the commands worker and the pool reaction have
// handled everything sent to them and the outbox is published. Work moves
// between them, so they must look idle several times in a row.
func (s *system) waitIdle(t *testing.T) {
	t.Helper()
	idle := func() bool {
		var unpublished int
		err := s.in.Pool.QueryRow(context.Background(), "SELECT count(*) FROM outbox").Scan(&unpublished)
		return err == nil && unpublished == 0 &&
			!s.consumerHasWork(bus.StreamEvents, reactions.PoolConsumer) &&
			!s.consumerHasWork(bus.StreamCommands, cmdhandlers.Consumer)
	}
	calm := 0
	require.Eventually(t, func() bool {
		if idle() {
			calm++
		} else {
			calm = 0
		}
		return calm >= 5
	}, 2*wait, 50*time.Millisecond, "the commands worker and the pool reaction never caught up")
}
