package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/internal/client"
)

func sessionsWatch(e *env, fs *flag.FlagSet, args []string) error {
	newOnly := fs.Bool("new", false, "only what happens from now on, not what happened before")
	retryFor := fs.Duration("retry-for", 2*time.Minute, "how long to keep reconnecting after the stream was lost")
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	f := client.Follow{Since: "0", RetryFor: *retryFor, Lost: func(last string, err error) {
		fmt.Fprintf(e.err, "agentbus: the live stream was lost (%v); resuming after event %s\n", err, last)
	}}
	if *newOnly {
		// A time, not "new events": a reconnect before the first event
		// then still starts where this stream did.
		f.Since = time.Now().UTC().Format(time.RFC3339Nano)
	}
	r := &renderer{w: e.out}
	return e.client.FollowSession(e.ctx, pos[0], f, func(ev client.Event) error {
		var err error
		if e.json {
			err = writeJSONLine(e.out, ev)
		} else {
			err = r.render(ev)
		}
		if err != nil {
			return err
		}
		if endsSession(ev) {
			return client.Stop()
		}
		return nil
	})
}

// writeJSONLine writes an event as one line of JSON: its SSE id, its
// name and its data as the API sent it.
func writeJSONLine(w io.Writer, ev client.Event) error {
	line, err := json.Marshal(struct {
		ID    string          `json:"id"`
		Event string          `json:"event"`
		Data  json.RawMessage `json:"data"`
	}{ev.ID, ev.Name, ev.Data})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}

// finalEvents leave a session Completed or Cancelled, which no command
// leaves again: after one of them the session has nothing more to show.
var finalEvents = map[string]bool{
	domain.AgentSessionApprovedEvent{}.EventType(): true,
	domain.AgentSessionClosedEvent{}.EventType():   true,
	domain.SessionCancelledEvent{}.EventType():     true,
}

func endsSession(ev client.Event) bool {
	if ev.Name != "event" {
		return false
	}
	var d client.StreamEvent
	return json.Unmarshal(ev.Data, &d) == nil && d.Aggregate == "session" && finalEvents[d.Type]
}

// renderer writes a session's live stream for people: one line per
// event, led by its time; assistant text as it is written.
type renderer struct {
	w io.Writer
	// open is the text block that text deltas are writing on the current
	// line, and written what they wrote; open is empty when no line is open.
	open, written string
}

// feedItem holds the fields of the feed's item kinds that are shown.
type feedItem struct {
	MessageID  string          `json:"messageId"`
	Index      int             `json:"index"`
	Text       string          `json:"text"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
	Content    string          `json:"content"`
	IsError    bool            `json:"isError"`
	Summary    string          `json:"summary"`
	Type       string          `json:"type"`
	SubAgentID string          `json:"subAgentId"`
	OccurredAt time.Time       `json:"occurredAt"`
}

const indent = "                     " // continuation lines start under the text

func (r *renderer) render(ev client.Event) error {
	var it feedItem
	if err := json.Unmarshal(ev.Data, &it); err != nil {
		return fmt.Errorf("event %s (%s) is not JSON: %w", ev.ID, ev.Name, err)
	}
	switch ev.Name {
	case "text_delta":
		return r.delta(it)
	case "assistant_text":
		if r.open != "" && strings.HasPrefix(r.open, it.MessageID+"/") && strings.HasPrefix(it.Text, r.written) {
			// The deltas wrote this block's start: finish it.
			rest := it.Text[len(r.written):]
			r.open, r.written = "", ""
			_, err := io.WriteString(r.w, continued(rest)+"\n")
			return err
		}
		return r.line(it.OccurredAt, speaker(it.SubAgentID), it.Text)
	case "tool_call":
		return r.line(it.OccurredAt, "→ "+it.ToolName, toolInputText(it.Input))
	case "tool_result":
		outcome := "ok"
		if it.IsError {
			outcome = "error"
		}
		return r.line(it.OccurredAt, "← "+it.ToolName, outcome+": "+oneLine(it.Content, 200))
	case "activity":
		return r.line(it.OccurredAt, "· "+it.Type, oneLine(it.Summary, 200))
	case "waiting":
		var w struct {
			WaitingFor *client.WaitingFor `json:"waitingFor"`
		}
		if err := json.Unmarshal(ev.Data, &w); err != nil || w.WaitingFor == nil {
			return err
		}
		at := time.Time{}
		if w.WaitingFor.Since != nil {
			at = *w.WaitingFor.Since
		}
		return r.line(at, "… waiting", waitingText(*w.WaitingFor))
	case "event":
		var d client.StreamEvent
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		return r.line(d.OccurredAt, "● "+strings.ReplaceAll(d.Type, "_", " "), eventFields(d.Data))
	default:
		return r.line(time.Time{}, ev.Name, oneLine(string(ev.Data), 200))
	}
}

// delta writes a piece of text the assistant is still writing on the
// line of its block.
func (r *renderer) delta(it feedItem) error {
	block := it.MessageID + "/" + fmt.Sprint(it.Index)
	if r.open != block {
		if err := r.closeLine(); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(r.w, "%s  %-10s ", clock(it.OccurredAt), speaker("")); err != nil {
			return err
		}
		r.open = block
	}
	r.written += it.Text
	_, err := io.WriteString(r.w, continued(it.Text))
	return err
}

// line writes one event: its time, what it is, and its text.
func (r *renderer) line(at time.Time, label, text string) error {
	if err := r.closeLine(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(r.w, strings.TrimRight(fmt.Sprintf("%s  %-10s %s", clock(at), label, continued(text)), " \n"))
	return err
}

// closeLine ends a line that text deltas left open.
func (r *renderer) closeLine() error {
	if r.open == "" {
		return nil
	}
	r.open, r.written = "", ""
	_, err := io.WriteString(r.w, "\n")
	return err
}

func speaker(subAgentID string) string {
	if subAgentID == "" {
		return "assistant"
	}
	return "subagent " + subAgentID[:min(8, len(subAgentID))]
}

// continued indents the lines of a text after its first.
func continued(text string) string {
	return strings.ReplaceAll(text, "\n", "\n"+indent)
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "--:--:--"
	}
	return t.Local().Format("15:04:05")
}

// hiddenFields are the fields of domain events that every one carries or
// that mean nothing to a person watching.
var hiddenFields = map[string]bool{"sessionId": true, "ownerId": true, "occurredAt": true, "commandId": true}

// eventFields shows the plain fields of a domain event's data as
// key=value, in the order of their names.
func eventFields(raw json.RawMessage) string {
	var data map[string]any
	if json.Unmarshal(raw, &data) != nil {
		return ""
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		if !hiddenFields[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		var v string
		switch x := data[k].(type) {
		case string:
			v = oneLine(x, 120)
			if strings.ContainsAny(v, " =\"") || v == "" {
				v = fmt.Sprintf("%q", v)
			}
		case float64:
			// Four decimals are enough for costs and percentages.
			v = strings.TrimRight(strings.TrimRight(strconv.FormatFloat(x, 'f', 4, 64), "0"), ".")
		case bool:
			v = strconv.FormatBool(x)
		case []any:
			items := make([]string, 0, len(x))
			for _, item := range x {
				if s, ok := item.(string); ok {
					items = append(items, s)
				}
			}
			if len(items) != len(x) {
				continue
			}
			v = "[" + strings.Join(items, " | ") + "]"
		default:
			continue
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}
