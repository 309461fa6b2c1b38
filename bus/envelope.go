package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/internal/tracing"
)

// Header names agentbus sets on its messages.
const (
	// HeaderMsgID carries the envelope id; JetStream drops a second message
	// with the same id within the stream's duplicate window.
	HeaderMsgID = jetstream.MsgIDHeader
	// HeaderType carries the envelope type, so a reader can filter without
	// decoding the body.
	HeaderType = "Agents-Type"
	// HeaderTraceparent carries the W3C trace context.
	HeaderTraceparent = tracing.Field
)

// Envelope is the JSON body of every command and event on the bus
// (DESIGN.md section 4).
type Envelope struct {
	// ID is unique per message (a UUID); it becomes the Nats-Msg-Id header.
	ID string `json:"id"`
	// Type names the command or event, snake_case (session_pause_requested).
	Type string `json:"type"`
	// Aggregate is the kind of aggregate the message is about (session).
	Aggregate string `json:"aggregate"`
	// AggregateID identifies the aggregate instance.
	AggregateID string `json:"aggregateId"`
	// Version is the aggregate version the event produced, or the command expects.
	Version int64 `json:"version"`
	// OwnerID is the owner the aggregate belongs to.
	OwnerID string `json:"ownerId"`
	// OccurredAt is when the command was issued or the event happened.
	OccurredAt time.Time `json:"occurredAt"`
	// Data is the type-specific payload, a JSON object.
	Data json.RawMessage `json:"data"`
}

// ErrInvalidEnvelope is returned for an envelope that lacks an id or a type,
// or whose data is not JSON.
var ErrInvalidEnvelope = errors.New("bus: invalid envelope")

// NewEnvelope returns an envelope with a fresh UUID, the current time and
// data encoded as JSON.
func NewEnvelope(typ, aggregate, aggregateID string, version int64, ownerID string, data any) (Envelope, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Envelope{}, fmt.Errorf("bus: encode %s data: %w", typ, err)
	}
	return Envelope{
		ID:          uuid.NewString(),
		Type:        typ,
		Aggregate:   aggregate,
		AggregateID: aggregateID,
		Version:     version,
		OwnerID:     ownerID,
		OccurredAt:  time.Now().UTC(),
		Data:        raw,
	}, nil
}

// Validate reports an envelope that cannot be published.
func (e Envelope) Validate() error {
	if e.ID == "" {
		return fmt.Errorf("%w: empty id", ErrInvalidEnvelope)
	}
	if e.Type == "" {
		return fmt.Errorf("%w: empty type", ErrInvalidEnvelope)
	}
	if len(e.Data) > 0 && !json.Valid(e.Data) {
		return fmt.Errorf("%w: data is not JSON", ErrInvalidEnvelope)
	}
	return nil
}

// NewMsg builds the message that carries env on subject: the JSON envelope
// as body, Nats-Msg-Id = env.ID, Agents-Type = env.Type and traceparent when
// ctx carries one (see WithTraceparent). Empty data becomes {}, a zero
// OccurredAt the current time.
func NewMsg(ctx context.Context, subject string, env Envelope) (*nats.Msg, error) {
	if err := env.Validate(); err != nil {
		return nil, err
	}
	if len(env.Data) == 0 {
		env.Data = json.RawMessage("{}")
	}
	if env.OccurredAt.IsZero() {
		env.OccurredAt = time.Now().UTC()
	}
	body, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("bus: encode envelope %s: %w", env.ID, err)
	}
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set(HeaderMsgID, env.ID)
	m.Header.Set(HeaderType, env.Type)
	setTraceparent(ctx, m)
	return m, nil
}

// DecodeEnvelope decodes a message body written by NewMsg.
func DecodeEnvelope(data []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return Envelope{}, fmt.Errorf("%w: %v", ErrInvalidEnvelope, err)
	}
	if err := env.Validate(); err != nil {
		return Envelope{}, err
	}
	return env, nil
}

// WithTraceparent returns a context that continues the trace of the W3C
// traceparent tp, so messages built from it carry the header. An invalid
// value is ignored.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	return tracing.WithTraceparent(ctx, tp)
}

// Traceparent returns the traceparent of ctx's span, or "". Handlers run by
// Run get a span continuing the trace of the message they handle.
func Traceparent(ctx context.Context) string {
	return tracing.Traceparent(ctx)
}

// setTraceparent gives m the trace context of ctx unless m carries one.
func setTraceparent(ctx context.Context, m *nats.Msg) {
	if m.Header.Get(HeaderTraceparent) != "" {
		return
	}
	if tp := tracing.Traceparent(ctx); tp != "" {
		if m.Header == nil {
			m.Header = nats.Header{}
		}
		m.Header.Set(HeaderTraceparent, tp)
	}
}
