package bus

import "strings"

// Stream names, as defined in nats/streams.
const (
	// StreamCommands holds agents.cmd.<aggregate>.<command> (work queue).
	StreamCommands = "AGENTS_COMMANDS"
	// StreamEvents holds agents.evt.<aggregate>.<aggregateId>.<event> (replayable).
	StreamEvents = "AGENTS_EVENTS"
	// StreamSidecarEvents holds agents.sidecar.<sessionId>.events.<type> (replayable).
	StreamSidecarEvents = "AGENTS_SIDECAR_EVENTS"
	// StreamSidecarCommands holds agents.sidecar.<sessionId>.commands.<type> (work queue).
	StreamSidecarCommands = "AGENTS_SIDECAR_COMMANDS"
	// StreamDLQ holds agents.dlq.<consumer>: the messages a consumer gave up on.
	StreamDLQ = "AGENTS_DLQ"
)

// Subject prefixes: every subject of a kind begins with one.
const (
	commandPrefix = "agents.cmd."
	eventPrefix   = "agents.evt."
	sidecarPrefix = "agents.sidecar."
)

// CommandSubject returns agents.cmd.<aggregate>.<command>.
func CommandSubject(aggregate, command string) string {
	return commandPrefix + aggregate + "." + command
}

// EventSubject returns agents.evt.<aggregate>.<aggregateID>.<event>.
func EventSubject(aggregate, aggregateID, event string) string {
	return eventPrefix + aggregate + "." + aggregateID + "." + event
}

// NamedEvent is what a subject filter needs of a domain event: its
// aggregate and its type, as every domain event type has them.
type NamedEvent interface {
	AggregateType() string
	EventType() string
}

// EventFilter returns agents.evt.<aggregate>.*.<event>: the events of e's
// type, of every instance of its aggregate.
func EventFilter(e NamedEvent) string {
	return EventSubject(e.AggregateType(), "*", e.EventType())
}

// EventFilters returns the EventFilter of each event, in order.
func EventFilters(events ...NamedEvent) []string {
	filters := make([]string, len(events))
	for i, e := range events {
		filters[i] = EventFilter(e)
	}
	return filters
}

// AllCommandsFilter returns agents.cmd.>: every command.
func AllCommandsFilter() string { return commandPrefix + ">" }

// AllEventsFilter returns agents.evt.>: every domain event.
func AllEventsFilter() string { return eventPrefix + ">" }

// AggregateEventsFilter returns agents.evt.<aggregate>.>: every event of
// every instance of the aggregate.
func AggregateEventsFilter(aggregate string) string {
	return eventPrefix + aggregate + ".>"
}

// InstanceEventsFilter returns agents.evt.<aggregate>.<aggregateID>.>:
// every event of one instance of the aggregate.
func InstanceEventsFilter(aggregate, aggregateID string) string {
	return eventPrefix + aggregate + "." + aggregateID + ".>"
}

// EventAggregateID returns the aggregate id of a subject EventSubject
// wrote, and false for a subject of another form.
func EventAggregateID(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, eventPrefix)
	if !ok {
		return "", false
	}
	_, rest, ok = strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	id, event, ok := strings.Cut(rest, ".")
	if !ok || id == "" || event == "" || strings.Contains(event, ".") {
		return "", false
	}
	return id, true
}

// SidecarEventSubject returns agents.sidecar.<sessionID>.events.<typ>.
func SidecarEventSubject(sessionID, typ string) string {
	return sidecarPrefix + sessionID + ".events." + typ
}

// SidecarCommandSubject returns agents.sidecar.<sessionID>.commands.<typ>.
func SidecarCommandSubject(sessionID, typ string) string {
	return sidecarPrefix + sessionID + ".commands." + typ
}

// SidecarSessionID returns the session id of a subject
// SidecarEventSubject or SidecarCommandSubject wrote, and "" for a subject
// of another form.
func SidecarSessionID(subject string) string {
	rest, ok := strings.CutPrefix(subject, sidecarPrefix)
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, ".")
	return id
}

// DLQSubject returns agents.dlq.<consumer>, where Run dead-letters the
// messages the consumer gave up on.
func DLQSubject(consumer string) string {
	return "agents.dlq." + consumer
}
