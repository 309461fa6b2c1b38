package bus_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentbus/agentbus/bus"
)

// TestTheSessionKeyIsTheIDOfTheEventSubject: the events of a session and
// of its queue name the same id, read from their subjects as
// bus.EventSubject writes them; a subject of another form names none.
func TestTheSessionKeyIsTheIDOfTheEventSubject(t *testing.T) {
	const id = "0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"
	for _, subject := range []string{
		bus.EventSubject("session", id, "agent_session_turn_completed"),
		bus.EventSubject("queue", id, "message_enqueued"),
	} {
		got, ok := bus.EventAggregateID(subject)
		assert.True(t, ok, subject)
		assert.Equal(t, id, got, subject)
	}
	for _, subject := range []string{"agents.evt.queue", "agents.evt.queue." + id, "agents.sidecar." + id + ".events.x",
		"agents.evt.queue." + id + ".a.b", "agents.evt.queue..message_enqueued"} {
		_, ok := bus.EventAggregateID(subject)
		assert.False(t, ok, subject)
	}
}
