package sidecar_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/engine"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

func TestAnswerQuestionResumesTheAgentWithTheAnswer(t *testing.T) {
	t.Parallel()
	h := start(t, scriptConfig(t, "question"))
	ask := h.waitTool("AskUserQuestion")
	var input struct {
		Questions []struct {
			Question string `json:"question"`
			Options  []struct {
				Label string `json:"label"`
			} `json:"options"`
		} `json:"questions"`
	}
	require.NoError(t, json.Unmarshal(ask.Input, &input))
	require.Len(t, input.Questions, 1)
	assert.Equal(t, "Which database should the service use?", input.Questions[0].Question)
	assert.Len(t, input.Questions[0].Options, 2)

	// An answer to a question nobody asked is an error; the session goes on.
	wrong := h.send(protocol.CommandAnswerQuestion, protocol.AnswerQuestion{ToolUseID: "toolu_nope", Answer: "x"})
	errEv := decode[protocol.ErrorEvent](t, h.waitFor("the error", func(e protocol.Entry) bool {
		return e.Type == protocol.EventError && dataField(t, e, "command_id") == wrong
	}))
	assert.Equal(t, protocol.CodeNotPending, errEv.Code)

	h.send(protocol.CommandAnswerQuestion, protocol.AnswerQuestion{ToolUseID: ask.ToolUseID, Answer: "PostgreSQL"})
	res := h.waitResult(ask.ToolUseID)
	assert.False(t, res.IsError)
	assert.Contains(t, res.Content, "PostgreSQL")
	h.waitFor("the text using the answer", func(e protocol.Entry) bool {
		return e.Type == protocol.EventAssistantMessage && dataField(t, e, "text") == "Going with PostgreSQL."
	})
	assert.Equal(t, protocol.ReasonCompleted, h.waitEnd().Reason)
}

func TestPlanDecisionRejectsThenApproves(t *testing.T) {
	t.Parallel()
	h := start(t, scriptConfig(t, "plan"))
	h.waitTool("EnterPlanMode")
	first := h.waitTool("ExitPlanMode")
	h.send(protocol.CommandPlanDecision, protocol.PlanDecision{ToolUseID: first.ToolUseID, Approved: ptr(false), Feedback: "also log the rejected inputs"})
	res := h.waitResult(first.ToolUseID)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, "also log the rejected inputs")

	// The revised plan asks again; a decision without tool_use_id applies
	// to the only plan waiting.
	second := h.waitFor("the revised plan", func(e protocol.Entry) bool {
		return e.Type == protocol.EventAssistantMessage && dataField(t, e, "tool_name") == "ExitPlanMode" &&
			dataField(t, e, "tool_use_id") != first.ToolUseID
	})
	revised := decode[protocol.AssistantMessage](t, second)
	assert.Contains(t, string(revised.Input), "also log the rejected inputs")
	h.send(protocol.CommandPlanDecision, protocol.PlanDecision{Approved: ptr(true)})
	res = h.waitResult(revised.ToolUseID)
	assert.False(t, res.IsError)
	assert.Contains(t, res.Content, "approved")
	assert.Equal(t, protocol.ReasonCompleted, h.waitEnd().Reason)
	h.waitTool("Edit")
}

func TestPlansAreApprovedWithoutWaitingWhenThePolicySaysSo(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "plan")
	cfg.PermissionPolicy.AutoApprovePlans = true
	h := start(t, cfg)
	assert.Equal(t, protocol.ReasonCompleted, h.waitEnd().Reason)
	plan := h.waitTool("ExitPlanMode")
	assert.False(t, h.waitResult(plan.ToolUseID).IsError)
}

