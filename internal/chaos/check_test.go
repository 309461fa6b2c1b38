package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/projections"
	"github.com/agentbus/agentbus/relay"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// RawCount is what the check found of the raw events of the sessions.
type RawCount struct {
	Written    int // entries the sidecars wrote to their Redis streams
	Found      int // of those, stored in AGENTS_SIDECAR_EVENTS
	Lost       int // written, never stored
	Doubled    int // stored more than once (each extra copy)
	OutOfOrder int // stored before an entry written earlier
	Phantom    int // stored, never written
}

// stored is one raw event as AGENTS_SIDECAR_EVENTS holds it.
type stored struct {
	entry string
	typ   string
	data  json.RawMessage
}

// readRaw reads AGENTS_SIDECAR_EVENTS whole, by session, in stream order.
func readRaw(ctx context.Context, js jetstream.JetStream) (map[string][]stored, error) {
	return readStream(ctx, js, bus.StreamSidecarEvents, func(m jetstream.Msg) (string, stored, error) {
		var ev relay.Event
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			return "", stored{}, fmt.Errorf("raw event %s: %w", m.Subject(), err)
		}
		return ev.SessionID, stored{entry: ev.EntryID, typ: ev.Type, data: ev.Data}, nil
	})
}

// readStream reads a whole stream, grouping its messages by key.
func readStream[T any](ctx context.Context, js jetstream.JetStream, name string,
	decode func(jetstream.Msg) (string, T, error)) (map[string][]T, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]T{}
	if info.State.Msgs == 0 {
		return out, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	last := info.State.LastSeq
	for {
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			key, v, err := decode(m)
			if err != nil {
				return nil, err
			}
			out[key] = append(out[key], v)
			meta, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			if meta.Sequence.Stream >= last {
				return out, batch.Error()
			}
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if n == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// writtenEntries returns the entry ids of a session's Redis event stream.
func writtenEntries(ctx context.Context, rdb *redis.Client, session string) ([]string, error) {
	msgs, err := rdb.XRange(ctx, relay.EventsKey(session), "-", "+").Result()
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids, nil
}

// countRaw compares what was written with what was stored, per session.
func countRaw(written []string, got []stored) RawCount {
	c := RawCount{Written: len(written)}
	wrote := map[string]bool{}
	for _, id := range written {
		wrote[id] = true
	}
	seen := map[string]int{}
	prev := ""
	for _, ev := range got {
		seen[ev.entry]++
		switch {
		case !wrote[ev.entry]:
			c.Phantom++
		case seen[ev.entry] > 1:
			c.Doubled++
		}
		if prev != "" && !entryBefore(prev, ev.entry) && seen[ev.entry] == 1 {
			c.OutOfOrder++
		}
		if seen[ev.entry] == 1 {
			prev = ev.entry
		}
	}
	for _, id := range written {
		if seen[id] > 0 {
			c.Found++
		} else {
			c.Lost++
		}
	}
	return c
}

// entryBefore says whether Redis entry id a comes before b.
func entryBefore(a, b string) bool {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	x, _ := strconv.ParseUint(am, 10, 64)
	y, _ := strconv.ParseUint(bm, 10, 64)
	if x != y {
		return x < y
	}
	xs, _ := strconv.ParseUint(as, 10, 64)
	ys, _ := strconv.ParseUint(bs, 10, 64)
	return xs < ys
}

// settleRaw waits until every session's Redis stream is relayed whole and
// nothing more is written for a while, or until the deadline; it returns
// the last reading.
func settleRaw(ctx context.Context, js jetstream.JetStream, rdb *redis.Client, sessions []string,
	deadline time.Time) (map[string][]string, map[string][]stored, error) {
	var lastTotal = -1
	stableSince := time.Now()
	for {
		got, err := readRaw(ctx, js)
		if err != nil {
			return nil, nil, err
		}
		written := map[string][]string{}
		total, relayed := 0, true
		for _, id := range sessions {
			ids, err := writtenEntries(ctx, rdb, id)
			if err != nil {
				return nil, nil, err
			}
			written[id] = ids
			total += len(ids)
			if countRaw(ids, got[id]).Found < len(ids) {
				relayed = false
			}
		}
		if total != lastTotal {
			lastTotal, stableSince = total, time.Now()
		}
		if relayed && time.Since(stableSince) > 5*time.Second || time.Now().After(deadline) {
			return written, got, nil
		}
		time.Sleep(time.Second)
	}
}

// statusAfter is the status each lifecycle event of a session leaves it in.
var statusAfter = map[string]domain.SessionStatus{
	domain.AgentSessionCreatedEvent{}.EventType():       domain.StatusQueued,
	domain.AgentSessionStartedEvent{}.EventType():       domain.StatusRunning,
	domain.AgentSessionTurnBegunEvent{}.EventType():     domain.StatusRunning,
	domain.AgentSessionTurnCompletedEvent{}.EventType(): domain.StatusIdle,
	domain.AgentSessionOutputReadyEvent{}.EventType():   domain.StatusIdle,
	domain.SessionInterruptRequestedEvent{}.EventType(): domain.StatusInterrupting,
	domain.SessionInterruptedEvent{}.EventType():        domain.StatusInterrupted,
	domain.SessionPauseRequestedEvent{}.EventType():     domain.StatusPausing,
	domain.SessionPausedEvent{}.EventType():             domain.StatusPaused,
	domain.SessionResumeRequestedEvent{}.EventType():    domain.StatusResuming,
	domain.SessionResumedEvent{}.EventType():            domain.StatusRunning,
	domain.SessionCancelRequestedEvent{}.EventType():    domain.StatusCancelling,
	domain.SessionCancelledEvent{}.EventType():          domain.StatusCancelled,
	domain.AgentSessionFailedEvent{}.EventType():        domain.StatusFailed,
	domain.SessionWaitingForInputEvent{}.EventType():    domain.StatusWaitingForInput,
	domain.SessionInputReceivedEvent{}.EventType():      domain.StatusRunning,
	domain.AgentSessionClosedEvent{}.EventType():        domain.StatusCompleted,
}

// domainEvent is a domain event as AGENTS_EVENTS holds it.
type domainEvent struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	Aggregate   string `json:"aggregate"`
	AggregateID string `json:"aggregateId"`
}

// readDomain reads AGENTS_EVENTS whole, by aggregate id.
func readDomain(ctx context.Context, js jetstream.JetStream) (map[string][]domainEvent, error) {
	return readStream(ctx, js, bus.StreamEvents, func(m jetstream.Msg) (string, domainEvent, error) {
		var ev domainEvent
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			return "", ev, fmt.Errorf("event %s: %w", m.Subject(), err)
		}
		return ev.AggregateID, ev, nil
	})
}

