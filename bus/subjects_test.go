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

type namedEvent struct{ aggregate, typ string }

func (e namedEvent) AggregateType() string { return e.aggregate }
func (e namedEvent) EventType() string     { return e.typ }

// TestFiltersAreSpelledAsTheSubjectsTheyMatch: each filter builder's
// filter matches the subjects it names and no other.
func TestFiltersAreSpelledAsTheSubjectsTheyMatch(t *testing.T) {
	const id = "0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"
	paused := namedEvent{"session", "session_paused"}
	assert.Equal(t, "agents.evt.session.*.session_paused", bus.EventFilter(paused))
	assert.Equal(t, []string{"agents.evt.session.*.session_paused", "agents.evt.queue.*.message_enqueued"},
		bus.EventFilters(paused, namedEvent{"queue", "message_enqueued"}))
	assert.Equal(t, "agents.evt.session.>", bus.AggregateEventsFilter("session"))
	assert.Equal(t, "agents.evt.>", bus.AllEventsFilter())
	assert.Equal(t, "agents.cmd.>", bus.AllCommandsFilter())
	assert.Equal(t, "agents.evt.session."+id+".>", bus.InstanceEventsFilter("session", id))
	assert.True(t, bus.SubjectMatches(bus.EventFilter(paused), bus.EventSubject("session", id, "session_paused")))
	assert.False(t, bus.SubjectMatches(bus.EventFilter(paused), bus.EventSubject("session", id, "session_resumed")))
	assert.True(t, bus.SubjectMatches(bus.InstanceEventsFilter("session", id), bus.EventSubject("session", id, "session_paused")))
	assert.False(t, bus.SubjectMatches(bus.InstanceEventsFilter("queue", id), bus.EventSubject("session", id, "session_paused")))
}

// TestTheSidecarSubjectsNameTheirSession: the session id is read back from
// the sidecar subjects; another subject names none.
func TestTheSidecarSubjectsNameTheirSession(t *testing.T) {
	const id = "0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"
	assert.Equal(t, id, bus.SidecarSessionID(bus.SidecarCommandSubject(id, "pause")))
	assert.Equal(t, id, bus.SidecarSessionID(bus.SidecarEventSubject(id, "pause_ack")))
	assert.Equal(t, "", bus.SidecarSessionID(bus.EventSubject("session", id, "session_paused")))
}
