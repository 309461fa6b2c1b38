package sidecar_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// TestAnswersCarryTheirCommandsTraceparent sends commands with a
// traceparent and finds it on the events answering them, and on no other.
func TestAnswersCarryTheirCommandsTraceparent(t *testing.T) {
	t.Parallel()
	h := start(t, scriptConfig(t, "question"))
	h.waitTool("AskUserQuestion") // the turn waits for an answer

	const pauseTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const steerTrace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	pause := uuid.NewString()
	values, err := protocol.CommandValues(protocol.CommandPause, pause, nil, time.Now())
	require.NoError(t, err)
	h.sendRaw(append(values, protocol.FieldTraceparent, pauseTrace)...)
	assert.Equal(t, pauseTrace, h.waitAck(protocol.EventPauseAck, pause).Traceparent, "the pause_ack continues the pause's trace")

	resume := h.send(protocol.CommandResume, nil)
	assert.Empty(t, h.waitAck(protocol.EventResumeAck, resume).Traceparent, "a command without a trace gets an answer without one")

	values, err = protocol.CommandValues(protocol.CommandSteeringMessage, uuid.NewString(),
		steer("m1", "hurry up", protocol.PriorityImmediate), time.Now())
	require.NoError(t, err)
	h.sendRaw(append(values, protocol.FieldTraceparent, steerTrace)...)
	delivered := h.waitFor("message_delivered of m1", func(e protocol.Entry) bool {
		return e.Type == protocol.EventMessageDelivered && dataField(t, e, "message_id") == "m1"
	})
	assert.Equal(t, steerTrace, delivered.Traceparent, "the message_delivered continues the steering message's trace")

	for _, e := range h.poll() {
		if e.Type != protocol.EventPauseAck && e.Type != protocol.EventMessageDelivered {
			assert.Empty(t, e.Traceparent, "%s answers no traced command", e.Type)
		}
	}
}
