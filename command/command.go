// Package command carries commands to the commands worker and their
// results back: the message format on agents.cmd.<aggregate>.<command>, a
// client that sends a command and may wait for its result, and the
// dispatcher that runs one handler per command, exactly once per command id.
package command

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/domain"
)

// ReplyHeader names the subject a sender listens on for the result.
const ReplyHeader = "Agents-Reply-To"

// Command is the body of a message on AGENTS_COMMANDS.
type Command struct {
	// ID identifies the command; it is the Nats-Msg-Id and the key of
	// idempotent handling, so a repeated command changes nothing.
	ID uuid.UUID `json:"id"`
	// Aggregate is the kind of aggregate addressed (session, queue, chain,
	// template, skill).
	Aggregate string `json:"aggregate"`
	// Name is the command's snake_case name (pause_session).
	Name string `json:"type"`
	// AggregateID is the addressed aggregate, when it exists already.
	AggregateID uuid.UUID `json:"aggregateId"`
	// OwnerID is the user on whose behalf the command runs; empty for
	// internal commands.
	OwnerID string `json:"ownerId,omitempty"`
	// IssuedAt is when the sender created the command.
	IssuedAt time.Time `json:"occurredAt"`
	// Data holds the command's parameters.
	Data json.RawMessage `json:"data,omitempty"`
}

// Subject returns agents.cmd.<aggregate>.<command>.
func (c Command) Subject() string {
	return bus.CommandSubject(c.Aggregate, c.Name)
}

// New builds a command with a fresh id.
func New(aggregate, name string, aggregateID uuid.UUID, ownerID string, data any) (Command, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Command{}, fmt.Errorf("encode %s: %w", name, err)
	}
	return Command{ID: uuid.New(), Aggregate: aggregate, Name: name, AggregateID: aggregateID,
		OwnerID: ownerID, IssuedAt: time.Now().UTC(), Data: raw}, nil
}

// Error kinds a result may carry: the kinds of domain/errors.go, named
// here for the command's senders. The HTTP API maps each to one status.
const (
	KindValidation   = domain.KindValidation
	KindConflict     = domain.KindConflict
	KindNotFound     = domain.KindNotFound
	KindUnauthorized = domain.KindUnauthorized
	KindForbidden    = domain.KindForbidden
	KindInternal     = domain.KindInternal
)

// Result is what the commands worker answers to a command.
type Result struct {
	CommandID uuid.UUID `json:"commandId"`
	// Error is set when the command was refused; the state is unchanged.
	Error *Error `json:"error,omitempty"`
	// State is a summary of the aggregate after the command.
	State json.RawMessage `json:"state,omitempty"`
}

// Err returns the result's error, or nil on success.
func (r Result) Err() error {
	if r.Error == nil {
		return nil
	}
	return r.Error
}

// Error is a refused command: its kind, a message for people, and where
// known the failing field or the aggregate's current status.
type Error struct {
	Kind          string `json:"kind"`
	Message       string `json:"message"`
	Field         string `json:"field,omitempty"`
	CurrentStatus string `json:"currentStatus,omitempty"`
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind)
	b.WriteString(": ")
	b.WriteString(e.Message)
	return b.String()
}

// AsError finds a *Error in err's chain.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
