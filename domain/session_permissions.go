package domain

import (
	"time"
)

// MaxPermissionMessageChars bounds the message sent with a decision.
const MaxPermissionMessageChars = 2000

// RequestToolPermission records that the agent wants to use a tool and
// decides what happens, so the sidecar only relays:
//   - the policy needs no approval for the tool: allowed at once
//     (ToolPermissionGrantedEvent, decided by policy), the session keeps running;
//   - approval is needed: the request is recorded and the session waits,
//     Running -> WaitingForApproval (ToolPermissionRequestedEvent);
//   - the session is being interrupted, paused or cancelled: denied at
//     once, so the sidecar is not left blocked on a question nobody sees.
//
// The returned decision is PermissionAllow, PermissionDeny or PermissionPending.
func (s *AgentSession) RequestToolPermission(requestID, toolName, input string, now time.Time) (PermissionDecision, error) {
	if err := s.allow(OpRequestToolPermission); err != nil {
		return "", err
	}
	var err error
	if requestID, err = requireText("requestId", requestID, 1, 200); err != nil {
		return "", err
	}
	if toolName, err = requireText("toolName", toolName, 1, MaxToolNameChars); err != nil {
		return "", err
	}
	if err := requireJSON("input", input); err != nil {
		return "", err
	}
	c := CaseApprovalNotRequired
	if s.toolApproval.RequiresApproval(toolName) {
		c = CaseApprovalRequired
	}
	to, err := s.target(OpRequestToolPermission, c)
	if err != nil {
		return "", err
	}
	s.updatedAt = now.UTC()
	switch {
	case s.status.IsIntermediate():
		s.raise(ToolPermissionDeniedEvent{SessionMeta: s.meta(now), RequestID: requestID, ToolName: toolName,
			Message: "the session is " + string(s.status), DecidedBy: DecidedBySessionStopping})
		return PermissionDeny, nil
	case c == CaseApprovalNotRequired:
		s.raise(ToolPermissionGrantedEvent{SessionMeta: s.meta(now), RequestID: requestID, ToolName: toolName, DecidedBy: DecidedByPolicy})
		return PermissionAllow, nil
	}
	s.moveTo(to, now)
	req := PermissionRequest{RequestID: requestID, ToolName: toolName, Input: input,
		AskedAt: now.UTC(), ExpiresAt: now.UTC().Add(s.toolApproval.Timeout)}
	s.permission = &req
	s.raise(ToolPermissionRequestedEvent{SessionMeta: s.meta(now), RequestID: requestID, ToolName: toolName,
		Input: input, AskedAt: req.AskedAt, ExpiresAt: req.ExpiresAt})
	return PermissionPending, nil
}

// ApproveToolPermission lets the pending tool use run: WaitingForApproval
// -> Running. The message, if any, goes to the agent.
func (s *AgentSession) ApproveToolPermission(requestID, message string, now time.Time) error {
	return s.decidePermission(OpApproveToolPermission, requestID, message, PermissionAllow, DecidedByUser, now)
}

// DenyToolPermission refuses the pending tool use: WaitingForApproval ->
// Running, the agent going on without the tool and with the message.
func (s *AgentSession) DenyToolPermission(requestID, message string, now time.Time) error {
	return s.decidePermission(OpDenyToolPermission, requestID, message, PermissionDeny, DecidedByUser, now)
}

func (s *AgentSession) decidePermission(op Operation, requestID, message string, d PermissionDecision, by PermissionDecider, now time.Time) error {
	to, err := s.target(op, CaseNone)
	if err != nil {
		return err
	}
	if s.permission == nil || s.permission.RequestID != requestID {
		return s.refuse(op, ErrNoPendingPermission)
	}
	if message, err = optionalText("message", message, MaxPermissionMessageChars); err != nil {
		return err
	}
	if err := s.guardBudget(op, to); err != nil {
		return err
	}
	s.resolvePermission(to, d, message, by, now)
	return nil
}

// resolvePermission applies a decision on the pending request.
func (s *AgentSession) resolvePermission(to SessionStatus, d PermissionDecision, message string, by PermissionDecider, now time.Time) {
	req := *s.permission
	s.moveTo(to, now)
	if d == PermissionAllow {
		s.raise(ToolPermissionGrantedEvent{SessionMeta: s.meta(now), RequestID: req.RequestID, ToolName: req.ToolName, Message: message, DecidedBy: by})
		return
	}
	s.raise(ToolPermissionDeniedEvent{SessionMeta: s.meta(now), RequestID: req.RequestID, ToolName: req.ToolName, Message: message, DecidedBy: by})
}
