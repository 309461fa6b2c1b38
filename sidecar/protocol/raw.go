package protocol

import (
	"encoding/json"
	"slices"
)

// TypeInvalid is the type, and the last subject token, of a Redis entry the
// relay could not read as a raw event: an unknown or missing type, data that
// is not a JSON object, a missing or non-numeric ts. Such an entry is still
// forwarded, with its raw fields, so the ACL records and dead-letters it.
const TypeInvalid = "invalid"

// RawEvent is one entry of a session's event stream as the relay forwards
// it: the JSON body of a message on agents.sidecar.<sessionId>.events.<type>,
// which the ACL and the projections read. A valid entry has Data and no
// Error; an invalid one has Type TypeInvalid, Error and Fields, and no Data.
type RawEvent struct {
	// SessionID is the session whose stream the entry came from.
	SessionID string `json:"sessionId"`
	// EntryID is the Redis stream entry id ("<ms>-<seq>").
	EntryID string `json:"entryId"`
	// Type is the entry's type field, or TypeInvalid.
	Type string `json:"type"`
	// TS is the entry's ts field: Unix milliseconds, 0 when unreadable.
	TS int64 `json:"ts"`
	// Data is the entry's data field, a JSON object, as the sidecar wrote it.
	Data json.RawMessage `json:"data,omitempty"`
	// Error says why an invalid entry could not be read.
	Error string `json:"error,omitempty"`
	// Fields are all the fields of an invalid entry, as strings.
	Fields map[string]string `json:"fields,omitempty"`
}

// IsEventType reports whether typ is a raw event type of the contract
// (one of EventTypes).
func IsEventType(typ string) bool { return eventTypes[typ] }

// eventTypes is EventTypes as a set: the relay checks every entry's type.
var eventTypes = func() map[string]bool {
	set := make(map[string]bool, len(EventTypes))
	for _, t := range EventTypes {
		set[t] = true
	}
	return set
}()

// IsCommandType reports whether typ is a command type of the contract
// (one of CommandTypes).
func IsCommandType(typ string) bool { return slices.Contains(CommandTypes, typ) }