// explainedStatus folds a session's events into the status they leave it
// in; ok is false when an event changes the status in a way the fold does
// not know, which the check reports.
func explainedStatus(events []domainEvent) (status domain.SessionStatus, unknown string) {
	for _, ev := range events {
		if ev.Aggregate != domain.AggregateSession {
			continue
		}
		if to, ok := statusAfter[ev.Type]; ok {
			status = to
			continue
		}
		switch ev.Type {
		case domain.AgentSessionApprovedEvent{}.EventType(),
			domain.AgentSessionRejectedEvent{}.EventType(), domain.AgentSessionRetriedEvent{}.EventType(),
			domain.SessionInputTimedOutEvent{}.EventType(), domain.SessionPauseTimedOutEvent{}.EventType(),
			domain.ContextExhaustedEvent{}.EventType(), domain.SessionVoluntaryHandoffEvent{}.EventType():
			unknown = ev.Type
		}
	}
	return status, unknown
}

// projectedTables are the transcript's tables, each with the order of its
// rows and which of them the raw events make (the agent's own log entries
// come through the agent API instead).
var projectedTables = []struct{ name, where, order string }{
	{"agent_messages", "", "source_seq"},
	{"tool_calls", "", "source_seq"},
	{"tool_results", "", "source_seq"},
	{"subagent_sessions", "", "source_seq"},
	{"session_log_chunks", "AND kind = 'output'", "recorded_at, source_seq"},
}

