package protocol

import "maps"

// NewData returns a new, empty value of the data of typ, an event or a
// command type of the contract, to decode an entry's data into; false for
// a type the contract does not have.
func NewData(typ string) (any, bool) {
	newData, ok := dataTypes[typ]
	if !ok {
		return nil, false
	}
	return newData(), true
}

// dataTypes are the data of every type: the controls' from controls.go,
// the others' here.
var dataTypes = func() map[string]func() any {
	m := map[string]func() any{
		EventSessionStarted:      func() any { return &SessionStarted{} },
		EventAssistantMessage:    func() any { return &AssistantMessage{} },
		EventTextDelta:           func() any { return &TextDelta{} },
		EventToolResult:          func() any { return &ToolResult{} },
		EventSubagentMessage:     func() any { return &SubagentMessage{} },
		EventUsageUpdate:         func() any { return &UsageUpdate{} },
		EventTurnCompleted:       func() any { return &TurnCompleted{} },
		EventContextNearingLimit: func() any { return &ContextNearingLimit{} },
		EventContextExhausted:    func() any { return &ContextExhausted{} },
		EventHandoffDocument:     func() any { return &HandoffDocument{} },
		EventVoluntaryHandoff:    func() any { return &VoluntaryHandoff{} },
		EventPermissionRequest:   func() any { return &PermissionRequest{} },
		EventMessageDelivered:    func() any { return &MessageDelivered{} },
		EventValidationResult:    func() any { return &ValidationResult{} },
		EventError:               func() any { return &ErrorEvent{} },
		EventSessionEnd:          func() any { return &SessionEnd{} },

		CommandSteeringMessage:    func() any { return &SteeringMessage{} },
		CommandAnswerQuestion:     func() any { return &AnswerQuestion{} },
		CommandPlanDecision:       func() any { return &PlanDecision{} },
		CommandPermissionResponse: func() any { return &PermissionResponse{} },
		CommandRunValidation:      func() any { return &RunValidation{} },
	}
	maps.Copy(m, controlData)
	for _, typ := range append(append([]string(nil), EventTypes...), CommandTypes...) {
		if m[typ] == nil {
			panic("protocol: no data type for " + typ)
		}
	}
	return m
}()
