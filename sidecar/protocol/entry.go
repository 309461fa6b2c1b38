package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Field names of a stream entry.
const (
	FieldType      = "type"
	FieldData      = "data"
	FieldTS        = "ts"
	FieldCommandID = "command_id"
	// FieldTraceparent is the optional W3C trace context of an entry: set
	// on a command by the control plane, copied by the sidecar onto the
	// events that answer it.
	FieldTraceparent = "traceparent"
)

// Entry is one entry of an event or command stream.
type Entry struct {
	// ID is the Redis stream entry id ("<ms>-<seq>").
	ID string
	// Type is the event or command type.
	Type string
	// Data is the entry's data field, a JSON object.
	Data json.RawMessage
	// TS is the entry's ts field, Unix milliseconds.
	TS int64
	// CommandID is the command entry's command_id field; empty on events.
	CommandID string
	// Traceparent is the entry's traceparent field, "" when it has none.
	Traceparent string
}

// Values returns the fields of an entry of type typ with data (marshalled
// to a JSON object; nil gives {}) stamped at now, ready for XADD.
func Values(typ string, data any, now time.Time) ([]any, error) {
	raw, err := marshalObject(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", typ, err)
	}
	return []any{FieldType, typ, FieldData, string(raw), FieldTS, strconv.FormatInt(now.UnixMilli(), 10)}, nil
}

// EventValues returns the fields of the entry of ev stamped at now.
func EventValues(ev Event, now time.Time) ([]any, error) {
	return Values(ev.EventType(), ev, now)
}

// CommandValues returns the fields of a command entry, with its command_id.
func CommandValues(typ, commandID string, data any, now time.Time) ([]any, error) {
	v, err := Values(typ, data, now)
	if err != nil {
		return nil, err
	}
	return append(v, FieldCommandID, commandID), nil
}

func marshalObject(data any) ([]byte, error) {
	if data == nil {
		return []byte("{}"), nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("data is not a JSON object")
	}
	return raw, nil
}

// ParseEntry reads a stream entry's fields (as go-redis returns them). It
// returns an error naming what is wrong with a malformed entry, together
// with whatever it could read (ID always, Type and CommandID when present).
func ParseEntry(id string, fields map[string]any) (Entry, error) {
	e := Entry{ID: id}
	e.Type, _ = fields[FieldType].(string)
	e.CommandID, _ = fields[FieldCommandID].(string)
	e.Traceparent, _ = fields[FieldTraceparent].(string)
	if ts, ok := fields[FieldTS].(string); ok {
		e.TS, _ = strconv.ParseInt(ts, 10, 64)
	}
	if e.Type == "" {
		return e, errors.New("missing type")
	}
	raw, ok := fields[FieldData].(string)
	if !ok || raw == "" {
		e.Data = json.RawMessage("{}")
		return e, nil
	}
	if !json.Valid([]byte(raw)) {
		return e, errors.New("data is not JSON")
	}
	if t := bytes.TrimLeft([]byte(raw), " \t\r\n"); t[0] != '{' {
		return e, errors.New("data is not a JSON object")
	}
	e.Data = json.RawMessage(raw)
	if e.CommandID == "" {
		// Accept a command id carried inside data by a lenient producer;
		// data was checked to be a JSON object, and one whose command_id
		// is not a string simply has none.
		var inner struct {
			CommandID string `json:"command_id"`
		}
		_ = json.Unmarshal(e.Data, &inner)
		e.CommandID = inner.CommandID
	}
	return e, nil
}
