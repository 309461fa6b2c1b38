package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
)

// lookupSessions is how many sessions one lookup of their last stored
// events names. The server answers with the last message of every subject
// that matches, at most 1024 in all; a session has one subject per event
// type it wrote, so this leaves room for about twenty types each. A lookup
// with more is split in halves.
const lookupSessions = 40

// errTooManyResults is the server's answer to a lookup matching more than
// it sends at once.
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
	req, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
	}{subjects})
	if err != nil {
		return err
	}
	nc := r.js.Conn()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(r.directGetSubject(), inbox, req); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	seqs := make(map[string]uint64, len(ids))
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return fmt.Errorf("relay: looking up the last stored events: %w", err)
		}
		if status := m.Header.Get("Status"); len(m.Data) == 0 && status != "" {
			switch status {
			case "204": // the end of the answer
				return nil
			case "404": // none of the sessions has a stored event
				return nil
			case "413":
				return errTooManyResults
			default:
				return fmt.Errorf("relay: looking up the last stored events: %s %s", status, m.Header.Get("Description"))
			}
		}
		// agents.sidecar.<id>.events.<type>
		parts := strings.SplitN(m.Header.Get(jetstream.SubjectHeader), ".", 4)
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if len(parts) < 4 || err != nil {
			return fmt.Errorf("relay: looking up the last stored events: unexpected answer %q", m.Header)
		}
		if id := parts[2]; seq > seqs[id] {
			seqs[id] = seq
			last[id] = m.Header.Get(HeaderRedisEntry)
		}
	}
}

// directGetSubject is where direct gets of the event stream are asked.
func (r *Relay) directGetSubject() string {
	opts := r.js.Options()
	prefix := "$JS.API."
	switch {
	case opts.APIPrefix != "":
		prefix = strings.TrimSuffix(opts.APIPrefix, ".") + "."
	case opts.Domain != "":
		prefix = "$JS." + opts.Domain + ".API."
	}
	return prefix + "DIRECT.GET." + bus.StreamSidecarEvents
}
