package domain

import (
	"time"

	"github.com/google/uuid"
)

// Event is a domain event: a plain value that records something that
// happened to an aggregate. Aggregates collect their events; the caller
// takes them with PopEvents and writes them to the outbox in the same
// transaction as the aggregate, and the outbox publisher puts each on
// agents.evt.<AggregateType>.<AggregateID>.<EventType>. Every event
// marshals to the JSON object that becomes the envelope's data.
type Event interface {
	// EventType is the event's stable snake_case name
	// (session_pause_requested), the last token of its subject.
	EventType() string
	// AggregateType names the aggregate the event belongs to (session).
	AggregateType() string
	// AggregateID identifies that aggregate.
	AggregateID() uuid.UUID
	// AggregateOwnerID is the user who owns the aggregate, for scoping.
	AggregateOwnerID() uuid.UUID
	// EventTime is when the event happened (the time the caller passed in).
	EventTime() time.Time
}

// Aggregate types, the second token of an event subject. Renaming one
// changes public subjects.
const (
	AggregateSession  = "session"
	AggregateQueue    = "queue"
	AggregateChain    = "chain"
	AggregateSkill    = "skill"
	AggregateTemplate = "template"
)

// SessionMeta is embedded in every event of an AgentSession (and in the
// pool's events, which are about one session).
type SessionMeta struct {
	SessionID  uuid.UUID `json:"sessionId"`
	OwnerID    uuid.UUID `json:"ownerId"`
	OccurredAt time.Time `json:"occurredAt"`
}

// AggregateType returns AggregateSession.
func (m SessionMeta) AggregateType() string { return AggregateSession }

// AggregateID returns the session id.
func (m SessionMeta) AggregateID() uuid.UUID { return m.SessionID }

// AggregateOwnerID returns the session's owner.
func (m SessionMeta) AggregateOwnerID() uuid.UUID { return m.OwnerID }

// EventTime returns when the event happened.
func (m SessionMeta) EventTime() time.Time { return m.OccurredAt }

// QueueMeta is embedded in every event of a SessionMessageQueue; the
// queue shares its session's id.
type QueueMeta struct {
	SessionID  uuid.UUID `json:"sessionId"`
	OwnerID    uuid.UUID `json:"ownerId"`
	OccurredAt time.Time `json:"occurredAt"`
}

// AggregateType returns AggregateQueue.
func (m QueueMeta) AggregateType() string { return AggregateQueue }

// AggregateID returns the session id, which is the queue's id.
func (m QueueMeta) AggregateID() uuid.UUID { return m.SessionID }

// AggregateOwnerID returns the session's owner.
func (m QueueMeta) AggregateOwnerID() uuid.UUID { return m.OwnerID }

// EventTime returns when the event happened.
func (m QueueMeta) EventTime() time.Time { return m.OccurredAt }

// ChainMeta is embedded in every event of a SessionChain.
type ChainMeta struct {
	ChainID    uuid.UUID `json:"chainId"`
	OwnerID    uuid.UUID `json:"ownerId"`
	OccurredAt time.Time `json:"occurredAt"`
}

// AggregateType returns AggregateChain.
func (m ChainMeta) AggregateType() string { return AggregateChain }

// AggregateID returns the chain id.
func (m ChainMeta) AggregateID() uuid.UUID { return m.ChainID }

// AggregateOwnerID returns the chain's owner.
func (m ChainMeta) AggregateOwnerID() uuid.UUID { return m.OwnerID }

// EventTime returns when the event happened.
func (m ChainMeta) EventTime() time.Time { return m.OccurredAt }

// SkillMeta is embedded in every event of an AgentSkill.
type SkillMeta struct {
	SkillID    uuid.UUID `json:"skillId"`
	OwnerID    uuid.UUID `json:"ownerId"`
	OccurredAt time.Time `json:"occurredAt"`
}

// AggregateType returns AggregateSkill.
func (m SkillMeta) AggregateType() string { return AggregateSkill }

// AggregateID returns the skill id.
func (m SkillMeta) AggregateID() uuid.UUID { return m.SkillID }

// AggregateOwnerID returns the skill's owner.
func (m SkillMeta) AggregateOwnerID() uuid.UUID { return m.OwnerID }

// EventTime returns when the event happened.
func (m SkillMeta) EventTime() time.Time { return m.OccurredAt }

// TemplateMeta is embedded in every event of an AgentTemplate.
type TemplateMeta struct {
	TemplateID uuid.UUID `json:"templateId"`
	OwnerID    uuid.UUID `json:"ownerId"`
	OccurredAt time.Time `json:"occurredAt"`
}

// AggregateType returns AggregateTemplate.
func (m TemplateMeta) AggregateType() string { return AggregateTemplate }

// AggregateID returns the template id.
func (m TemplateMeta) AggregateID() uuid.UUID { return m.TemplateID }

// AggregateOwnerID returns the template's owner.
func (m TemplateMeta) AggregateOwnerID() uuid.UUID { return m.OwnerID }

// EventTime returns when the event happened.
func (m TemplateMeta) EventTime() time.Time { return m.OccurredAt }

// eventRecorder collects the events an aggregate raises until the caller
// takes them; it is embedded in every aggregate.
type eventRecorder struct {
	events []Event
}

func (r *eventRecorder) raise(e ...Event) { r.events = append(r.events, e...) }

// PopEvents returns the events raised since the last call, in the order
// they were raised, and forgets them.
func (r *eventRecorder) PopEvents() []Event {
	e := r.events
	r.events = nil
	return e
}

// PendingEvents returns the events raised since the last PopEvents without
// forgetting them.
func (r *eventRecorder) PendingEvents() []Event {
	return append([]Event(nil), r.events...)
}
