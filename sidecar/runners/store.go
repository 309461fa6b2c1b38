// Package runners places sessions on a fleet of runners. A runner is a
// process that runs sandboxed sidecars on its host; it holds a lease in a
// JetStream key-value bucket, renewed every third of the lease's TTL. The
// placer (the runtime worker, which has Postgres) writes one assignment
// per session that needs a sidecar, naming the runner that runs it, with
// a revision check, so exactly one runner holds a session. When a
// runner's lease lapses, the placer assigns its sessions elsewhere; a
// session no runner has room for waits, assigned to none.
//
// No consensus of its own: JetStream's revisions are the only arbiter.
package runners

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
)

// Buckets. Renaming one orphans what it holds: keep them stable.
const (
	// RunnersBucket holds each runner's lease, keyed by its name.
	RunnersBucket = "runners"
	// AssignmentsBucket holds each placed or waiting session's assignment,
	// keyed by its id.
	AssignmentsBucket = "runner_assignments"
)

// DefaultLeaseTTL is how long a runner's lease lasts without a renewal.
const DefaultLeaseTTL = 6 * time.Second

// kvTimeout bounds one read or write of a bucket.
const kvTimeout = 5 * time.Second

// Lease is what a runner says of itself in its lease.
type Lease struct {
	// Name identifies the runner; its sidecars' records are kept under it.
	Name string `json:"name"`
	// Capacity is how many sidecars it runs at most.
	Capacity int `json:"capacity"`
	// Draining is set when no session is to be placed on it any more.
	Draining bool `json:"draining,omitempty"`
	// Sessions is how many sidecars it runs now.
	Sessions int `json:"sessions"`
}

// Assignment is a session's place: the runner that runs its sidecar, and
// what that runner needs to start it, which only the placer can compose.
type Assignment struct {
	// SessionID is the session.
	SessionID string `json:"sessionId"`
	// Runner runs the session's sidecar; empty while it waits for one.
	Runner string `json:"runner,omitempty"`
	// Gen counts the sidecars the placer asked for: a runner that runs an
	// older one stops it and starts this one.
	Gen uint64 `json:"gen"`
	// Attempt is the run of the session the sidecar serves.
	Attempt int `json:"attempt"`
	// Started is set once a sidecar of this run was asked for: the next
	// one resumes its agent's conversation.
	Started bool `json:"started,omitempty"`
	// Config is the sidecar's config (protocol.Config).
	Config json.RawMessage `json:"config,omitempty"`
	// APIKey is the sidecar's agent API key.
	APIKey string `json:"apiKey,omitempty"`
	// RedisURL is how the sidecar reaches Redis: a user of the session's
	// own, with a password set for this Gen.
	RedisURL string `json:"redisUrl,omitempty"`
	// MaxProcesses and MaxMemory are the limits of the sidecar's sandbox;
	// zero keeps the runner's.
	MaxProcesses int   `json:"maxProcesses,omitempty"`
	MaxMemory    int64 `json:"maxMemory,omitempty"`
	// Exited is set by the runner when the sidecar exited without ending
	// its session: the placer then asks for another.
	Exited bool `json:"exited,omitempty"`
}

// Waiting reports whether the session waits for a runner with room.
func (a Assignment) Waiting() bool { return a.Runner == "" }

// Store reads and writes the runners' leases and the assignments.
type Store struct {
	// Runners is the bucket of leases; Assignments that of assignments.
	Runners     jetstream.KeyValue
	Assignments jetstream.KeyValue
	// TTL is how long a lease lasts without a renewal.
	TTL time.Duration
}

// Open creates or opens both buckets. A lease's entry also goes away by
// itself a TTL after its last renewal (the bucket's TTL).
func Open(ctx context.Context, js jetstream.JetStream, ttl time.Duration) (*Store, error) {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	replicas, err := bus.BucketReplicas(ctx, js)
	if err != nil {
		return nil, err
	}
	leases, err := bucket(ctx, js, jetstream.KeyValueConfig{Bucket: RunnersBucket, Replicas: replicas,
		Description: "The lease of each runner of sidecars: its name, capacity and whether it drains.", TTL: ttl})
	if err != nil {
		return nil, err
	}
	assignments, err := bucket(ctx, js, jetstream.KeyValueConfig{Bucket: AssignmentsBucket, Replicas: replicas,
		Description: "The runner each session's sidecar is placed on, and what it starts it with."})
	if err != nil {
		return nil, err
	}
	return &Store{Runners: leases, Assignments: assignments, TTL: ttl}, nil
}

