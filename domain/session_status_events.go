package domain

import "slices"

// eventStatus pairs an event with the status it leaves its session in.
type eventStatus struct {
	event  Event
	status SessionStatus
}

// statusEvents are the lifecycle events that leave their session in one
// status whatever it was in before: the controls' (controlEventStatuses)
// and these.
var statusEvents = slices.Concat(controlEventStatuses, []eventStatus{
	{AgentSessionCreatedEvent{}, StatusQueued},
	{AgentSessionStartedEvent{}, StatusRunning},
	{AgentSessionTurnBegunEvent{}, StatusRunning},
	{AgentSessionTurnCompletedEvent{}, StatusIdle},
	{AgentSessionOutputReadyEvent{}, StatusIdle},
	{AgentSessionApprovedEvent{}, StatusCompleted},
	{AgentSessionClosedEvent{}, StatusCompleted},
	{AgentSessionRejectedEvent{}, StatusFailed},
	{AgentSessionFailedEvent{}, StatusFailed},
	{AgentSessionRetriedEvent{}, StatusQueued},
	{SessionWaitingForInputEvent{}, StatusWaitingForInput},
	{SessionInputReceivedEvent{}, StatusRunning},
	{ToolPermissionRequestedEvent{}, StatusWaitingForApproval},
	{ToolPermissionGrantedEvent{}, StatusRunning},
	{ToolPermissionDeniedEvent{}, StatusRunning},
	{ToolPermissionTimedOutEvent{}, StatusRunning},
	{SessionPlanApprovedEvent{}, StatusRunning},
	{SessionPlanRejectedEvent{}, StatusRunning},
	{ContextExhaustedEvent{}, StatusContextExhausted},
})

var statusAfter = func() map[string]SessionStatus {
	m := make(map[string]SessionStatus, len(statusEvents))
	for _, e := range statusEvents {
		if e.status != "" {
			m[e.event.EventType()] = e.status
		}
	}
	return m
}()

// StatusAfter returns the status the event of type eventType leaves its
// session in, for the doors' state messages; false for an event that
// changes no status, or not always to the same one.
func StatusAfter(eventType string) (SessionStatus, bool) {
	s, ok := statusAfter[eventType]
	return s, ok
}
