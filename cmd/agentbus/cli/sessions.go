package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	ctl "github.com/agentbus/agentbus/command/control"
	"github.com/agentbus/agentbus/internal/client"
)

// Sessions runs `agentbus sessions <subcommand>`.
func Sessions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return dispatch(ctx, "sessions", sessionCommands, args, stdout, stderr)
}

var sessionCommands = slices.Concat([]subcommand{
	{"ls [--status S] [--page N] [--page-size N]", "list your sessions, newest first", sessionsList},
	{"show ID", "show a session: status, cost, context, what it waits for", sessionsShow},
	{"start OBJECTIVE [--dir D] [--budget USD] [--tool-approval all|TOOLS] [...]", "start a session; prints its id", sessionsStart},
	{"steer ID TEXT", "send the agent a message now (Immediate); prints its id", sessionsSteer},
	{"queue ID [TEXT] [--cancel MESSAGE]", "list the message queue, or add TEXT for the next turn", sessionsQueue},
	{"promote ID MESSAGE", "make a queued message Immediate", sessionsPromote},
}, controlCommands(), []subcommand{
	{"answer ID TEXT", "answer the session's pending question", sessionsAnswer},
	{"allow ID [REQUEST] [--message TEXT]", "allow the tool use the session waits for (or the request named)", decide(true)},
	{"deny ID [REQUEST] [--message TEXT]", "deny the tool use the session waits for (or the request named)", decide(false)},
	{"plan approve|reject ID [--feedback TEXT]", "approve the agent's plan, or send it back with feedback", sessionsPlan},
	{"approve ID", "approve the output awaiting review: Completed", control("approve")},
	{"reject ID [--reason TEXT]", "reject the output awaiting review: Failed", sessionsReject},
	{"retry ID [--instruction TEXT]", "run a failed session again", sessionsRetry},
	{"close ID", "close an Idle session without output: Completed", control("close")},
	{"watch ID [--new]", "follow a session live until it is Completed or Cancelled", sessionsWatch},
	{"checkpoints ID", "list the session's checkpoints: the state at the end of each turn", sessionsCheckpoints},
	{"diff ID FROM TO", "the files the working directory gained, lost and changed from the checkpoint of turn FROM to that of TO", sessionsDiff},
	{"fork ID TURN [--objective TEXT]", "start a new session from the checkpoint of TURN; prints its id", sessionsFork},
	{"rewind ID TURN", "take an Idle, Paused or Interrupted session back to the checkpoint of TURN", sessionsRewind},
})

// controlCommands are the subcommands of the two-phase controls, one per
// control of the table that people ask for.
func controlCommands() []subcommand {
	var subs []subcommand
	for _, c := range ctl.Offered() {
		subs = append(subs, subcommand{c.Name + " ID", ctl.Help(c), control(c.Route.Path)})
	}
	return subs
}

func sessionsList(e *env, fs *flag.FlagSet, args []string) error {
	status := fs.String("status", "", "only the sessions in this status (Running, Idle, Paused, …)")
	page := fs.Int("page", 0, "the page, from 1")
	pageSize := fs.Int("page-size", 0, "sessions per page (default 20, at most 100)")
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	list, err := e.client.Sessions(e.ctx, *status, *page, *pageSize)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(list.JSON)
	}
	t := newTable(e.out, "ID", "NAME", "STATUS", "COST", "CONTEXT", "TURNS", "CREATED")
	for _, s := range list.Value.Items {
		t.row(s.ID, s.Name, statusText(s.Status, s.HasPendingReview), usd(s.TotalCostUsd),
			percent(s.ContextWindowUsagePercent), fmt.Sprint(s.TurnCount), when(s.CreatedAt))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if l := list.Value; l.Page*l.PageSize < l.Total {
		fmt.Fprintf(e.err, "page %d of %d sessions; --page %d for more\n", l.Page, l.Total, l.Page+1)
	}
	return nil
}

func sessionsShow(e *env, fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	s, err := e.client.Session(e.ctx, pos[0])
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(s.JSON)
	}
	return showSession(e.out, s.Value)
}

