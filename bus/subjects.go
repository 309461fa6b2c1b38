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

// CommandSubject returns agents.cmd.<aggregate>.<command>.
func CommandSubject(aggregate, command string) string {
	return "agents.cmd." + aggregate + "." + command
}

// EventSubject returns agents.evt.<aggregate>.<aggregateID>.<event>.
func EventSubject(aggregate, aggregateID, event string) string {
	return "agents.evt." + aggregate + "." + aggregateID + "." + event
}

// EventAggregateID returns the aggregate id of a subject EventSubject
// wrote, and false for a subject of another form.
func EventAggregateID(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, "agents.evt.")
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
	return "agents.sidecar." + sessionID + ".events." + typ
}

// SidecarCommandSubject returns agents.sidecar.<sessionID>.commands.<typ>.
func SidecarCommandSubject(sessionID, typ string) string {
	return "agents.sidecar." + sessionID + ".commands." + typ
}

// DLQSubject returns agents.dlq.<consumer>, where Run dead-letters the
// messages the consumer gave up on.
func DLQSubject(consumer string) string {
	return "agents.dlq." + consumer
}
