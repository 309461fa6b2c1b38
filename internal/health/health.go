// Package health serves /healthz (the process is alive) and /readyz (its
// dependencies answer) for every long-running agentbus process.
package health

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Check reports whether one dependency answers.
type Check func(ctx context.Context) error

// Checks is the set of named readiness checks of a process.
type Checks struct {
	mu     sync.RWMutex
	checks map[string]Check
	info   map[string]string
}

// Info reports a fact about the process in the body of /readyz under name,
// such as "sandbox":"off"; it does not change the readiness.
func (c *Checks) Info(name, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.info == nil {
		c.info = map[string]string{}
	}
	c.info[name] = value
}

// Add registers a readiness check under name.
func (c *Checks) Add(name string, check Check) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.checks == nil {
		c.checks = map[string]Check{}
	}
	c.checks[name] = check
}

// Register mounts /healthz and /readyz on mux.
func (c *Checks) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status, body := c.run(ctx)
		writeJSON(w, status, body)
	})
}

func (c *Checks) run(ctx context.Context) (int, map[string]any) {
	c.mu.RLock()
	names := make([]string, 0, len(c.checks))
	for name := range c.checks {
		names = append(names, name)
	}
	c.mu.RUnlock()
	sort.Strings(names)
	results := map[string]string{}
	status := http.StatusOK
	for _, name := range names {
		c.mu.RLock()
		check := c.checks[name]
		c.mu.RUnlock()
		if err := check(ctx); err != nil {
			results[name] = err.Error()
			status = http.StatusServiceUnavailable
		} else {
			results[name] = "ok"
		}
	}
	state := "ready"
	if status != http.StatusOK {
		state = "not ready"
	}
	body := map[string]any{"status": state, "checks": results}
	c.mu.RLock()
	for name, value := range c.info {
		body[name] = value
	}
	c.mu.RUnlock()
	return status, body
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
