package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/internal/tracing"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Header names the relay sets on every raw event besides Nats-Msg-Id and
// Agents-Type.
const (
	// HeaderRedisEntry carries the Redis stream entry id the event was read
	// from. The relay reads it back from the last stored event of a session
	// to know where that session's relaying stopped.
	HeaderRedisEntry = "Agents-Redis-Entry"
	// HeaderSessionID carries the session id, as the subject does.
	HeaderSessionID = "Agents-Session-Id"
)

// TypeInvalid is the type, and the last subject token, of a Redis entry the
// relay could not read as a raw event (see protocol.TypeInvalid).
const TypeInvalid = protocol.TypeInvalid

// Event is the JSON body of a message on agents.sidecar.<sessionId>.events.<type>;
// the contract declares it as protocol.RawEvent.
type Event = protocol.RawEvent

// EventsKey returns the Redis key of a session's event stream,
// agent:session:{<id>}. The braces are a Redis Cluster hash tag.
func EventsKey(sessionID string) string { return protocol.EventsKey(sessionID) }

// CommandsKey returns the Redis key of a session's command stream,
// agent:session:{<id>}:commands.
func CommandsKey(sessionID string) string { return protocol.CommandsKey(sessionID) }

// MsgID returns the Nats-Msg-Id of the event relayed from entryID of a
// session: <sessionId>:<entryId>.
func MsgID(sessionID, entryID string) string { return sessionID + ":" + entryID }

// ValidSessionID reports whether id can name a session: it becomes a NATS
// subject token, a KV key and part of a Redis key, so only a-z, 0-9, '-'
// and '_' are allowed (a UUID in its usual lowercase form passes).
func ValidSessionID(id string) bool { return protocol.ValidSessionID(id) }

// headroom is what the headers of an event take at most, besides its body.
const headroom = 2048

// keepOfTooLarge is how much of each field an event too large to forward
// keeps.
const keepOfTooLarge = 1024

// newEventMsg turns one Redis entry of a session into its JetStream message.
// An entry whose message would exceed maxPayload (when above zero) is
// forwarded as invalid, with its fields cut short.
func newEventMsg(sessionID, entryID string, fields map[string]any, maxPayload int) *nats.Msg {
	typ, data, ts, reason := checkEntry(fields)
	var body []byte
	if reason == "" {
		body = appendValidBody(make([]byte, 0, 96+len(sessionID)+len(entryID)+len(typ)+len(data)), sessionID, entryID, typ, ts, data)
	} else {
		body = invalidBody(sessionID, entryID, ts, reason, fields, 0)
	}
	if maxPayload > 0 && len(body)+headroom > maxPayload {
		reason = fmt.Sprintf("entry of %d bytes exceeds the message size limit of %d", len(body), maxPayload)
		body = invalidBody(sessionID, entryID, ts, reason, fields, keepOfTooLarge)
	}
	if reason != "" {
		typ = TypeInvalid
	}
	m := &nats.Msg{
		Subject: bus.SidecarEventSubject(sessionID, typ),
		Header:  make(nats.Header, 6),
		Data:    body,
	}
	m.Header[bus.HeaderMsgID] = []string{MsgID(sessionID, entryID)}
	m.Header[bus.HeaderType] = []string{typ}
	m.Header[HeaderRedisEntry] = []string{entryID}
	m.Header[HeaderSessionID] = []string{sessionID}
	if tp, ok := fields[tracing.Field].(string); ok && tracing.Valid(tp) {
		m.Header[bus.HeaderTraceparent] = []string{tp}
	}
	return m
}

// invalidBody encodes the Event of an invalid entry; keep above zero cuts
// every field to that many bytes.
func invalidBody(sessionID, entryID string, ts int64, reason string, fields map[string]any, keep int) []byte {
	raw := make(map[string]string, len(fields))
	for k, v := range fields {
		s := fmt.Sprint(v)
		if keep > 0 && len(s) > keep {
			s = s[:keep]
		}
		raw[k] = s
	}
	// Strings only: encoding cannot fail.
	body, _ := json.Marshal(Event{SessionID: sessionID, EntryID: entryID, Type: TypeInvalid, TS: ts, Error: reason, Fields: raw})
	return body
}

// checkEntry validates an entry against the Redis contract and returns its
// type, data and ts, or the reason it is invalid (ts is returned whenever it
// parses).
func checkEntry(fields map[string]any) (typ string, data []byte, ts int64, reason string) {
	tsRaw, _ := fields["ts"].(string)
	ts, tsErr := strconv.ParseInt(tsRaw, 10, 64)
	if tsErr != nil {
		ts = 0
	}
	typ, _ = fields["type"].(string)
	switch {
	case typ == "":
		return "", nil, ts, "missing type"
	case !protocol.IsEventType(typ):
		return "", nil, ts, fmt.Sprintf("unknown type %q", typ)
	}
	rawData, ok := fields["data"].(string)
	if !ok {
		return "", nil, ts, "missing data"
	}
	data = []byte(rawData)
	if !json.Valid(data) {
		return "", nil, ts, "data is not JSON"
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return "", nil, ts, "data is not a JSON object"
	}
	if tsRaw == "" {
		return "", nil, ts, "missing ts"
	}
	if tsErr != nil || ts < 0 {
		return "", nil, 0, fmt.Sprintf("ts %q is not Unix milliseconds", tsRaw)
	}
	return typ, data, ts, ""
}

// appendValidBody encodes the Event of a valid entry without reflection:
// the session id, entry id and type hold no character JSON must escape, and
// data was checked to be a JSON object.
func appendValidBody(b []byte, sessionID, entryID, typ string, ts int64, data []byte) []byte {
	b = append(b, `{"sessionId":"`...)
	b = append(b, sessionID...)
	b = append(b, `","entryId":"`...)
	b = append(b, entryID...)
	b = append(b, `","type":"`...)
	b = append(b, typ...)
	b = append(b, `","ts":`...)
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, `,"data":`...)
	b = append(b, data...)
	return append(b, '}')
}

// IsKnownType reports whether typ is a raw event type of the Redis contract
// (DESIGN.md §3).
func IsKnownType(typ string) bool { return protocol.IsEventType(typ) }
