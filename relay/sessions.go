package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
)

// Session states in the relay_sessions bucket.
const (
	// StateActive means the session's streams are relayed.
	StateActive = "active"
	// StateDraining means the session ended: its relay forwards what is left
	// in the event stream and then deletes the key.
	StateDraining = "draining"
)

// SessionRecord is the value of a session's key in the relay_sessions
// bucket, JSON-encoded.
type SessionRecord struct {
	// State is "active" or "draining".
	State string `json:"state"`
	// Owner is the lease: "<relay name>/<incarnation>" of the relay relaying
	// the session, empty while none does. Relays set it with a
	// revision-checked update, so at most one holds it.
	Owner string `json:"owner,omitempty"`
}

// SessionsKV creates or opens the relay_sessions bucket: one key per session
// to relay, written by Activate and Deactivate. Its stream allows atomic
// batches, so a relay takes many leases with one write to disk.
func SessionsKV(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	if kv, err := js.KeyValue(ctx, SessionsBucket); err == nil && atomicBucket(ctx, js) {
		// Updating the bucket again would turn atomic batches off.
		return kv, nil
	}
	replicas, err := bus.BucketReplicas(ctx, js)
	if err != nil {
		return nil, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      SessionsBucket,
		Description: "Sessions whose Redis streams the relays bridge, with the relay holding each (its lease).",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("relay: bucket %s: %w", SessionsBucket, err)
	}
	// A server that cannot (before 2.12) keeps the bucket as it is: the
	// relay then takes leases one at a time.
	if s, err := js.Stream(ctx, sessionsStream); err == nil && !s.CachedInfo().Config.AllowAtomicPublish {
		cfg := s.CachedInfo().Config
		cfg.AllowAtomicPublish = true
		_, _ = js.UpdateStream(ctx, cfg)
	}
	return kv, nil
}

// sessionsStream is the stream behind the relay_sessions bucket.
const sessionsStream = "KV_" + SessionsBucket

// atomicBucket reports whether the relay_sessions bucket takes atomic batches.
func atomicBucket(ctx context.Context, js jetstream.JetStream) bool {
	s, err := js.Stream(ctx, sessionsStream)
	return err == nil && s.CachedInfo().Config.AllowAtomicPublish
}

// sessionSubject is the subject of a session's key in the relay_sessions
// bucket, for writes that go round the KV API (batches of leases).
func sessionSubject(sessionID string) string { return "$KV." + SessionsBucket + "." + sessionID }

// membersKV creates or opens the relay_members bucket, where each live relay
// keeps a heartbeat key that expires after ttl.
func membersKV(ctx context.Context, js jetstream.JetStream, ttl time.Duration) (jetstream.KeyValue, error) {
	replicas, err := bus.BucketReplicas(ctx, js)
	if err != nil {
		return nil, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Replicas:    replicas,
		Bucket:      MembersBucket,
		Description: "Heartbeats of the live relays; a key expires when its relay stops renewing it.",
		History:     1,
		TTL:         ttl,
		// Expiries show to watchers as deletes, so the other relays notice a
		// dead one at once.
		LimitMarkerTTL: max(ttl, time.Second),
		Storage:        jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("relay: bucket %s: %w", MembersBucket, err)
	}
	return kv, nil
}

// Activate marks a session as one to relay; whoever allocates a session calls
// it before the sidecar starts. It keeps the session's lease and turns a
// draining session active again. Calling it again is harmless: it rewrites
// the record, which also cancels a drain the relay started by itself.
func Activate(ctx context.Context, kv jetstream.KeyValue, sessionID string) error {
	return setState(ctx, kv, sessionID, StateActive, true)
}

// Deactivate marks a session as ended: its relay forwards what is left in the
// event stream, then stops relaying it and deletes its key. It is a no-op for
// a session that is not relayed.
func Deactivate(ctx context.Context, kv jetstream.KeyValue, sessionID string) error {
	return setState(ctx, kv, sessionID, StateDraining, false)
}

func setState(ctx context.Context, kv jetstream.KeyValue, sessionID, state string, activate bool) error {
	if !ValidSessionID(sessionID) {
		return fmt.Errorf("relay: invalid session id %q", sessionID)
	}
	for {
		entry, err := kv.Get(ctx, sessionID)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if !activate {
				return nil
			}
			value, _ := json.Marshal(SessionRecord{State: state})
			_, err = kv.Create(ctx, sessionID, value)
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue
			}
			if err != nil {
				return fmt.Errorf("relay: set session %s %s: %w", sessionID, state, err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("relay: set session %s %s: %w", sessionID, state, err)
		}
		rec := decodeRecord(entry.Value())
		if rec.State == state && !activate {
			return nil
		}
		rec.State = state
		value, _ := json.Marshal(rec)
		_, err = kv.Update(ctx, sessionID, value, entry.Revision())
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		if err != nil {
			return fmt.Errorf("relay: set session %s %s: %w", sessionID, state, err)
		}
		return nil
	}
}

// decodeRecord reads a session record; a value that is not one reads as an
// active session without a lease, so a hand-written key still works.
func decodeRecord(value []byte) SessionRecord {
	var rec SessionRecord
	if err := json.Unmarshal(value, &rec); err != nil || (rec.State != StateActive && rec.State != StateDraining) {
		rec.State = StateActive
	}
	return rec
}
