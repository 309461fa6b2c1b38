package domain_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentbus/agentbus/domain"
)

// TestStatusAfterLifecycleEvents: the status each lifecycle event leaves
// its session in, as the doors show it; other events name none.
func TestStatusAfterLifecycleEvents(t *testing.T) {
	want := map[string]domain.SessionStatus{
		"agent_session_created": "Queued", "agent_session_started": "Running", "agent_session_turn_begun": "Running",
		"agent_session_turn_completed": "Idle", "agent_session_output_ready": "Idle",
		"session_interrupt_requested": "Interrupting", "session_interrupted": "Interrupted",
		"session_pause_requested": "Pausing", "session_paused": "Paused",
		"session_resume_requested": "Resuming", "session_resumed": "Running",
		"session_cancel_requested": "Cancelling", "session_cancelled": "Cancelled",
		"agent_session_approved": "Completed", "agent_session_closed": "Completed",
		"agent_session_rejected": "Failed", "agent_session_failed": "Failed", "agent_session_retried": "Queued",
		"session_waiting_for_input": "WaitingForInput", "session_input_received": "Running",
		"tool_permission_requested": "WaitingForApproval", "tool_permission_granted": "Running",
		"tool_permission_denied": "Running", "tool_permission_timed_out": "Running",
		"session_plan_approved": "Running", "session_plan_rejected": "Running",
		"context_exhausted": "ContextExhausted",
	}
	for _, typ := range domain.EventTypes() {
		got, ok := domain.StatusAfter(typ)
		status, changes := want[typ]
		assert.Equal(t, changes, ok, typ)
		assert.Equal(t, status, got, typ)
	}
}
