// Package protocol is the published language between a sidecar and
// agentbus (DESIGN.md §3): the Redis keys of a session, the entry format,
// and the exact data of every raw event and command, plus the composed
// session config a launcher hands to a sidecar. sidecar/README.md documents
// the same shapes for sidecars written in other languages.
package protocol

// EventsKey returns the key of a session's event stream,
// agent:session:{<id>}. The braces are literal: a Redis Cluster hash tag
// that keeps all of a session's keys on one shard.
func EventsKey(sessionID string) string { return "agent:session:{" + sessionID + "}" }

// CommandsKey returns the key of a session's command stream,
// agent:session:{<id>}:commands.
func CommandsKey(sessionID string) string { return EventsKey(sessionID) + ":commands" }

// CursorKey returns the key under which a sidecar keeps the id of the last
// command entry it handled, agent:session:{<id>}:cursor, so a restarted
// sidecar does not handle a command twice.
func CursorKey(sessionID string) string { return EventsKey(sessionID) + ":cursor" }

// InboxKey returns the key under which a sidecar keeps the command entries
// it took but has not answered yet, agent:session:{<id>}:inbox: steering
// messages not yet delivered to the agent, and stop, pause and interrupt
// commands not yet acknowledged. The cursor moves past an entry only once
// it is there, so a sidecar started again after a crash or a restart of
// its runtime takes them up instead of losing them.
func InboxKey(sessionID string) string { return EventsKey(sessionID) + ":inbox" }

// EngineKey returns the key under which a sidecar keeps its engine's own
// session id, agent:session:{<id>}:engine, so that a sidecar started again
// after a crash or a restart of its runtime resumes the agent's
// conversation.
func EngineKey(sessionID string) string { return EventsKey(sessionID) + ":engine" }

// ConfigKey returns the key under which a launcher in external mode leaves
// a session's composed config (a JSON Config), agent:session:{<id>}:config.
func ConfigKey(sessionID string) string { return EventsKey(sessionID) + ":config" }

// ValidSessionID reports whether id can name a session: it becomes part of
// Redis keys and of NATS subject tokens, so only a-z, 0-9, '-' and '_' are
// allowed (a lowercase UUID passes).
func ValidSessionID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}
