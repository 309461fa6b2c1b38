package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentbus/agentbus/internal/client"
)

// table writes aligned columns for people.
type table struct{ w *tabwriter.Writer }

// newTable starts a table with the header when it is given.
func newTable(w io.Writer, header ...string) *table {
	t := &table{w: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		// A tab or newline in a cell would break the columns.
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
	}
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.w.Flush() }

// printJSON prints the API's JSON, indented.
func (e *env) printJSON(raw json.RawMessage) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := b.WriteTo(e.out)
	return err
}

// statusText is a session's status as people read it: Idle with output
// awaiting review is said so.
func statusText(status string, pendingReview bool) string {
	if status == "Idle" && pendingReview {
		return "Idle (awaiting review)"
	}
	return status
}

// usd is an amount in dollars with enough digits to be true: cents from
// ten cents up, two significant digits below ($0.0024, not $0.00).
func usd(v float64) string {
	if v == 0 || math.Abs(v) >= 0.1 {
		return fmt.Sprintf("$%.2f", v)
	}
	return "$" + strconv.FormatFloat(v, 'g', 2, 64)
}

func percent(v float64) string { return fmt.Sprintf("%.0f%%", v) }

// when is a time in UTC to the second, as tables show it.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// oneLine is s on one line, cut to at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// deadlineText says what becomes of a permission request left unanswered,
// and when: "Deny at 15:04:05 unless decided".
func deadlineText(a *client.ToolApproval, at time.Time) string {
	outcome := "Deny"
	if a != nil && a.OnTimeout != "" {
		outcome = a.OnTimeout
	}
	return fmt.Sprintf("%s at %s unless decided", outcome, clock(at))
}

// waitingKinds says each kind of wait of the API in words, before its detail.
var waitingKinds = map[string]string{
	"Runner": "a runner:", "Model": "the model:", "ToolCall": "tool call", "SafePoint": "a safe point:",
	"Permission": "your allow or deny of", "Answer": "your answer to", "PlanDecision": "your decision on the plan",
	"Resume": "", "Review": "", "Message": "",
}

// waitingText is what a session waits for, since when and until when.
func waitingText(w client.WaitingFor) string {
	text := strings.TrimSpace(waitingKinds[w.Kind] + " " + w.Detail)
	if w.Since != nil {
		text += ", since " + clock(*w.Since)
	}
	if w.Deadline != nil {
		text += ", until " + clock(*w.Deadline)
	}
	return text
}
