package acl

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/command/control"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// outgoing is one command a raw event turns into.
type outgoing struct {
	aggregate string
	name      string
	data      any
}

func sessionCmd(name string, data any) outgoing {
	return outgoing{aggregate: domain.AggregateSession, name: name, data: data}
}

// translation is what one raw event becomes: always an activity item, and
// the commands that change the session.
type translation struct {
	activity domain.ActivityItem
	commands []outgoing
	// toolUseID links a tool call's start and end items; the end takes
	// the tool's name from the start.
	toolUseID string
	// ack marks a sidecar ack: its one command confirms the awaited
	// command, and its item depends on whether it did.
	ack bool
}

func item(typ domain.ActivityItemType, summary, detail string) domain.ActivityItem {
	return domain.ActivityItem{Type: typ, Summary: domain.Summarize(summary), Detail: detail}
}

// decode reads a raw event's data into T.
func decode[T any](ev protocol.RawEvent) (T, error) {
	var v T
	if len(ev.Data) == 0 {
		return v, fmt.Errorf("%s: no data", ev.Type)
	}
	if err := json.Unmarshal(ev.Data, &v); err != nil {
		return v, fmt.Errorf("%s: data does not match the contract: %w", ev.Type, err)
	}
	return v, nil
}

// translate maps one raw event (seed table "Raw Event -> Domain Command").
func translate(ev protocol.RawEvent) (translation, error) {
	if c, ok := control.ByAck(ev.Type); ok {
		return ack(ev, c.Acked, c.Confirm)
	}
	switch ev.Type {
	case protocol.TypeInvalid:
		return translation{}, fmt.Errorf("invalid raw event: %s", ev.Error)
	case protocol.EventSessionStarted:
		d, err := decode[protocol.SessionStarted](ev)
		return translation{activity: item(domain.ActivityStatusChange, "Sidecar started ("+d.Engine+", "+d.Model+")", string(ev.Data))}, err
	case protocol.EventAssistantMessage:
		return assistantMessage(ev)
	case protocol.EventToolResult:
		d, err := decode[protocol.ToolResult](ev)
		a := item(domain.ActivityToolCallEnd, firstLine(d.Content), d.Content)
		a.SubAgentID = subagent(d.SubagentID)
		return translation{activity: a, toolUseID: d.ToolUseID}, err
	case protocol.EventSubagentMessage:
		d, err := decode[protocol.SubagentMessage](ev)
		a := item(domain.ActivityMessage, d.Text, d.Text)
		a.SubAgentID = subagent(d.SubagentID)
		return translation{activity: a}, err
	case protocol.EventUsageUpdate:
		return usageUpdate(ev)
	case protocol.EventTurnCompleted:
		d, err := decode[protocol.TurnCompleted](ev)
		tr := translation{activity: item(domain.ActivityStatusChange, fmt.Sprintf("Turn completed in %d ms", d.DurationMS), string(ev.Data))}
		switch {
		case d.Final:
			// session_end follows at once and records the output; ending the
			// turn first would leave nothing to record it on.
		case d.Done:
			// The agent's work is done and its sidecar stays for follow-ups:
			// the output is ready now. The engine may have worked on after
			// its last turn ended, so the session runs again first.
			tr.commands = []outgoing{sessionCmd(command.BeginTurn, nil), sessionCmd(command.RecordAgentOutput, command.OutputData{})}
		default:
			tr.commands = []outgoing{sessionCmd(command.RecordTurnCompleted, nil)}
		}
		return tr, err
	case protocol.EventContextNearingLimit:
		d, err := decode[protocol.ContextNearingLimit](ev)
		return translation{
			activity: item(domain.ActivityMetricsUpdate, fmt.Sprintf("Context window %.0f%% full", d.Percent), string(ev.Data)),
			commands: []outgoing{sessionCmd(command.RecordContextNearingLimit, command.UsageData{UsagePercent: d.Percent})},
		}, err
	case protocol.EventContextExhausted:
		_, err := decode[protocol.ContextExhausted](ev)
		// The context may fill up in a turn the engine took on its own
		// after the last one ended (the session Idle): it runs again first.
		return translation{
			activity: item(domain.ActivityStatusChange, "Context window exhausted", string(ev.Data)),
			commands: []outgoing{sessionCmd(command.BeginTurn, nil), sessionCmd(command.RecordContextExhausted, nil)},
		}, err
	case protocol.EventHandoffDocument:
		// The document follows context_exhausted; the handler finds the
		// session's chain or creates it, and the handoff reaction starts
		// the continuation session.
		d, err := decode[protocol.HandoffDocument](ev)
		return translation{
			activity: item(domain.ActivityHandoffInitiated, "Handoff: "+d.Summary, string(ev.Data)),
			commands: []outgoing{handoff(d.Summary, d.RemainingWork, d.KeyDecisions)},
		}, err
	case protocol.EventVoluntaryHandoff:
		// A voluntary handoff carries its document: the session stops,
		// then the document goes the way of a handoff_document.
		d, err := decode[protocol.VoluntaryHandoff](ev)
		return translation{
			activity: item(domain.ActivityHandoffInitiated, "Voluntary handoff: "+d.Reason, string(ev.Data)),
			commands: []outgoing{
				sessionCmd(command.RecordVoluntaryHandoff, command.HandoffData{Reason: d.Reason, Summary: d.Summary, RemainingWork: d.RemainingWork}),
				handoff(d.Summary, d.RemainingWork, d.KeyDecisions),
			},
		}, err
	case protocol.EventPermissionRequest:
		d, err := decode[protocol.PermissionRequest](ev)
		a := item(domain.ActivityToolPermission, "Permission requested for "+d.ToolName, string(d.Input))
		a.ToolName = d.ToolName
		return translation{activity: a, commands: []outgoing{sessionCmd(command.RequestPermission,
			command.PermissionRequestData{RequestID: d.RequestID, ToolName: d.ToolName, Input: string(d.Input)})}}, err
	case protocol.EventSessionEnd:
		return sessionEnd(ev)
	case protocol.EventMessageDelivered:
		d, err := decode[protocol.MessageDelivered](ev)
		if err != nil {
			return translation{}, err
		}
		id, err := uuid.Parse(d.MessageID)
		if err != nil {
			return translation{}, fmt.Errorf("message_delivered: message_id %q: %w", d.MessageID, err)
		}
		return translation{
			activity: item(domain.ActivityMessage, "Message delivered to the agent", string(ev.Data)),
			// A message delivered to an Idle or Interrupted session starts
			// its next turn; to a running one it joins the turn, and
			// Handle leaves BeginTurn out when marking it delivered saw
			// the session running.
			commands: []outgoing{
				{aggregate: domain.AggregateQueue, name: command.MarkDelivered, data: command.MessageData{MessageID: id}},
				sessionCmd(command.BeginTurn, nil),
			},
		}, nil
	case protocol.EventValidationResult:
		d, err := decode[protocol.ValidationResult](ev)
		failed := 0
		for _, c := range d.Checks {
			if c.ExitCode != 0 || c.TimedOut {
				failed++
			}
		}
		summary := fmt.Sprintf("Validation: %d of %d checks failed", failed, len(d.Checks))
		if failed == 0 {
			summary = fmt.Sprintf("Validation: all %d checks passed", len(d.Checks))
		}
		// The auto-continue reaction reads the result from the raw event
		// itself: the session changes only through what it decides.
		return translation{activity: item(domain.ActivityStatusChange, summary, string(ev.Data))}, err
	case protocol.EventError:
		d, err := decode[protocol.ErrorEvent](ev)
		return translation{activity: item(domain.ActivityUnknownEvent, "Sidecar error: "+d.Message, string(ev.Data))}, err
	}
	return translation{}, fmt.Errorf("%w %q", errUnknownType, ev.Type)
}