func TestPermissionResponseDeniesAndAllows(t *testing.T) {
	t.Parallel()
	h := start(t, scriptConfig(t, "permission"))
	first := decode[protocol.PermissionRequest](t, h.waitType(protocol.EventPermissionRequest))
	bash := h.waitTool("Bash")
	assert.Equal(t, bash.ToolUseID, first.ToolUseID)
	assert.Equal(t, "Bash", first.ToolName)
	assert.JSONEq(t, string(bash.Input), string(first.Input))
	assert.EqualValues(t, protocol.DefaultPermissionTimeout.Milliseconds(), first.TimeoutMS)

	h.send(protocol.CommandPermissionResponse, protocol.PermissionResponse{RequestID: first.RequestID, Behavior: protocol.BehaviorDeny, Message: "never delete build output"})
	res := h.waitResult(bash.ToolUseID)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, "never delete build output")

	second := decode[protocol.PermissionRequest](t, h.waitFor("the second request", func(e protocol.Entry) bool {
		return e.Type == protocol.EventPermissionRequest && dataField(t, e, "request_id") != first.RequestID
	}))
	assert.Equal(t, "Write", second.ToolName)
	// A response to an answered request is an error.
	again := h.send(protocol.CommandPermissionResponse, protocol.PermissionResponse{RequestID: first.RequestID, Behavior: protocol.BehaviorAllow})
	h.waitFor("the stale response's error", func(e protocol.Entry) bool {
		return e.Type == protocol.EventError && dataField(t, e, "command_id") == again && dataField(t, e, "code") == protocol.CodeNotPending
	})
	h.send(protocol.CommandPermissionResponse, protocol.PermissionResponse{RequestID: second.RequestID, Behavior: protocol.BehaviorAllow})
	res = h.waitResult(second.ToolUseID)
	assert.False(t, res.IsError)
	assert.Equal(t, "File created successfully.", res.Content)
	assert.Equal(t, protocol.ReasonCompleted, h.waitEnd().Reason)
}

func TestPermissionRequestWithoutAnswerIsDeniedAfterTheTimeout(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "default")
	cfg.PermissionPolicy = protocol.PermissionPolicy{RequireApproval: []string{"Bash"}, TimeoutMS: 200}
	h := start(t, cfg)
	req := decode[protocol.PermissionRequest](t, h.waitType(protocol.EventPermissionRequest))
	assert.Equal(t, "Bash", req.ToolName)
	res := h.waitResult(req.ToolUseID)
	assert.True(t, res.IsError, "fails closed")
	assert.Contains(t, res.Content, "no permission_response")
	assert.Equal(t, protocol.ReasonCompleted, h.waitEnd().Reason)
	assert.Len(t, h.ofType(protocol.EventPermissionRequest), 1, "only Bash needs approval")
}

func TestToolsOutsideAllowedToolsAreDenied(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "default")
	cfg.AllowedTools = []string{"Read", "TodoWrite", "Task", "Glob", "agentbus_api"}
	h := start(t, cfg)
	h.waitEnd()
	bash := h.waitTool("Bash")
	res := h.waitResult(bash.ToolUseID)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, "allowed tools")
	read := h.waitTool("Read")
	assert.False(t, h.waitResult(read.ToolUseID).IsError)
	assert.Empty(t, h.ofType(protocol.EventPermissionRequest))
}