func showSession(w io.Writer, s client.Session) error {
	t := newTable(w)
	t.row("ID", s.ID)
	t.row("Name", s.Name)
	t.row("Status", statusText(s.Status, s.HasPendingReview))
	t.row("Objective", oneLine(s.Objective, 100))
	t.row("Directory", s.WorkingDirectory)
	t.row("Model", s.ModelID)
	t.row("Cost", fmt.Sprintf("%s of %s (%s)", usd(s.Budget.EstimatedCostUsd), usd(s.Budget.HardCapUsd), percent(s.Budget.PercentUsed)))
	t.row("Context", percent(s.Metrics.ContextWindowUsagePercent))
	t.row("Turns", fmt.Sprint(s.Metrics.TurnCount))
	t.row("Created", when(s.CreatedAt))
	if s.ChainID != "" {
		t.row("Chain", s.ChainID)
	}
	if s.TraceID != "" {
		t.row("Trace", strings.TrimSpace(s.TraceID+" "+s.TraceURL))
	}
	switch {
	case s.Runner != "":
		t.row("Runner", s.Runner)
	case s.WaitingForRunner:
		t.row("Runner", "none yet: waiting for a runner with room")
	}
	if w := s.WaitingFor; w != nil {
		t.row("Waiting for", waitingText(*w))
	}
	if q := s.PendingQuestion; q != nil {
		question := oneLine(q.Content, 100)
		if len(q.Options) > 0 {
			question += " [" + strings.Join(q.Options, " | ") + "]"
		}
		t.row("Question", question)
	}
	if p := s.PendingPermission; p != nil {
		t.row("Permission", fmt.Sprintf("%s %s (request %s; %s)", p.ToolName, oneLine(toolInputText([]byte(p.Input)), 200),
			p.RequestID, deadlineText(s.ToolApproval, p.ExpiresAt)))
	}
	if p := s.Plan; p != nil {
		t.row("Plan", p.Status+": "+oneLine(p.Content, 80))
	}
	if o := s.Output; o != nil {
		out := fmt.Sprintf("%d files changed, %d tests added", o.FilesChanged, o.TestsAdded)
		if o.AllTestsPassing {
			out += ", all tests passing"
		}
		if o.CommitSha != "" {
			out += ", commit " + o.CommitSha
		}
		t.row("Output", out)
	}
	if f := s.Failure; f != nil {
		t.row("Failure", strings.TrimSuffix(f.Reason+": "+oneLine(f.Message, 100), ": "))
	}
	return t.flush()
}

func sessionsStart(e *env, fs *flag.FlagSet, args []string) error {
	var req client.StartSession
	fs.StringVar(&req.WorkingDirectory, "dir", "", "the working directory, in your part of the workspace (relative to it, or absolute inside it)")
	fs.StringVar(&req.Name, "name", "", "the session's name (default: from the objective)")
	fs.StringVar(&req.TemplateID, "template", "", "the template to start from")
	fs.StringVar(&req.ModelID, "model", "", "the model (default: the template's)")
	budget := fs.Float64("budget", 0, "the budget cap in USD (required without --template)")
	var skills listFlag
	fs.Var(&skills, "skill", "a skill to enable (repeatable)")
	approval := toolApprovalFlags(fs)
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if req.ToolApproval, err = approval(); err != nil {
		return err
	}
	req.Objective = pos[0]
	req.SkillIDs = skills
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "budget" {
			req.BudgetCapUsd = budget
		}
	})
	started, err := e.client.Start(e.ctx, req)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(started.JSON)
	}
	_, err = fmt.Fprintln(e.out, started.Value.Session.ID)
	return err
}

func sessionsSteer(e *env, fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	return e.enqueue(pos[0], pos[1], client.Immediate)
}

func (e *env) enqueue(id, content, priority string) error {
	q, err := e.client.Enqueue(e.ctx, id, content, priority)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(q.JSON)
	}
	_, err = fmt.Fprintln(e.out, q.Value.MessageID)
	return err
}

func sessionsQueue(e *env, fs *flag.FlagSet, args []string) error {
	cancel := fs.String("cancel", "", "withdraw this pending message instead")
	pos, err := e.parse(fs, args, 1, 2)
	if err != nil {
		return err
	}
	var q client.Answer[client.MessageQueue]
	switch {
	case len(pos) == 2 && *cancel != "":
		return usageError("sessions queue: TEXT and --cancel exclude each other")
	case len(pos) == 2:
		return e.enqueue(pos[0], pos[1], client.Queued)
	case *cancel != "":
		q, err = e.client.CancelMessage(e.ctx, pos[0], *cancel)
	default:
		q, err = e.client.Queue(e.ctx, pos[0])
	}
	if err != nil {
		return err
	}
	return e.printQueue(q)
}