// handoff is InitiateHandoff, addressed like every ACL command to the
// session: its chain may not exist yet.
func handoff(summary, remainingWork, keyDecisions string) outgoing {
	return outgoing{aggregate: domain.AggregateChain, name: command.InitiateHandoff,
		data: command.InitiateHandoffData{Summary: summary, RemainingWork: remainingWork, KeyDecisions: keyDecisions}}
}

// ack confirms the command whose id the ack echoes. An ack without a
// readable command id still goes to the session, which refuses it as a
// stray like any other.
func ack(ev protocol.RawEvent, summary, name string) (translation, error) {
	var d struct {
		CommandID string `json:"command_id"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	id, _ := uuid.Parse(d.CommandID)
	return translation{activity: item(domain.ActivityStatusChange, summary, string(ev.Data)), ack: true,
		commands: []outgoing{sessionCmd(name, command.AckData{CommandID: id})}}, nil
}

// unexpectedAck is the item of an ack the session refused: it changed
// nothing, and says so instead of what a confirmed ack would have done.
func unexpectedAck(ev protocol.RawEvent, refused *command.Error, confirmed domain.ActivityItem) domain.ActivityItem {
	a := item(domain.ActivityUnknownEvent, "Unexpected "+ev.Type+" ignored: "+refused.Message, string(ev.Data))
	a.SessionID, a.Timestamp = confirmed.SessionID, confirmed.Timestamp
	return a
}

// assistantMessage maps text to the activity stream and the special tools
// (AskUserQuestion, TodoWrite, plan mode) to the session's commands.
func assistantMessage(ev protocol.RawEvent) (translation, error) {
	d, err := decode[protocol.AssistantMessage](ev)
	if err != nil {
		return translation{}, err
	}
	if d.BlockType != "tool_use" {
		a := item(domain.ActivityMessage, d.Text, d.Text)
		a.SubAgentID = subagent(d.SubagentID)
		return translation{activity: a}, nil
	}
	a := item(domain.ActivityToolCallStart, d.ToolName+" "+firstLine(string(d.Input)), string(d.Input))
	a.ToolName = d.ToolName
	a.SubAgentID = subagent(d.SubagentID)
	tr := translation{activity: a, toolUseID: d.ToolUseID}
	if d.SubagentID != "" {
		return tr, nil // a subagent's tools do not steer the parent session
	}
	// The engine may begin a turn of its own (the next step of its work)
	// after the previous one ended: the session runs again before the tool
	// takes effect. BeginTurn is refused harmlessly when it already runs.
	begin := sessionCmd(command.BeginTurn, nil)
	switch d.ToolName {
	case "AskUserQuestion":
		q, err := askUserQuestion(d.Input)
		if err != nil {
			return translation{}, err
		}
		tr.activity.Type = domain.ActivityUserQuestion
		tr.activity.Summary = domain.Summarize(q.Content)
		tr.commands = append(tr.commands, begin, sessionCmd(command.RecordQuestionAsked, q))
	case "TodoWrite":
		tasks, err := todoWrite(d.Input)
		if err != nil {
			return translation{}, err
		}
		tr.activity.Type = domain.ActivityTodoUpdate
		tr.commands = append(tr.commands, begin, sessionCmd(command.UpdateTaskList, command.TaskListData{Tasks: tasks}))
	case "EnterPlanMode":
		tr.activity.Type = domain.ActivityPlanModeEnter
		tr.commands = append(tr.commands, begin, sessionCmd(command.RecordPlanCreated, command.PlanData{Content: planText(d.Input, "Planning")}))
	case "ExitPlanMode":
		tr.activity.Type = domain.ActivityPlanModeExit
		tr.commands = append(tr.commands, begin, sessionCmd(command.RecordPlanPending,
			command.PlanData{Content: planText(d.Input, "Plan"), RequiresApproval: true}))
	}
	return tr, nil
}

// askUserQuestion reads the tool's input: {"questions":[{"question","options":[{"label"}]}]}
// or the flat {"question","options":[...]}.
func askUserQuestion(input json.RawMessage) (command.QuestionData, error) {
	var in struct {
		Question  string            `json:"question"`
		Options   []json.RawMessage `json:"options"`
		Questions []struct {
			Question string            `json:"question"`
			Options  []json.RawMessage `json:"options"`
		} `json:"questions"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return command.QuestionData{}, fmt.Errorf("AskUserQuestion input: %w", err)
	}
	if in.Question == "" && len(in.Questions) > 0 {
		in.Question, in.Options = in.Questions[0].Question, in.Questions[0].Options
	}
	q := command.QuestionData{Content: in.Question}
	for _, o := range in.Options {
		var label string
		if json.Unmarshal(o, &label) != nil {
			var obj struct {
				Label string `json:"label"`
			}
			_ = json.Unmarshal(o, &obj)
			label = obj.Label
		}
		if label != "" {
			q.Options = append(q.Options, label)
		}
	}
	return q, nil
}

