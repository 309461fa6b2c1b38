package reactions

import (
	"maps"
	"slices"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// The subjects each reaction consumes. Its runner selects them, and the
// declaration of the worker that runs it writes them into its consumer's
// file, so the two cannot differ.

// SidecarDispatchFilters are every session event.
func SidecarDispatchFilters() []string {
	return []string{bus.AggregateEventsFilter(domain.AggregateSession)}
}

// PoolFilters are the events that make a session wait for a slot or end
// it.
func PoolFilters() []string {
	var filters []string
	for _, events := range []map[string]bool{waitingEvents, endingEvents} {
		for _, typ := range slices.Sorted(maps.Keys(events)) {
			filters = append(filters, bus.EventSubject(domain.AggregateSession, "*", typ))
		}
	}
	return filters
}

// DeliveryFilters are deliveryTriggers.
func DeliveryFilters() []string { return slices.Clone(deliveryTriggers) }

// HandoffFilters are handoffTriggers.
func HandoffFilters() []string { return slices.Clone(handoffTriggers) }

// NotifyFilters are notifyTriggers.
func NotifyFilters() []string { return slices.Clone(notifyTriggers) }

// ConsolidateFilters are the approvals, one of which may be a
// consolidation session's.
func ConsolidateFilters() []string {
	return []string{bus.EventFilter(domain.AgentSessionApprovedEvent{})}
}

// AutoContinueFilters are turnEnds.
func AutoContinueFilters() []string { return slices.Clone(turnEnds) }

// AutoContinueResultsFilters are the sidecars' validation results.
func AutoContinueResultsFilters() []string {
	return []string{bus.SidecarEventSubject("*", protocol.EventValidationResult)}
}

// RuntimeFilters are the events that start or stop a session's sidecar.
func RuntimeFilters() []string {
	return bus.EventFilters(domain.SessionAllocatedEvent{}, domain.SessionReleasedEvent{},
		domain.SessionCancelRequestedEvent{}, domain.SessionRewoundEvent{})
}
