package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// Workload drives sessions over the HTTP API as a user does: it starts
// sessions and sends them steering and queued messages. Every request
// carries an Idempotency-Key and is repeated with it until it gets an
// answer, as a client must across an api crash; what got a 2xx is recorded
// for the checks.
type Workload struct {
	API       string
	Token     string
	Owner     string
	Workspace string
	// Concurrent is how many sessions are driven at once; each gets
	// Messages messages before the next session starts in its place.
	Concurrent int
	Messages   int
	Rand       *rand.Rand
	// Poison, when set, writes raw events the control plane refuses into
	// a session's stream, as a faulty or hostile agent would.
	Poison func(ctx context.Context, session string) error

	mu           sync.Mutex
	sessions     []*Session
	refused      int         // 4xx answers, which leave no effect
	serverErrors map[int]int // 5xx answers by status, each repeated
	poisoned     int
}

// Session is a session the workload started, with the messages it sent
// that were accepted and whether a cancel of it was.
type Session struct {
	ID        string
	Messages  []string
	Cancelled bool
}

// Sessions returns the sessions started so far.
func (w *Workload) Sessions() []*Session {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*Session, len(w.sessions))
	for i, s := range w.sessions {
		cp := *s
		cp.Messages = append([]string(nil), s.Messages...)
		out[i] = &cp
	}
	return out
}

// ServerErrors returns how many answers were a 5xx, by status code.
func (w *Workload) ServerErrors() map[int]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[int]int{}
	for code, n := range w.serverErrors {
		out[code] = n
	}
	return out
}

// Poisoned returns how many sessions got poison raw events.
func (w *Workload) Poisoned() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.poisoned
}

// Refused returns how many requests were answered with a 4xx.
func (w *Workload) Refused() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refused
}

// Run drives sessions until ctx ends.
func (w *Workload) Run(ctx context.Context) {
	w.mu.Lock()
	seeds := make([]uint64, w.Concurrent)
	for i := range seeds {
		seeds[i] = w.Rand.Uint64()
	}
	w.mu.Unlock()
	var wg sync.WaitGroup
	for i := range w.Concurrent {
		rng := rand.New(rand.NewPCG(seeds[i], uint64(i)))
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				w.drive(ctx, rng, fmt.Sprintf("chaos-%d-%d", i, n))
			}
		})
	}
	wg.Wait()
}

// drive starts one session and sends it its messages; one in four is
// cancelled after some of them, and gets the rest refused.
func (w *Workload) drive(ctx context.Context, rng *rand.Rand, name string) {
	var out struct {
		Session struct {
			ID string `json:"id"`
		} `json:"session"`
	}
	body := map[string]any{
		"workingDirectory": filepath.Join(w.Workspace, w.Owner, name),
		"objective":        "Look around " + name, "budgetCapUsd": 100,
	}
	if !w.send(ctx, http.MethodPost, "/api/agents/sessions", body, &out) {
		return
	}
	s := &Session{ID: out.Session.ID}
	w.mu.Lock()
	w.sessions = append(w.sessions, s)
	w.mu.Unlock()
	if w.Poison != nil && rng.IntN(3) == 0 {
		if err := w.Poison(ctx, s.ID); err == nil {
			w.mu.Lock()
			w.poisoned++
			w.mu.Unlock()
		}
	}
	cancelAfter := -1
	if rng.IntN(4) == 0 {
		cancelAfter = rng.IntN(w.Messages)
	}
	for i := range w.Messages {
		if i == cancelAfter {
			if w.send(ctx, http.MethodPost, "/api/agents/sessions/"+s.ID+"/cancel", nil, nil) {
				w.mu.Lock()
				s.Cancelled = true
				w.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(200+rng.IntN(600)) * time.Millisecond):
		}
		priority := "Queued"
		if rng.IntN(2) == 0 {
			priority = "Immediate"
		}
		var msg struct {
			MessageID string `json:"messageId"`
		}
		if w.send(ctx, http.MethodPost, "/api/agents/sessions/"+s.ID+"/messages/queue",
			map[string]any{"content": "steer " + uuid.NewString(), "priority": priority}, &msg) {
			w.mu.Lock()
			s.Messages = append(s.Messages, msg.MessageID)
			w.mu.Unlock()
		}
	}
	w.end(ctx, s)
}

// end hands the session's pool slot on, as a user who is done does: it
// closes the session once it took every message and rests, and cancels it
// when that takes too long. A session the workload stopped driving keeps
// its slot.
func (w *Workload) end(ctx context.Context, s *Session) {
	deadline := time.Now().Add(30 * time.Second)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		var sess struct {
			Status string `json:"status"`
		}
		var q queue
		if w.get(ctx, "/api/agents/sessions/"+s.ID, &sess) && w.get(ctx, "/api/agents/sessions/"+s.ID+"/messages/queue", &q) {
			if domain.SessionStatus(sess.Status).IsTerminal() {
				return
			}
			pending := false
			for _, m := range q.Messages {
				pending = pending || m.Status == string(domain.MessagePending)
			}
			if !pending && sess.Status == string(domain.StatusIdle) &&
				w.send(ctx, http.MethodPost, "/api/agents/sessions/"+s.ID+"/close", nil, nil) {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
	if ctx.Err() == nil && w.send(ctx, http.MethodPost, "/api/agents/sessions/"+s.ID+"/cancel", nil, nil) {
		w.mu.Lock()
		s.Cancelled = true
		w.mu.Unlock()
	}
}

// send makes a command request with one Idempotency-Key, repeating it
// while the api is unreachable or answers 5xx; it says whether the answer
// was a 2xx, decoded into out unless out is nil.
func (w *Workload) send(ctx context.Context, method, path string, body, out any) bool {
	key := uuid.NewString()
	for ctx.Err() == nil {
		code, raw, err := w.call(ctx, method, path, body, key)
		if code >= 500 {
			w.mu.Lock()
			if w.serverErrors == nil {
				w.serverErrors = map[int]int{}
			}
			w.serverErrors[code]++
			w.mu.Unlock()
		}
		switch {
		case err != nil || code >= 500 || code == http.StatusConflict && bytes.Contains(raw, []byte("in progress")):
			// Down, timed out, or the first attempt is still being
			// applied: the same key again.
			time.Sleep(200 * time.Millisecond)
			continue
		case code >= 300:
			w.mu.Lock()
			w.refused++
			w.mu.Unlock()
			return false
		}
		return out == nil || json.Unmarshal(raw, out) == nil
	}
	return false
}

// call makes one request and returns the status and body.
func (w *Workload) call(ctx context.Context, method, path string, body any, key string) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, w.API+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+w.Token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// get reads path into out; false when the api did not answer 200.
func (w *Workload) get(ctx context.Context, path string, out any) bool {
	code, raw, err := w.call(ctx, http.MethodGet, path, nil, "")
	return err == nil && code == http.StatusOK && json.Unmarshal(raw, out) == nil
}

func httpOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
