package domain

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
)

// allEvents holds one zero value of every event type, so consumers can
// list and decode events by their type name. The two-phase controls'
// events are listed with the controls (controlEvents).
var allEvents = slices.Concat(controlEvents, []Event{
	// AgentSession lifecycle.
	AgentSessionCreatedEvent{}, AgentSessionStartedEvent{}, AgentSessionTurnBegunEvent{},
	AgentSessionTurnCompletedEvent{}, AgentSessionOutputReadyEvent{},
	AgentSessionApprovedEvent{}, AgentSessionClosedEvent{}, AgentSessionRejectedEvent{},
	AgentSessionFailedEvent{}, AgentSessionRetriedEvent{},
	ContextNearingLimitEvent{}, ContextExhaustedEvent{}, SessionVoluntaryHandoffEvent{},
	SessionChainAssignedEvent{}, SessionForkedEvent{}, SessionRewoundEvent{},
	// AgentSession work.
	SessionWaitingForInputEvent{}, SessionInputReceivedEvent{}, SessionInputTimedOutEvent{},
	SessionPauseTimedOutEvent{},
	SessionPlanCreatedEvent{}, SessionPlanPendingApprovalEvent{}, SessionPlanApprovedEvent{},
	SessionPlanRejectedEvent{}, SessionTaskListUpdatedEvent{},
	SessionSkillEnabledEvent{}, SessionSkillDisabledEvent{},
	SessionMetricsUpdatedEvent{}, SessionBudgetWarningEvent{}, SessionBudgetExhaustedEvent{},
	SessionBudgetRaisedEvent{}, SessionAutoContinuedEvent{}, SessionAutoContinueExhaustedEvent{},
	AgentAPITaskCreatedEvent{},
	// Tools, transcript, subagents.
	ToolPermissionRequestedEvent{}, ToolPermissionGrantedEvent{}, ToolPermissionDeniedEvent{},
	ToolPermissionTimedOutEvent{},
	AgentMessageRecordedEvent{}, ToolCallStartedEvent{}, ToolCallCompletedEvent{},
	SubAgentSessionStartedEvent{}, SubAgentSessionCompletedEvent{}, SubAgentSessionFailedEvent{},
	// SessionPool.
	SessionAllocatedEvent{}, SessionReleasedEvent{}, SessionPoolExhaustedEvent{},
	// SessionMessageQueue.
	MessageEnqueuedEvent{}, MessageDeliveredEvent{}, MessageCancelledEvent{}, MessagePromotedToImmediateEvent{},
	// SessionChain.
	SessionChainCreatedEvent{}, SessionHandoffInitiatedEvent{}, SessionAddedToChainEvent{},
	SessionChainCompletedEvent{}, SessionChainCancelledEvent{},
	// AgentSkill.
	AgentSkillCreatedEvent{}, AgentSkillUpdatedEvent{}, AgentSkillInstructionsUpdatedEvent{},
	AgentSkillDeactivatedEvent{}, AgentSkillActivatedEvent{},
	MemoryPillRecordedEvent{}, SkillConsolidatedEvent{}, MemoryPillDismissedEvent{},
	// AgentTemplate.
	AgentTemplateCreatedEvent{}, AgentTemplateUpdatedEvent{},
	AgentTemplateDeactivatedEvent{}, AgentTemplateActivatedEvent{},
})

var eventsByType = func() map[string]reflect.Type {
	m := make(map[string]reflect.Type, len(allEvents))
	for _, e := range allEvents {
		if _, dup := m[e.EventType()]; dup {
			panic("domain: duplicate event type " + e.EventType())
		}
		m[e.EventType()] = reflect.TypeOf(e)
	}
	return m
}()

// EventTypes returns the type name of every domain event.
func EventTypes() []string {
	names := make([]string, len(allEvents))
	for i, e := range allEvents {
		names[i] = e.EventType()
	}
	return names
}

// AggregateTypeOf returns the aggregate type of the events named
// eventType, or "" for an unknown name.
func AggregateTypeOf(eventType string) string {
	t, ok := eventsByType[eventType]
	if !ok {
		return ""
	}
	return reflect.Zero(t).Interface().(Event).AggregateType()
}

// DecodeEvent turns an envelope's type and JSON data back into the typed
// event, for consumers that want the struct rather than a map.
func DecodeEvent(eventType string, data []byte) (Event, error) {
	t, ok := eventsByType[eventType]
	if !ok {
		return nil, invalid("type", "unknown event type %q", eventType)
	}
	p := reflect.New(t)
	if err := json.Unmarshal(data, p.Interface()); err != nil {
		return nil, fmt.Errorf("decode %s: %w", eventType, err)
	}
	return p.Elem().Interface().(Event), nil
}

// IsEventType reports whether name is a known event type.
func IsEventType(name string) bool {
	return slices.Contains(EventTypes(), name)
}
