package webhooks

import (
	"encoding/json"
	"strings"
	"time"
)

// Payload is the body of a delivery, as the Standard Webhooks
// specification shapes it: the event's type, when it happened, and its
// data.
type Payload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      EventData `json:"data"`
}

// EventData is what a delivery tells of its event: which session, in
// which status when the event was enqueued, where to see it, and the
// event's own data.
type EventData struct {
	EventID   string          `json:"eventId"`
	SessionID string          `json:"sessionId,omitempty"`
	Status    string          `json:"status,omitempty"`
	URL       string          `json:"url,omitempty"`
	Event     json.RawMessage `json:"event"`
}

// sessionLink is the session's URL in the API at base.
func sessionLink(base, session string) string {
	return strings.TrimSuffix(base, "/") + "/api/agents/sessions/" + session
}
