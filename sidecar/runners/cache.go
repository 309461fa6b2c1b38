package runners

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Placed is an assignment as watched, with its revision.
type Placed struct {
	Assignment
	Revision uint64
}

// Cache keeps every assignment as the bucket's watcher last brought it.
type Cache struct {
	mu      sync.Mutex
	all     map[string]Placed
	ready   bool
	changed chan struct{}
}

// Watch fills a cache from the assignments bucket until ctx ends. It
// returns once the cache holds every assignment there was.
func (s *Store) Watch(ctx context.Context) (*Cache, error) {
	w, err := s.Assignments.WatchAll(ctx)
	if err != nil {
		return nil, err
	}
	c := &Cache{all: map[string]Placed{}, changed: make(chan struct{}, 1)}
	ready := make(chan struct{})
	go func() {
		defer func() { _ = w.Stop() }()
		for e := range w.Updates() {
			c.apply(e, ready)
		}
	}()
	select {
	case <-ready:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// apply records one update of the watcher; a nil one ends the initial
// values.
func (c *Cache) apply(e jetstream.KeyValueEntry, ready chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case e == nil:
		if !c.ready {
			c.ready = true
			close(ready)
		}
	case e.Operation() != jetstream.KeyValuePut:
		delete(c.all, e.Key())
	default:
		var a Assignment
		if json.Unmarshal(e.Value(), &a) != nil {
			return
		}
		if prev, ok := c.all[e.Key()]; ok && prev.Revision > e.Revision() {
			return // Note recorded a newer one already
		}
		c.all[e.Key()] = Placed{Assignment: a, Revision: e.Revision()}
	}
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// Note records an assignment this process wrote, before the watcher
// brings it, so a placement that follows counts it.
func (c *Cache) Note(a Assignment, rev uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.all[a.SessionID]; ok && prev.Revision > rev {
		return
	}
	c.all[a.SessionID] = Placed{Assignment: a, Revision: rev}
}

// Forget drops an assignment this process removed.
func (c *Cache) Forget(sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.all, sessionID)
}

// Changed is signalled when an assignment changed.
func (c *Cache) Changed() <-chan struct{} { return c.changed }

// All returns every assignment, by session id.
func (c *Cache) All() map[string]Placed {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]Placed, len(c.all))
	for id, p := range c.all {
		out[id] = p
	}
	return out
}

// Get returns the session's assignment.
func (c *Cache) Get(sessionID string) (Placed, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.all[sessionID]
	return p, ok
}

// Load returns how many sessions are assigned to each runner.
func (c *Cache) Load() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, p := range c.all {
		if !p.Waiting() {
			out[p.Runner]++
		}
	}
	return out
}
