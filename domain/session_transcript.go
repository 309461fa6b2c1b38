package domain

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// The transcript (messages, tool calls, subagents) is stored apart from the
// session row, because it grows without bound. These methods build the
// entities, check that the session is past Start and raise the events; the
// caller appends the returned entity through its repository.

// RecordAgentMessage builds a classified message of the transcript. A
// SubAgent message carries its subagent id and belongs to that subagent's
// list, never to the session's own.
func (s *AgentSession) RecordAgentMessage(id uuid.UUID, source AgentMessageSource, subAgentID *uuid.UUID, content string, now time.Time) (AgentMessage, error) {
	if err := s.allow(OpRecordAgentMessage); err != nil {
		return AgentMessage{}, err
	}
	m, err := NewAgentMessage(id, s.id, source, subAgentID, content, now)
	if err != nil {
		return AgentMessage{}, err
	}
	s.raise(AgentMessageRecordedEvent{SessionMeta: s.meta(now), MessageID: id, Source: source, SubAgentID: m.SubAgentID(), Timestamp: m.Timestamp()})
	return m, nil
}

// RecordToolCall builds a Pending tool call of the session (or of one of
// its subagents).
func (s *AgentSession) RecordToolCall(id uuid.UUID, toolName, input string, subAgentID *uuid.UUID, now time.Time) (*ToolCall, error) {
	if err := s.allow(OpRecordToolCall); err != nil {
		return nil, err
	}
	c, err := NewToolCall(id, s.id, subAgentID, toolName, input, now)
	if err != nil {
		return nil, err
	}
	s.raise(ToolCallStartedEvent{SessionMeta: s.meta(now), ToolCallID: id, ToolName: c.ToolName(), SubAgentID: c.SubAgentID()})
	return c, nil
}

// RecordToolCallResult attaches a result to one of the session's calls.
// The result is never a transcript message.
func (s *AgentSession) RecordToolCallResult(call *ToolCall, result ToolResult, now time.Time) error {
	if err := s.allow(OpRecordToolCallResult); err != nil {
		return err
	}
	if call == nil || call.SessionID() != s.id {
		return invalid("toolCallId", "must be a call of this session")
	}
	if err := call.Complete(result, now); err != nil {
		return err
	}
	s.raise(ToolCallCompletedEvent{SessionMeta: s.meta(now), ToolCallID: call.ID(), ToolName: call.ToolName(),
		Status: call.Status(), SubAgentID: call.SubAgentID(), IsError: result.IsError})
	return nil
}

// StartSubAgent builds a Running subagent of the session.
func (s *AgentSession) StartSubAgent(id uuid.UUID, modelID, objective string, now time.Time) (*SubAgentSession, error) {
	if err := s.allow(OpStartSubAgent); err != nil {
		return nil, err
	}
	a, err := NewSubAgentSession(id, s.id, modelID, objective, now)
	if err != nil {
		return nil, err
	}
	s.raise(SubAgentSessionStartedEvent{SessionMeta: s.meta(now), ParentSessionID: s.id, SubAgentID: id, ModelID: a.ModelID()})
	return a, nil
}

// CompleteSubAgent marks one of the session's subagents Completed.
func (s *AgentSession) CompleteSubAgent(a *SubAgentSession, now time.Time) error {
	if err := s.subAgentOp(OpCompleteSubAgent, a); err != nil {
		return err
	}
	if err := a.finish("Complete", StatusCompleted, "", now); err != nil {
		return err
	}
	s.raise(SubAgentSessionCompletedEvent{SessionMeta: s.meta(now), ParentSessionID: s.id, SubAgentID: a.ID()})
	return nil
}

// FailSubAgent marks one of the session's subagents Failed.
func (s *AgentSession) FailSubAgent(a *SubAgentSession, reason FailureReason, now time.Time) error {
	if err := s.subAgentOp(OpFailSubAgent, a); err != nil {
		return err
	}
	if !reason.IsValid() {
		return invalid("failureReason", "unknown failure reason %q", reason)
	}
	if err := a.finish("Fail", StatusFailed, reason, now); err != nil {
		return err
	}
	s.raise(SubAgentSessionFailedEvent{SessionMeta: s.meta(now), ParentSessionID: s.id, SubAgentID: a.ID(), FailureReason: reason})
	return nil
}

func (s *AgentSession) subAgentOp(op Operation, a *SubAgentSession) error {
	if err := s.allow(op); err != nil {
		return err
	}
	if a == nil || a.ParentSessionID() != s.id {
		return invalid("subAgentId", "must be a subagent of this session")
	}
	return nil
}

// APITask is a follow-up task an agent creates through the agent API, as
// the task context is to create it.
type APITask struct {
	Title       string
	Description string
	Priority    string
	Tags        []string
	// LinkedTaskID is the task the new one follows up on, if any.
	LinkedTaskID *uuid.UUID
}

// RecordAPITaskCreated records that the running agent created a follow-up
// task through the agent API (the task lives in another context).
func (s *AgentSession) RecordAPITaskCreated(createdTaskID uuid.UUID, task APITask, now time.Time) error {
	if err := s.allow(OpRecordAPITaskCreated); err != nil {
		return err
	}
	if err := requireID("createdTaskId", createdTaskID); err != nil {
		return err
	}
	s.raise(AgentAPITaskCreatedEvent{SessionMeta: s.meta(now), CreatedTaskID: createdTaskID,
		LinkedTaskID: clonePtr(task.LinkedTaskID), Source: "AgentApi",
		Title: task.Title, Description: task.Description, Priority: task.Priority, Tags: slices.Clone(task.Tags)})
	return nil
}

// RecordAutoContinuation counts one automatic continuation after a turn
// whose validation failed. It is refused when auto-continue is off or
// MaxContinuations is reached, which is the loop's hard stop; the caller
// then notifies the owner instead of enqueueing a message.
func (s *AgentSession) RecordAutoContinuation(now time.Time) error {
	if err := s.allow(OpRecordAutoContinuation); err != nil {
		return err
	}
	ac := s.autoContinue
	if ac == nil || !ac.IsEnabled || ac.CurrentContinuationCount >= ac.MaxContinuations {
		return s.refuse(OpRecordAutoContinuation, ErrAutoContinueLimit)
	}
	ac.CurrentContinuationCount++
	s.updatedAt = now.UTC()
	s.raise(SessionAutoContinuedEvent{SessionMeta: s.meta(now), ContinuationCount: ac.CurrentContinuationCount, MaxContinuations: ac.MaxContinuations})
	return nil
}

// StopAutoContinuation ends the loop once MaxContinuations are spent and
// validation still fails (seed 001 §8.10): the session stays Idle with no
// pending review, for its owner to look at by hand. It is refused while
// continuations remain or auto-continue is off.
func (s *AgentSession) StopAutoContinuation(now time.Time) error {
	if err := s.allow(OpStopAutoContinuation); err != nil {
		return err
	}
	ac := s.autoContinue
	if ac == nil || !ac.IsEnabled || ac.CurrentContinuationCount < ac.MaxContinuations {
		return s.refuse(OpStopAutoContinuation, ErrAutoContinueNotSpent)
	}
	s.hasPendingReview = false
	s.updatedAt = now.UTC()
	s.raise(SessionAutoContinueExhaustedEvent{SessionMeta: s.meta(now), MaxContinuations: ac.MaxContinuations})
	return nil
}
