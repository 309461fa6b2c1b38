package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/agentbus/agentbus/bus"
)

// lookupSessions is how many sessions one lookup of their last stored
// events names. The server answers with the last message of every subject
// that matches, at most 1024 in all; a session has one subject per event
// type it wrote, so this leaves room for about twenty types each. A lookup
// with more is split in halves.
const lookupSessions = 40

// errTooManyResults is the server's answer to a lookup matching more than
// it sends at once (or a server without batch gets: looked up one session
// at a time, in the end).
var errTooManyResults = errors.New("relay: too many subjects for one lookup")

// lastRelayedMany returns, for each session, the Redis entry id of its last
// event stored on JetStream ("" when there is none), as lastRelayed does for
// one, but for many sessions with one direct get per lookupSessions
// (multi_last: the last message of each subject; a session's last event is
// the latest of its subjects'). Taking up many sessions at once then costs a
// few requests instead of one per session.
func (r *Relay) lastRelayedMany(ctx context.Context, ids []string) (map[string]string, error) {
	last := make(map[string]string, len(ids))
	for start := 0; start < len(ids); start += lookupSessions {
		if err := r.lookup(ctx, ids[start:min(start+lookupSessions, len(ids))], last); err != nil {
			return nil, err
		}
	}
	return last, nil
}

func (r *Relay) lookup(ctx context.Context, ids []string, last map[string]string) error {
	err := r.lookupMultiLast(ctx, ids, last)
	if !errors.Is(err, errTooManyResults) {
		return err
	}
	if len(ids) == 1 {
		// One session with more subjects than one answer holds.
		entry, err := r.lastRelayed(ctx, ids[0])
		last[ids[0]] = entry
		return err
	}
	half := len(ids) / 2
	if err := r.lookup(ctx, ids[:half], last); err != nil {
		return err
	}
	return r.lookup(ctx, ids[half:], last)
}

// lookupMultiLast asks for the last message of every event subject of ids
// in one direct get, and records each session's latest.
func (r *Relay) lookupMultiLast(ctx context.Context, ids []string, last map[string]string) error {
	subjects := make([]string, len(ids))
	for i, id := range ids {
		subjects[i] = bus.SidecarEventSubject(id, ">")
		last[id] = ""
	}
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	msgs, err := jetstreamext.GetLastMsgsFor(ctx, r.js, bus.StreamSidecarEvents, subjects)
	if err != nil {
		return fmt.Errorf("relay: looking up the last stored events: %w", err)
	}
	seqs := make(map[string]uint64, len(ids))
	for m, err := range msgs {
		switch {
		case errors.Is(err, jetstreamext.ErrNoMessages):
			// None of the sessions has a stored event.
			return nil
		case errors.Is(err, jetstreamext.ErrBatchUnsupported):
			// The server answers a lookup matching more subjects than it
			// sends at once with a bare status, which the client library
			// takes for a server without batch gets; either way fewer
			// sessions at a time are the answer.
			return errTooManyResults
		case err != nil:
			return fmt.Errorf("relay: looking up the last stored events: %w", err)
		}
		// agents.sidecar.<id>.events.<type>
		parts := strings.SplitN(m.Subject, ".", 4)
		if len(parts) < 4 {
			return fmt.Errorf("relay: looking up the last stored events: unexpected subject %q", m.Subject)
		}
		if id := parts[2]; m.Sequence > seqs[id] {
			seqs[id] = m.Sequence
			last[id] = m.Header.Get(HeaderRedisEntry)
		}
	}
	return nil
}