// bucket opens the bucket cfg names, creating it when it is missing. An
// existing bucket is left as it is: a runner with another TTL does not
// change the leases of all.
func bucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("runners: bucket %s: %w", cfg.Bucket, err)
	}
	cfg.History, cfg.Storage = 1, jetstream.FileStorage
	kv, err = js.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("runners: bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// Renew writes the runner's lease.
func (s *Store) Renew(ctx context.Context, l Lease) error {
	raw, _ := json.Marshal(l)
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	_, err := s.Runners.Put(ctx, l.Name, raw)
	return err
}

// RenewOver writes the runner's lease over the revision rev of its last
// renewal (0: none yet) and returns the lease written and its revision. A
// drain set on the lease since (Drain) is kept: a runner asked to drain
// stays draining until it stops.
func (s *Store) RenewOver(ctx context.Context, l Lease, rev uint64) (Lease, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	for {
		raw, _ := json.Marshal(l)
		var next uint64
		var err error
		if rev == 0 {
			next, err = s.Runners.Put(ctx, l.Name, raw)
		} else {
			next, err = s.Runners.Update(ctx, l.Name, raw, rev)
		}
		if !Conflict(err) {
			return l, next, err
		}
		cur, curRev, err := s.lease(ctx, l.Name)
		if err != nil {
			return l, 0, err
		}
		l.Draining, rev = l.Draining || cur.Draining, curRev
	}
}

// ErrNoRunner is a drain of a runner that holds no lease.
var ErrNoRunner = errors.New("runners: no runner of that name holds a lease")

// Drain marks the runner's lease draining: the placer places no session
// there any more and moves its sessions to other runners, each between
// two of its turns.
func (s *Store) Drain(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	for {
		l, rev, err := s.lease(ctx, name)
		if err != nil {
			return err
		}
		if rev == 0 {
			return fmt.Errorf("%w: %s", ErrNoRunner, name)
		}
		l.Draining = true
		raw, _ := json.Marshal(l)
		if _, err := s.Runners.Update(ctx, name, raw, rev); !Conflict(err) {
			return err
		}
	}
}

// lease reads the runner's lease; revision 0 when it has none.
func (s *Store) lease(ctx context.Context, name string) (Lease, uint64, error) {
	e, err := s.Runners.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Lease{}, 0, nil
	}
	if err != nil {
		return Lease{}, 0, err
	}
	var l Lease
	if err := json.Unmarshal(e.Value(), &l); err != nil {
		return Lease{}, 0, fmt.Errorf("runners: lease of %s: %w", name, err)
	}
	return l, e.Revision(), nil
}

// Leave removes the runner's lease: its sessions go elsewhere at once.
func (s *Store) Leave(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	return s.Runners.Delete(ctx, name)
}

// RunnerEntry is a lease as read, with its revision.
type RunnerEntry struct {
	Lease
	Revision uint64
	// Renewed is when the server stored the last renewal.
	Renewed time.Time
}

// Leases returns the leases there are, by runner name.
func (s *Store) Leases(ctx context.Context) (map[string]RunnerEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	out := map[string]RunnerEntry{}
	keys, err := s.Runners.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	for key := range keys.Keys() {
		e, err := s.Runners.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var l Lease
		if json.Unmarshal(e.Value(), &l) != nil {
			continue
		}
		out[key] = RunnerEntry{Lease: l, Revision: e.Revision(), Renewed: e.Created()}
	}
	return out, nil
}

// Assignment returns the session's assignment and its revision; 0 and
// no error when it has none.
func (s *Store) Assignment(ctx context.Context, sessionID string) (Assignment, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	e, err := s.Assignments.Get(ctx, sessionID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Assignment{}, 0, nil
	}
	if err != nil {
		return Assignment{}, 0, err
	}
	var a Assignment
	if err := json.Unmarshal(e.Value(), &a); err != nil {
		return Assignment{}, 0, fmt.Errorf("runners: assignment of %s: %w", sessionID, err)
	}
	return a, e.Revision(), nil
}

// Put writes a session's assignment over the revision rev it was read at
// (0: it had none) and returns the new revision. A write that raced
// another fails with jetstream.ErrKeyRevisionMismatch or ErrKeyExists.
func (s *Store) Put(ctx context.Context, a Assignment, rev uint64) (uint64, error) {
	raw, err := json.Marshal(a)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	if rev == 0 {
		return s.Assignments.Create(ctx, a.SessionID, raw)
	}
	return s.Assignments.Update(ctx, a.SessionID, raw, rev)
}

// Remove deletes a session's assignment, whatever its revision.
func (s *Store) Remove(ctx context.Context, sessionID string) error {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	err := s.Assignments.Purge(ctx, sessionID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	return err
}

// Conflict reports whether err is a write that lost a race.
func Conflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

// RunnerOf returns the runner the session's sidecar is assigned to, or
// that the session waits for one (the API's session detail).
func (s *Store) RunnerOf(ctx context.Context, sessionID string) (runner string, waiting bool, err error) {
	a, rev, err := s.Assignment(ctx, sessionID)
	return a.Runner, rev != 0 && a.Waiting(), err
}
