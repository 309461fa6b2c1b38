package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentbus/agentbus/internal/client"
)

// Webhooks runs `agentbus webhooks`: the caller's webhooks and their
// delivery logs.
func Webhooks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return dispatch(ctx, "webhooks", webhookCommands, args, stdout, stderr)
}

var webhookCommands = []subcommand{
	{"ls", "list your webhooks", webhooksList},
	{"create URL [--event TYPE]... [--session ID] [--template ID]", "create a webhook; prints its id and secret (shown once)", webhooksCreate},
	{"show ID", "show a webhook", webhooksShow},
	{"enable ID", "enable a webhook (its pending deliveries are sent)", webhooksEnable(true)},
	{"disable ID", "disable a webhook", webhooksEnable(false)},
	{"rm ID", "delete a webhook and its delivery log", webhooksRemove},
	{"rotate ID [--grace D]", "make a new secret; the old one signs too for D (default 24h)", webhooksRotate},
	{"deliveries ID [--status S]", "the delivery log, newest first", webhooksDeliveries},
	{"redeliver ID DELIVERY", "send a delivery again", webhooksRedeliver},
	{"test ID", "send the webhook a test event", webhooksTest},
}

func webhooksList(e *env, fs *flag.FlagSet, args []string) error {
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	list, err := e.client.Webhooks(e.ctx)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(list.JSON)
	}
	t := newTable(e.out, "ID", "URL", "EVENTS", "ENABLED", "FAILURES", "CREATED")
	for _, w := range list.Value.Webhooks {
		t.row(w.ID, w.URL, events(w.EventTypes), enabledText(w), fmt.Sprint(w.ConsecutiveFailures), when(w.CreatedAt))
	}
	return t.flush()
}

func webhooksCreate(e *env, fs *flag.FlagSet, args []string) error {
	var types listFlag
	fs.Var(&types, "event", "an event type to deliver (repeatable; none: every one)")
	session := fs.String("session", "", "only this session's events")
	template := fs.String("template", "", "only the events of this template's sessions")
	description := fs.String("description", "", "what the webhook is for")
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	w, err := e.client.CreateWebhook(e.ctx, client.NewWebhook{URL: pos[0], EventTypes: types, SessionID: *session,
		TemplateID: *template, Description: *description})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(w.JSON)
	}
	t := newTable(e.out)
	t.row("ID", w.Value.ID)
	t.row("Secret", w.Value.Secret+"   (shown once: keep it)")
	return t.flush()
}

func webhooksShow(e *env, fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	w, err := e.client.Webhook(e.ctx, pos[0])
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(w.JSON)
	}
	return showWebhook(e.out, w.Value)
}

func showWebhook(out io.Writer, w client.Webhook) error {
	t := newTable(out)
	t.row("ID", w.ID)
	t.row("URL", w.URL)
	t.row("Events", events(w.EventTypes))
	if w.SessionID != "" {
		t.row("Session", w.SessionID)
	}
	if w.TemplateID != "" {
		t.row("Template", w.TemplateID)
	}
	t.row("Enabled", enabledText(w))
	t.row("Failures", fmt.Sprint(w.ConsecutiveFailures))
	if w.PreviousSecretExpiresAt != nil {
		t.row("Old secret until", when(*w.PreviousSecretExpiresAt))
	}
	if w.Secret != "" {
		t.row("Secret", w.Secret+"   (shown once: keep it)")
	}
	return t.flush()
}

func webhooksEnable(enabled bool) func(e *env, fs *flag.FlagSet, args []string) error {
	return func(e *env, fs *flag.FlagSet, args []string) error {
		pos, err := e.parse(fs, args, 1, 1)
		if err != nil {
			return err
		}
		w, err := e.client.SetWebhookEnabled(e.ctx, pos[0], enabled)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(w.JSON)
		}
		return showWebhook(e.out, w.Value)
	}
}

func webhooksRemove(e *env, fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := e.client.DeleteWebhook(e.ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintln(e.out, pos[0], "deleted")
	return nil
}

func webhooksRotate(e *env, fs *flag.FlagSet, args []string) error {
	grace := fs.Duration("grace", 24*time.Hour, "how long the old secret still signs deliveries")
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	w, err := e.client.RotateWebhook(e.ctx, pos[0], *grace)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(w.JSON)
	}
	return showWebhook(e.out, w.Value)
}

func webhooksDeliveries(e *env, fs *flag.FlagSet, args []string) error {
	status := fs.String("status", "", "only the pending, delivered or failed ones")
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	list, err := e.client.Deliveries(e.ctx, pos[0], *status)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(list.JSON)
	}
	t := newTable(e.out, "ID", "EVENT", "STATUS", "ATTEMPTS", "CODE", "LATENCY", "NEXT", "ENQUEUED")
	for _, d := range list.Value.Deliveries {
		code, latency, next := "", "", ""
		if d.StatusCode != nil {
			code = fmt.Sprint(*d.StatusCode)
		}
		if d.LatencyMs != nil {
			latency = fmt.Sprintf("%dms", *d.LatencyMs)
		}
		if d.NextAttemptAt != nil {
			next = when(*d.NextAttemptAt)
		}
		t.row(d.ID, d.EventType, d.Status, fmt.Sprint(d.Attempts), code, latency, next, when(d.EnqueuedAt))
	}
	return t.flush()
}

func webhooksRedeliver(e *env, fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	d, err := e.client.Redeliver(e.ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	return e.printDelivery(d)
}

func webhooksTest(e *env, fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	d, err := e.client.TestWebhook(e.ctx, pos[0])
	if err != nil {
		return err
	}
	return e.printDelivery(d)
}

func (e *env) printDelivery(d client.Answer[client.Delivery]) error {
	if e.json {
		return e.printJSON(d.JSON)
	}
	fmt.Fprintln(e.out, d.Value.ID, d.Value.Status)
	return nil
}

func events(types []string) string {
	if len(types) == 0 {
		return "all"
	}
	return strings.Join(types, ",")
}

func enabledText(w client.Webhook) string {
	switch {
	case w.Enabled:
		return "yes"
	case w.DisabledReason != "":
		return "no: " + w.DisabledReason
	default:
		return "no"
	}
}