// todoWrite reads {"todos":[{"content","status","activeForm","id"}]}.
func todoWrite(input json.RawMessage) ([]domain.SessionTask, error) {
	var in struct {
		Todos []struct {
			ID         string `json:"id"`
			Content    string `json:"content"`
			Status     string `json:"status"`
			ActiveForm string `json:"activeForm"`
		} `json:"todos"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("TodoWrite input: %w", err)
	}
	tasks := make([]domain.SessionTask, 0, len(in.Todos))
	for i, t := range in.Todos {
		id := t.ID
		if id == "" {
			id = fmt.Sprint(i + 1)
		}
		tasks = append(tasks, domain.SessionTask{ID: id, Subject: t.Content, Status: taskStatus(t.Status), ActiveForm: t.ActiveForm})
	}
	return tasks, nil
}

func taskStatus(s string) domain.SessionTaskStatus {
	switch s {
	case "in_progress":
		return domain.TaskInProgress
	case "completed":
		return domain.TaskCompleted
	}
	return domain.TaskPending
}

func planText(input json.RawMessage, fallback string) string {
	var in struct {
		Plan string `json:"plan"`
	}
	if json.Unmarshal(input, &in) == nil && strings.TrimSpace(in.Plan) != "" {
		return in.Plan
	}
	return fallback
}

// usageUpdate maps to UpdateMetrics: the cost and tokens are summed, the
// context window snapshot replaces the previous one.
func usageUpdate(ev protocol.RawEvent) (translation, error) {
	d, err := decode[protocol.UsageUpdate](ev)
	if err != nil {
		return translation{}, err
	}
	cost, err := domain.USDFromFloat(d.CostUSD)
	if err != nil {
		return translation{}, fmt.Errorf("usage_update: cost_usd: %w", err)
	}
	data := command.MetricsData{
		ModelID: d.Model, CostUsd: cost,
		Tokens: domain.TokenUsage{InputTokens: d.InputTokens, OutputTokens: d.OutputTokens,
			CacheReadTokens: d.CacheReadTokens, CacheWriteTokens: d.CacheWriteTokens},
		ContextWindow: domain.ContextWindowSnapshot{InputTokens: d.ContextWindowUsedTokens,
			ModelContextLimit: d.ContextWindowMaxTokens, RecordedAt: time.UnixMilli(ev.TS).UTC()},
	}
	if d.IsSubagent {
		data.SubAgentID = subagent(d.SubagentID)
	}
	a := item(domain.ActivityMetricsUpdate, fmt.Sprintf("%s: $%.4f, %d tokens in, %d out", d.Model, d.CostUSD, d.InputTokens, d.OutputTokens), string(ev.Data))
	a.SubAgentID = data.SubAgentID
	return translation{activity: a, commands: []outgoing{sessionCmd(command.UpdateMetrics, data)}}, nil
}

// sessionEnd maps a clean end to the session's output and an error to a
// failure with the sidecar's FailureReason (AgentError by default).
func sessionEnd(ev protocol.RawEvent) (translation, error) {
	d, err := decode[protocol.SessionEnd](ev)
	if err != nil {
		return translation{}, err
	}
	if d.Status == "success" {
		return translation{
			activity: item(domain.ActivityStatusChange, "Session ended: "+d.Reason, string(ev.Data)),
			// The engine may have worked on after its last turn ended:
			// the session runs again before it records the output.
			commands: []outgoing{sessionCmd(command.BeginTurn, nil), sessionCmd(command.RecordAgentOutput, command.OutputData{})},
		}, nil
	}
	reason := domain.FailureReason(d.FailureReason)
	if !reason.IsValid() {
		reason = domain.FailureAgentError
	}
	msg := d.Error
	if msg == "" {
		msg = fmt.Sprintf("sidecar ended with exit code %d", d.ExitCode)
	}
	return translation{
		activity: item(domain.ActivityStatusChange, "Session failed: "+msg, string(ev.Data)),
		commands: []outgoing{sessionCmd(command.RecordFailure, command.FailureData{Reason: reason, Message: msg})},
	}, nil
}

func unknownActivity(ev protocol.RawEvent, err error) domain.ActivityItem {
	detail := string(ev.Data)
	if ev.Fields != nil {
		raw, _ := json.Marshal(ev.Fields)
		detail = string(raw)
	}
	return item(domain.ActivityUnknownEvent, "Unreadable sidecar event: "+err.Error(), detail)
}

func subagent(id string) *uuid.UUID {
	if id == "" {
		return nil
	}
	u, err := uuid.Parse(id)
	if err != nil {
		// Engines name subagents freely; a stable id keeps them apart.
		u = uuid.NewSHA1(uuid.NameSpaceOID, []byte(id))
	}
	return &u
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
