package domain_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func TestAgentMessageInvariants(t *testing.T) {
	t.Parallel()
	sub := uuid.New()
	tests := []struct {
		name    string
		source  domain.AgentMessageSource
		sub     *uuid.UUID
		content string
		ok      bool
	}{
		{"agent", domain.SourceAgent, nil, "hello", true},
		{"subagent with id", domain.SourceSubAgent, &sub, "hi", true},
		{"subagent without id", domain.SourceSubAgent, nil, "hi", false},
		{"user with subagent id", domain.SourceUser, &sub, "hi", false},
		{"empty content", domain.SourceSystem, nil, "", false},
		{"unknown source", "Robot", nil, "hi", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := domain.NewAgentMessage(uuid.New(), sessionID, tt.source, tt.sub, tt.content, t0)
			if !tt.ok {
				require.ErrorIs(t, err, domain.ErrValidation)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.sub == nil, m.IsTopLevel(), "subagent messages never go to the parent's list")
		})
	}
}

func TestToolCallLifecycle(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	_, err := s.RecordToolCall(uuid.New(), "Bash", "{not json", nil, t0)
	require.ErrorIs(t, err, domain.ErrValidation, "input must be valid JSON")
	_, err = s.RecordToolCall(uuid.New(), "", "{}", nil, t0)
	require.ErrorIs(t, err, domain.ErrValidation)

	call, err := s.RecordToolCall(uuid.New(), "Bash", `{"command":"go test"}`, nil, t0)
	require.NoError(t, err)
	assert.Equal(t, domain.ToolCallPending, call.Status())
	assert.Nil(t, call.Result())
	require.ErrorIs(t, s.RecordToolCallResult(call, domain.ToolResult{}, t0), domain.ErrValidation)
	require.NoError(t, s.RecordToolCallResult(call, domain.ToolResult{Content: "FAIL", IsError: true}, t0.Add(1)))
	assert.Equal(t, domain.ToolCallError, call.Status())
	assert.Equal(t, t0.Add(1), *call.CompletedAt())
	require.ErrorIs(t, s.RecordToolCallResult(call, domain.ToolResult{Content: "again"}, t0), domain.ErrInvalidTransition, "a result is set once")

	other, err := domain.NewToolCall(uuid.New(), uuid.New(), nil, "Read", "{}", t0)
	require.NoError(t, err)
	require.ErrorIs(t, s.RecordToolCallResult(other, domain.ToolResult{Content: "x"}, t0), domain.ErrValidation)

	events := s.PopEvents()
	assert.Equal(t, []string{"tool_call_started", "tool_call_completed"}, eventTypes(events))
	done := events[1].(domain.ToolCallCompletedEvent)
	assert.True(t, done.IsError)
	assert.Equal(t, domain.ToolCallError, done.Status)

	re, err := domain.UnmarshalToolCallFromDatabase(call.Snapshot())
	require.NoError(t, err)
	assert.Equal(t, call.Snapshot(), re.Snapshot())
	snap := call.Snapshot()
	snap.Result = nil
	_, err = domain.UnmarshalToolCallFromDatabase(snap)
	require.ErrorIs(t, err, domain.ErrValidation)
}

func TestSubAgentSession(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	a, err := s.StartSubAgent(uuid.New(), "claude-haiku-4-5", "run the tests", t0)
	require.NoError(t, err)
	subID := a.ID()

	msg, err := s.RecordAgentMessage(uuid.New(), domain.SourceSubAgent, &subID, "all green", t0)
	require.NoError(t, err)
	require.NoError(t, a.AddMessage(msg))
	parentMsg, err := s.RecordAgentMessage(uuid.New(), domain.SourceAgent, nil, "ok", t0)
	require.NoError(t, err)
	require.ErrorIs(t, a.AddMessage(parentMsg), domain.ErrValidation, "a subagent holds only its own messages")
	call, err := s.RecordToolCall(uuid.New(), "Bash", "{}", &subID, t0)
	require.NoError(t, err)
	require.NoError(t, a.AddToolCall(call))
	parentCall, err := s.RecordToolCall(uuid.New(), "Bash", "{}", nil, t0)
	require.NoError(t, err)
	require.ErrorIs(t, a.AddToolCall(parentCall), domain.ErrValidation)

	require.NoError(t, s.CompleteSubAgent(a, t0))
	assert.Equal(t, domain.StatusCompleted, a.Status())
	require.ErrorIs(t, s.FailSubAgent(a, domain.FailureAgentError, t0), domain.ErrInvalidTransition, "completed is terminal")
	require.ErrorIs(t, a.AddMessage(msg), domain.ErrInvalidTransition)

	re, err := domain.UnmarshalSubAgentSessionFromDatabase(a.Snapshot(), a.Messages(), a.ToolCalls())
	require.NoError(t, err)
	assert.Equal(t, a.Snapshot(), re.Snapshot())
	_, err = domain.UnmarshalSubAgentSessionFromDatabase(a.Snapshot(), []domain.AgentMessage{parentMsg}, nil)
	require.ErrorIs(t, err, domain.ErrValidation)
}

func TestActivityItem(t *testing.T) {
	t.Parallel()
	base := domain.ActivityItem{ID: uuid.New(), SessionID: sessionID, Type: domain.ActivityToolCallStart, Summary: "Bash: go test ./...", ToolName: "Bash", Timestamp: t0}
	_, err := domain.NewActivityItem(base)
	require.NoError(t, err)

	for name, mutate := range map[string]func(*domain.ActivityItem){
		"empty summary":  func(i *domain.ActivityItem) { i.Summary = "" },
		"long summary":   func(i *domain.ActivityItem) { i.Summary = strings.Repeat("s", 201) },
		"unknown type":   func(i *domain.ActivityItem) { i.Type = "Noise" },
		"tool call tool": func(i *domain.ActivityItem) { i.ToolName = "" },
		"no session":     func(i *domain.ActivityItem) { i.SessionID = uuid.Nil },
	} {
		item := base
		mutate(&item)
		_, err := domain.NewActivityItem(item)
		assert.ErrorIs(t, err, domain.ErrValidation, name)
	}
	long := strings.Repeat("word ", 100) + "\nsecond line"
	sum := domain.Summarize(long)
	assert.Len(t, []rune(sum), domain.MaxActivitySummaryChars)
	item := base
	item.Summary = sum
	_, err = domain.NewActivityItem(item)
	require.NoError(t, err)
}

func TestLogChunk(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	require.NoError(t, s.RecordLogChunk(domain.SessionLogChunk{SequenceNumber: 0, Content: "ok", RecordedAt: t0}))
	require.ErrorIs(t, s.RecordLogChunk(domain.SessionLogChunk{SequenceNumber: -1, Content: "ok"}), domain.ErrValidation)
	require.ErrorIs(t, s.RecordLogChunk(domain.SessionLogChunk{Content: ""}), domain.ErrValidation)
	assert.Empty(t, s.PopEvents(), "log chunks are streamed, not events")
}

func TestSessionOutputValidation(t *testing.T) {
	t.Parallel()
	for name, out := range map[string]domain.SessionOutput{
		"negative files": {FilesChanged: -1},
		"short sha":      {CommitSha: "abc123"},
		"uppercase sha":  {CommitSha: strings.Repeat("AB", 20)},
	} {
		s := runningSession(t)
		require.ErrorIs(t, s.RecordOutput(out, t0), domain.ErrValidation, name)
		assert.Equal(t, domain.StatusRunning, s.Status())
	}
}
