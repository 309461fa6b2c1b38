package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/internal/tracing"
)

// commandNamespace derives a command id from the message when the command
// carries none, so a redelivery gets the same id.
var commandNamespace = uuid.MustParse("6f0e2a4c-3b7d-5e1f-9a8b-0c1d2e3f4a5b")

// writeCommand appends a command to a session's command stream unless its
// id was written before: KEYS[1] the command stream, KEYS[2] the record of
// the id; ARGV: record lifetime in ms, type, data, ts, command_id and
// traceparent ("" for none). The record and the entry are written by one
// script, so both or neither exist. Both keys share the session's hash
// tag. It returns the new entry id, or nil for a command written before.
var writeCommand = redis.NewScript(`
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[1]) then
  if ARGV[6] ~= '' then
    return redis.call('XADD', KEYS[1], '*', 'type', ARGV[2], 'data', ARGV[3], 'ts', ARGV[4], 'command_id', ARGV[5], 'traceparent', ARGV[6])
  end
  return redis.call('XADD', KEYS[1], '*', 'type', ARGV[2], 'data', ARGV[3], 'ts', ARGV[4], 'command_id', ARGV[5])
end
return false
`)

// Command is a sidecar command as the relay writes it to Redis.
type Command struct {
	// SessionID is the session the command is for.
	SessionID string
	// Type is the command type (pause, steering_message, ...).
	Type string
	// ID is the command_id, a UUID.
	ID string
	// Data is the command's payload, a JSON object.
	Data json.RawMessage
	// TS is when the command was issued, Unix milliseconds.
	TS int64
	// Traceparent is the W3C trace context of the command, "" for none.
	Traceparent string
}

// WriteCommand appends cmd to its session's command stream with the fields
// type, data, ts, command_id and traceparent (when it has one), unless a command with the same id was
// written within dedupTTL. It reports whether it wrote the entry.
func WriteCommand(ctx context.Context, rdb redis.Scripter, cmd Command, dedupTTL time.Duration) (bool, error) {
	keys := []string{CommandsKey(cmd.SessionID), CommandsKey(cmd.SessionID) + ":written:" + cmd.ID}
	err := writeCommand.Run(ctx, rdb, keys, dedupTTL.Milliseconds(), cmd.Type, string(cmd.Data), strconv.FormatInt(cmd.TS, 10), cmd.ID, cmd.Traceparent).Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// ParseCommand reads a message of AGENTS_SIDECAR_COMMANDS. The subject
// agents.sidecar.<sessionId>.commands.<type> gives the session and the type;
// the body is a bus envelope whose data becomes the entry's data. The
// command id is the envelope id, else the Nats-Msg-Id header, else derived
// from the stream sequence; one that is not a UUID is turned into one. A
// valid traceparent header is kept for the entry.
func ParseCommand(msg jetstream.Msg) (Command, error) {
	tokens := strings.Split(msg.Subject(), ".")
	if len(tokens) != 5 || tokens[0] != "agents" || tokens[1] != "sidecar" || tokens[3] != "commands" {
		return Command{}, fmt.Errorf("subject %q is not agents.sidecar.<sessionId>.commands.<type>", msg.Subject())
	}
	cmd := Command{SessionID: tokens[2], Type: tokens[4]}
	if !ValidSessionID(cmd.SessionID) {
		return Command{}, fmt.Errorf("invalid session id %q", cmd.SessionID)
	}
	var env bus.Envelope
	if body := bytes.TrimSpace(msg.Data()); len(body) > 0 {
		if err := json.Unmarshal(body, &env); err != nil {
			return Command{}, fmt.Errorf("body is not a JSON envelope: %w", err)
		}
	}
	cmd.Data = env.Data
	if t := bytes.TrimSpace(cmd.Data); len(t) == 0 || string(t) == "null" {
		cmd.Data = json.RawMessage("{}")
	} else if t[0] != '{' {
		return Command{}, errors.New("data is not a JSON object")
	}
	meta, err := msg.Metadata()
	if err != nil {
		return Command{}, err
	}
	id := env.ID
	if id == "" {
		id = msg.Headers().Get(jetstream.MsgIDHeader)
	}
	if id == "" {
		id = meta.Stream + ":" + strconv.FormatUint(meta.Sequence.Stream, 10)
	}
	if u, err := uuid.Parse(id); err == nil {
		cmd.ID = u.String()
	} else {
		cmd.ID = uuid.NewSHA1(commandNamespace, []byte(id)).String()
	}
	if tp := msg.Headers().Get(bus.HeaderTraceparent); tracing.Valid(tp) {
		cmd.Traceparent = tp
	}
	cmd.TS = meta.Timestamp.UnixMilli()
	if !env.OccurredAt.IsZero() {
		cmd.TS = env.OccurredAt.UnixMilli()
	}
	return cmd, nil
}

// writeCommand writes cmd, waiting out a Redis that cannot be reached (the
// runner keeps the message in progress meanwhile), so an outage of any
// length uses up none of the command's deliveries. An error Redis answers
// with is returned.
func (r *Relay) writeCommand(ctx context.Context, cmd Command) (bool, error) {
	for failures := 0; ; failures++ {
		written, err := WriteCommand(ctx, r.rdb, cmd, r.cfg.CommandDedupTTL)
		var rerr redis.Error
		if err == nil || errors.As(err, &rerr) || ctx.Err() != nil {
			return written, err
		}
		if failures == 0 {
			r.log.Warn("writing a command failed, retrying", "session_id", cmd.SessionID, "command_id", cmd.ID, "err", err)
		}
		if !sleep(ctx, backoff(failures)) {
			return false, err
		}
	}
}

// commandSession keys the commands of one session to one lane, so they are
// written in the order they were published.
func commandSession(msg jetstream.Msg) string {
	return bus.SidecarSessionID(msg.Subject())
}

// outbound consumes AGENTS_SIDECAR_COMMANDS and writes each command to its
// session's command stream, one at a time per session in stream order. A
// message is acknowledged only after the XADD; a redelivered one finds its
// id recorded and is not written twice. A message that cannot be a command
// is dead-lettered to agents.dlq.<consumer> by bus.Run.
func (r *Relay) outbound(ctx context.Context) error {
	return bus.Run(ctx, r.js, bus.RunnerConfig{
		Stream:      bus.StreamSidecarCommands,
		Consumer:    r.cfg.OutboundConsumer,
		Concurrency: 4,
		OrderKey:    commandSession,
		Logger:      r.log,
		Handler: func(ctx context.Context, msg jetstream.Msg) error {
			cmd, err := ParseCommand(msg)
			if err != nil {
				return bus.Permanent(err)
			}
			written, err := r.writeCommand(ctx, cmd)
			if err != nil {
				return fmt.Errorf("write command %s to session %s: %w", cmd.ID, cmd.SessionID, err)
			}
			r.touch(cmd.SessionID)
			if !written {
				r.log.Debug("command written before, skipping", "session_id", cmd.SessionID, "command_id", cmd.ID)
			}
			return nil
		},
	})
}