func sessionsPromote(e *env, fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	q, err := e.client.Promote(e.ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	return e.printQueue(q)
}

func (e *env) printQueue(q client.Answer[client.MessageQueue]) error {
	if e.json {
		return e.printJSON(q.JSON)
	}
	t := newTable(e.out, "SEQ", "MESSAGE", "PRIORITY", "STATUS", "SOURCE", "CONTENT")
	for _, m := range q.Value.Messages {
		t.row(fmt.Sprint(m.Sequence), m.MessageID, m.Priority, m.Status, m.Source, oneLine(m.Content, 60))
	}
	return t.flush()
}

// control runs a command of the session that takes no input.
func control(verb string) func(e *env, fs *flag.FlagSet, args []string) error {
	return func(e *env, fs *flag.FlagSet, args []string) error {
		pos, err := e.parse(fs, args, 1, 1)
		if err != nil {
			return err
		}
		s, err := e.client.Control(e.ctx, pos[0], verb)
		return e.printStatus(s, err)
	}
}

func sessionsAnswer(e *env, fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	s, err := e.client.Answer(e.ctx, pos[0], pos[1])
	return e.printStatus(s, err)
}

func sessionsReject(e *env, fs *flag.FlagSet, args []string) error {
	reason := fs.String("reason", "", "why the output is rejected")
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	s, err := e.client.Reject(e.ctx, pos[0], *reason)
	return e.printStatus(s, err)
}

func sessionsRetry(e *env, fs *flag.FlagSet, args []string) error {
	instruction := fs.String("instruction", "", "an additional instruction for the new attempt")
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	s, err := e.client.Retry(e.ctx, pos[0], *instruction)
	return e.printStatus(s, err)
}

// printStatus prints the session a command answered with: its id and its
// status after the command.
func (e *env) printStatus(s client.Answer[client.Session], err error) error {
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(s.JSON)
	}
	_, err = fmt.Fprintf(e.out, "%s %s\n", s.Value.ID, statusText(s.Value.Status, s.Value.HasPendingReview))
	return err
}

// listFlag is a flag that may be given more than once.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

func sessionsCheckpoints(e *env, fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	list, err := e.client.Checkpoints(e.ctx, pos[0])
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(list.JSON)
	}
	t := newTable(e.out, "TURN", "WHEN", "FILES", "SIZE", "ADDED", "SNAPSHOT", "LAST MESSAGE")
	for _, c := range list.Value.Items {
		turn := fmt.Sprint(c.Turn)
		if c.Rewound {
			turn += " (rewound)"
		}
		snapshot := oneLine(c.Snapshot, 12)
		if c.Pruned {
			turn, snapshot = turn+" (pruned)", "pruned"
		}
		t.row(turn, when(c.RecordedAt), fmt.Sprint(c.FilesChanged), byteSize(c.Bytes), byteSize(c.AddedBytes), snapshot,
			oneLine(c.LastMessage, 60))
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.out, "%d of %d kept, store %s\n", list.Value.Kept, len(list.Value.Items), byteSize(list.Value.StoreBytes))
	return err
}

// byteSize writes n bytes for a reader: 512 B, 4.0 KiB, 1.5 MiB.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 3 {
		v, i = v/unit, i+1
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[i])
}

// turnArg reads a checkpoint's turn from the command line.
func turnArg(raw string) (int, error) {
	turn, err := strconv.Atoi(raw)
	if err != nil || turn < 0 {
		return 0, usageError("TURN %q is not a turn number", raw)
	}
	return turn, nil
}

func sessionsDiff(e *env, fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args, 3, 3)
	if err != nil {
		return err
	}
	from, err := turnArg(pos[1])
	if err != nil {
		return err
	}
	to, err := turnArg(pos[2])
	if err != nil {
		return err
	}
	diff, err := e.client.CheckpointDiff(e.ctx, pos[0], from, to)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(diff.JSON)
	}
	t := newTable(e.out, "STATUS", "PATH", "BEFORE", "AFTER")
	for _, f := range diff.Value.Files {
		t.row(f.Status, f.Path, byteSize(f.OldBytes), byteSize(f.NewBytes))
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, f := range diff.Value.Files {
		if err := printPatch(e.out, f); err != nil {
			return err
		}
	}
	return nil
}

// printPatch writes a file's unified diff, or why it has none.
func printPatch(w io.Writer, f client.FileDiff) error {
	var err error
	switch {
	case f.Binary:
		_, err = fmt.Fprintf(w, "\n%s: binary\n", f.Path)
	case f.Omitted != "":
		_, err = fmt.Fprintf(w, "\n%s: no diff shown: %s\n", f.Path, f.Omitted)
	case f.Patch != "":
		_, err = fmt.Fprintf(w, "\n--- %s\n+++ %s\n%s", f.Path, f.Path, f.Patch)
	}
	return err
}

func sessionsFork(e *env, fs *flag.FlagSet, args []string) error {
	objective := fs.String("objective", "", "what the fork does next, on top of the conversation up to the checkpoint")
	pos, err := e.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	turn, err := turnArg(pos[1])
	if err != nil {
		return err
	}
	started, err := e.client.Fork(e.ctx, pos[0], turn, *objective)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(started.JSON)
	}
	_, err = fmt.Fprintln(e.out, started.Value.Session.ID)
	return err
}

func sessionsRewind(e *env, fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	turn, err := turnArg(pos[1])
	if err != nil {
		return err
	}
	s, err := e.client.Rewind(e.ctx, pos[0], turn)
	return e.printStatus(s, err)
}