// transcriptRows reads a session's projected rows, table by table.
func transcriptRows(ctx context.Context, pool *pgxpool.Pool, session string) (map[string][][]any, error) {
	out := map[string][][]any{}
	for _, tb := range projectedTables {
		rows, err := pool.Query(ctx, fmt.Sprintf("SELECT * FROM %s WHERE session_id = $1 %s ORDER BY %s", tb.name, tb.where, tb.order), session)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				rows.Close()
				return nil, err
			}
			out[tb.name] = append(out[tb.name], v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// deleteTranscripts deletes the rows the raw events made for sessions.
func deleteTranscripts(ctx context.Context, pool *pgxpool.Pool, sessions []string) error {
	for _, tb := range projectedTables {
		if _, err := pool.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE session_id = ANY($1::uuid[]) %s", tb.name, tb.where), sessions); err != nil {
			return err
		}
	}
	return nil
}

// rebuildTranscript replays AGENTS_SIDECAR_EVENTS from its start into the
// transcript tables of pool, as a rebuild of the projection does.
func rebuildTranscript(ctx context.Context, js jetstream.JetStream, pool *pgxpool.Pool) error {
	w := projections.NewTranscript(pool)
	_, err := readStream(ctx, js, bus.StreamSidecarEvents, func(m jetstream.Msg) (string, struct{}, error) {
		err := w.Handle(ctx, m)
		if bus.IsPermanent(err) {
			// The worker dead-letters it too (a poison raw event).
			err = nil
		}
		return "", struct{}{}, err
	})
	return err
}

// deliveredIDs counts the message_delivered raw events of a session by
// message id.
func deliveredIDs(events []stored) map[string]int {
	out := map[string]int{}
	for _, ev := range events {
		if ev.typ != protocol.EventMessageDelivered {
			continue
		}
		var d protocol.MessageDelivered
		if json.Unmarshal(ev.data, &d) == nil {
			out[d.MessageID]++
		}
	}
	return out
}

// Table prints kills per component and the raw event counts.
func Table(w io.Writer, kills map[string]int, raw RawCount) {
	names := make([]string, 0, len(kills))
	total := 0
	for name, n := range kills {
		names = append(names, name)
		total += n
	}
	sort.Strings(names)
	fmt.Fprintf(w, "%-26s %6s\n", "component", "kills")
	for _, name := range names {
		fmt.Fprintf(w, "%-26s %6d\n", name, kills[name])
	}
	fmt.Fprintf(w, "%-26s %6d\n\n", "total", total)
	fmt.Fprintf(w, "%8s %8s %8s %8s %12s %8s\n", "written", "found", "lost", "doubled", "out-of-order", "phantom")
	fmt.Fprintf(w, "%8d %8d %8d %8d %12d %8d\n", raw.Written, raw.Found, raw.Lost, raw.Doubled, raw.OutOfOrder, raw.Phantom)
}

// uuidPattern finds the ids in an error text, so that errors differing
// only in their ids are counted together.
var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// deadLetters counts the dead-lettered messages by consumer and error, ids
// left out and the error cut to its first 100 characters.
func deadLetters(ctx context.Context, js jetstream.JetStream) (map[string]int, error) {
	byReason, err := readStream(ctx, js, bus.StreamDLQ, func(m jetstream.Msg) (string, struct{}, error) {
		reason := uuidPattern.ReplaceAllString(m.Headers().Get(bus.HeaderError), "<id>")
		if len(reason) > 100 {
			reason = reason[:100]
		}
		return m.Headers().Get(bus.HeaderConsumer) + ": " + reason, struct{}{}, nil
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(byReason))
	for k, v := range byReason {
		out[k] = len(v)
	}
	return out, nil
}
