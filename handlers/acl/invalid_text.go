package acl

import (
	"encoding/json"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/internal/jsontext"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// invalidText checks every string of a raw event's message (its type, its
// data, the fields of an invalid entry) and returns the first that holds a
// NUL character or bytes that are not UTF-8. Such an event is not
// translated: Postgres would refuse its text wherever it went, and the
// event would be retried until dead-lettered while the session's later
// events overtook it. It is recorded, in its place, as an unknown event.
func invalidText(body []byte) *jsontext.Problem {
	p, err := jsontext.Check(body)
	if err != nil {
		// The body was decoded as an Event already; a document the
		// walker cannot read is as unfit as one with a bad string.
		return &jsontext.Problem{Reason: "is not readable JSON: " + err.Error()}
	}
	return p
}

// invalidTextActivity is the activity item of a raw event refused for its
// text: the summary names the failing field, the detail keeps the data as
// sent (JSON escapes such as \u0000 are plain text) with broken bytes
// replaced.
func invalidTextActivity(ev protocol.RawEvent, p *jsontext.Problem) domain.ActivityItem {
	detail := string(ev.Data)
	if ev.Fields != nil {
		// Strings only: encoding cannot fail, and it escapes NUL.
		raw, _ := json.Marshal(ev.Fields)
		detail = string(raw)
	}
	return item(domain.ActivityUnknownEvent, "Invalid sidecar event "+jsontext.Clean(ev.Type)+": "+jsontext.Clean(p.Error()),
		jsontext.Clean(detail))
}
