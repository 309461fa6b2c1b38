package control

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Check reports every incomplete or inconsistent row of rows: a missing
// piece, a sidecar command or ack the protocol does not know, or a name
// two rows share.
func Check(rows []Control) error {
	var errs []error
	seen := map[string]string{}
	unique := func(row, what, name string) {
		key := what + " " + name
		if other, dup := seen[key]; dup {
			errs = append(errs, fmt.Errorf("controls %s and %s share the %s", other, row, key))
		}
		seen[key] = row
	}
	for i, c := range rows {
		row := c.Name
		if row == "" {
			row = fmt.Sprintf("#%d", i)
			errs = append(errs, fmt.Errorf("control %s has no name", row))
		}
		missing := func(field string, absent bool) {
			if absent {
				errs = append(errs, fmt.Errorf("control %s has no %s", row, field))
			}
		}
		missing("Request", c.Request == "")
		missing("RequestOp", c.RequestOp == nil)
		missing("Requested", c.Requested == nil || c.Requested.EventType() == "")
		missing("Sidecar", c.Sidecar == "")
		missing("Ack", c.Ack == nil || c.Ack.EventType() == "")
		missing("Acked", c.Acked == "")
		missing("Confirm", c.Confirm == "")
		missing("ConfirmOp", c.ConfirmOp == nil)
		missing("Route.OperationID", c.Route.OperationID == "")
		missing("Route.Path", c.Route.Path == "")
		missing("Route.Summary", c.Route.Summary == "")
		missing("Route.Description", c.Route.Description == "")
		if c.Sidecar != "" && !protocol.IsCommandType(string(c.Sidecar)) {
			errs = append(errs, fmt.Errorf("control %s: the protocol has no command %q", row, c.Sidecar))
		}
		if c.Ack != nil && c.Ack.EventType() != "" && !protocol.IsEventType(c.Ack.EventType()) {
			errs = append(errs, fmt.Errorf("control %s: the protocol has no event %q", row, c.Ack.EventType()))
		}
		if c.Requested != nil && !hasKey(c.Requested, "commandId") {
			errs = append(errs, fmt.Errorf("control %s: event %s names no commandId", row, c.Requested.EventType()))
		}
		if c.Ack != nil && !hasKey(c.Ack, "command_id") {
			errs = append(errs, fmt.Errorf("control %s: ack %s echoes no command_id", row, c.Ack.EventType()))
		}
		unique(row, "name", c.Name)
		unique(row, "request", c.Request)
		unique(row, "confirm", c.Confirm)
		unique(row, "sidecar command", string(c.Sidecar))
		unique(row, "route", c.Route.Path)
		if c.Requested != nil {
			unique(row, "requested event", c.Requested.EventType())
		}
		if c.Ack != nil {
			unique(row, "ack", c.Ack.EventType())
		}
	}
	return errors.Join(errs...)
}

// hasKey reports whether v's JSON object has the key: the id that joins a
// request to its ack travels under it.
func hasKey(v any, key string) bool {
	raw, err := json.Marshal(v)
	if err != nil {
		return false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return false
	}
	_, ok := fields[key]
	return ok
}