func TestContextExhaustionWritesWarningExhaustionHandoffAndEnd(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "exhaust")
	cfg.ChainID = "chain-1"
	h := start(t, cfg)
	end := h.waitEnd()
	assert.Equal(t, protocol.StatusSuccess, end.Status)
	assert.Equal(t, protocol.ReasonContextExhausted, end.Reason)

	warnings := h.ofType(protocol.EventContextNearingLimit)
	require.Len(t, warnings, 1, "one warning")
	warn := decode[protocol.ContextNearingLimit](t, warnings[0])
	assert.Equal(t, protocol.ContextNearingLimit{Percent: 88, ThresholdPercent: 85, UsedTokens: 176_000, MaxTokens: 200_000}, warn)

	events := h.poll()
	n := len(events)
	require.GreaterOrEqual(t, n, 3)
	assert.Equal(t, protocol.EventContextExhausted, events[n-3].Type)
	assert.Equal(t, protocol.ContextExhausted{Percent: 100, UsedTokens: 200_000, MaxTokens: 200_000},
		decode[protocol.ContextExhausted](t, events[n-3]))
	doc := decode[protocol.HandoffDocument](t, events[n-2])
	assert.Equal(t, protocol.EventHandoffDocument, events[n-2].Type)
	assert.Contains(t, doc.Summary, "Keep the service healthy")
	assert.NotEmpty(t, doc.RemainingWork)
	assert.NotEmpty(t, doc.KeyDecisions)
	assert.EqualValues(t, 200_000, doc.TokensUsed)
	assert.Equal(t, "chain-1", doc.ChainID)
	assert.Less(t, h.index(warnings[0]), n-3)

	// The exhausted turn has no turn_completed; the agent wrote nothing
	// after the usage that filled the context.
	assert.Len(t, h.ofType(protocol.EventTurnCompleted), 3)
	for _, e := range h.ofType(protocol.EventAssistantMessage) {
		assert.NotContains(t, dataField(t, e, "text"), "never written")
	}
}

func TestContextWarningThresholdIsConfigurable(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "exhaust")
	cfg.Context.WarnPercent = 60
	h := start(t, cfg)
	h.waitEnd()
	warnings := h.ofType(protocol.EventContextNearingLimit)
	require.Len(t, warnings, 1)
	assert.EqualValues(t, 70, decode[protocol.ContextNearingLimit](t, warnings[0]).Percent)
}

func TestVoluntaryHandoffCallsTheAgentAPIAndEndsTheSession(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.Path+" "+r.Header.Get("X-Agent-Key")+" "+string(body))
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"status":"recorded"}`))
	}))
	t.Cleanup(api.Close)

	h := newHarness(t)
	h.run(scriptConfig(t, "handoff"), engine.AgentAPI{URL: api.URL, Key: "key-123"})
	end := h.waitEnd()
	assert.Equal(t, protocol.StatusSuccess, end.Status)
	assert.Equal(t, protocol.ReasonVoluntaryHandoff, end.Reason)

	vh := decode[protocol.VoluntaryHandoff](t, h.waitType(protocol.EventVoluntaryHandoff))
	assert.Equal(t, "Context polluted by failed approaches", vh.Reason)
	assert.NotEmpty(t, vh.Summary)
	assert.NotEmpty(t, vh.RemainingWork)
	assert.EqualValues(t, 110_000, vh.TokensUsed)
	assert.Empty(t, h.ofType(protocol.EventHandoffDocument), "the document travels in voluntary_handoff")
	assert.Empty(t, h.ofType(protocol.EventTurnCompleted))

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, calls, 1)
	assert.True(t, strings.HasPrefix(calls[0], "POST /api/agent/sessions/"+h.id+"/handoff key-123 {"), calls[0])
	assert.Contains(t, calls[0], `"remainingWork"`)
	call := h.waitTool("agentbus_api")
	res := h.waitResult(call.ToolUseID)
	assert.False(t, res.IsError)
	assert.Contains(t, res.Content, "202")
}

func TestFailScenarioEndsWithAnAgentError(t *testing.T) {
	t.Parallel()
	h := start(t, scriptConfig(t, "fail"))
	end := h.waitEnd()
	assert.Equal(t, protocol.SessionEnd{
		Status: protocol.StatusError, Reason: protocol.ReasonAgentError, FailureReason: protocol.FailureAgentError,
		ExitCode: 2, Error: "the agent could not recover from a failed build",
		TotalCostUSD: end.TotalCostUSD, DurationMS: end.DurationMS,
	}, end)
	assert.Empty(t, h.ofType(protocol.EventTurnCompleted), "a failed turn has no turn_completed")
}

func ptr[T any](v T) *T { return &v }
