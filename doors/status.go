package doors

import "github.com/agentbus/agentbus/domain"

// StatusAfter is the session status a lifecycle event leaves its session
// in, for the doors' state messages; other events change no status.
var StatusAfter = map[string]string{
	domain.AgentSessionCreatedEvent{}.EventType():       "Queued",
	domain.AgentSessionStartedEvent{}.EventType():       "Running",
	domain.AgentSessionTurnBegunEvent{}.EventType():     "Running",
	domain.AgentSessionTurnCompletedEvent{}.EventType(): "Idle",
	domain.AgentSessionOutputReadyEvent{}.EventType():   "Idle",
	domain.SessionInterruptRequestedEvent{}.EventType(): "Interrupting",
	domain.SessionInterruptedEvent{}.EventType():        "Interrupted",
	domain.SessionPauseRequestedEvent{}.EventType():     "Pausing",
	domain.SessionPausedEvent{}.EventType():             "Paused",
	domain.SessionResumeRequestedEvent{}.EventType():    "Resuming",
	domain.SessionResumedEvent{}.EventType():            "Running",
	domain.SessionCancelRequestedEvent{}.EventType():    "Cancelling",
	domain.SessionCancelledEvent{}.EventType():          "Cancelled",
	domain.AgentSessionApprovedEvent{}.EventType():      "Completed",
	domain.AgentSessionClosedEvent{}.EventType():        "Completed",
	domain.AgentSessionRejectedEvent{}.EventType():      "Failed",
	domain.AgentSessionFailedEvent{}.EventType():        "Failed",
	domain.AgentSessionRetriedEvent{}.EventType():       "Queued",
	domain.SessionWaitingForInputEvent{}.EventType():    "WaitingForInput",
	domain.SessionInputReceivedEvent{}.EventType():      "Running",
	domain.ToolPermissionRequestedEvent{}.EventType():   "WaitingForApproval",
	domain.ToolPermissionGrantedEvent{}.EventType():     "Running",
	domain.ToolPermissionDeniedEvent{}.EventType():      "Running",
	domain.ToolPermissionTimedOutEvent{}.EventType():    "Running",
	domain.SessionPlanApprovedEvent{}.EventType():       "Running",
	domain.SessionPlanRejectedEvent{}.EventType():       "Running",
	domain.ContextExhaustedEvent{}.EventType():          "ContextExhausted",
}
