package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/agentbus/agentbus/internal/client"
)

// catalogList lists the caller's templates or skills, printed by print.
func catalogList(k client.Catalog, print func(e *env, raw []byte) error) func(e *env, fs *flag.FlagSet, args []string) error {
	return func(e *env, fs *flag.FlagSet, args []string) error {
		active := fs.Bool("active", false, "only the active ones")
		inactive := fs.Bool("inactive", false, "only the deactivated ones")
		if _, err := e.parse(fs, args, 0, 0); err != nil {
			return err
		}
		filter := ""
		switch {
		case *active && *inactive:
			return usageError("%s: --active and --inactive exclude each other", fs.Name())
		case *active:
			filter = "true"
		case *inactive:
			filter = "false"
		}
		list, err := client.List[json.RawMessage](e.ctx, e.client, k, filter)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(list.JSON)
		}
		return print(e, list.JSON)
	}
}

// catalogActivate activates or deactivates a template or skill.
func catalogActivate(k client.Catalog, active bool) func(e *env, fs *flag.FlagSet, args []string) error {
	return func(e *env, fs *flag.FlagSet, args []string) error {
		pos, err := e.parse(fs, args, 1, 1)
		if err != nil {
			return err
		}
		entry, err := client.SetActive[struct {
			ID       string `json:"id"`
			IsActive bool   `json:"isActive"`
		}](e.ctx, e.client, k, pos[0], active)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(entry.JSON)
		}
		state := "inactive"
		if entry.Value.IsActive {
			state = "active"
		}
		_, err = fmt.Fprintf(e.out, "%s %s\n", entry.Value.ID, state)
		return err
	}
}

// versioned is what create and edit print of a template or skill.
type versioned interface {
	client.Template | client.Skill
}

func idAndVersion[T versioned](v T) (string, int) {
	switch v := any(v).(type) {
	case client.Template:
		return v.ID, v.Version
	case client.Skill:
		return v.ID, v.Version
	}
	return "", 0
}

// printEntry prints what create (the id) or edit (the id and the new
// version) made of a template or skill.
func printEntry[T versioned](e *env, a client.Answer[T], err error, version bool) error {
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(a.JSON)
	}
	id, v := idAndVersion(a.Value)
	if version {
		_, err = fmt.Fprintf(e.out, "%s version %d\n", id, v)
	} else {
		_, err = fmt.Fprintln(e.out, id)
	}
	return err
}

func decodeInto(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	return d.Decode(v)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// scheduleText is a schedule and its next run, or "-" for none.
func scheduleText(s *client.Schedule, next *time.Time) string {
	if s == nil {
		return "-"
	}
	text := s.CronExpression + " " + s.TimeZone
	if !s.IsEnabled {
		return text + " (off)"
	}
	if next != nil {
		text += ", next " + when(*next)
	}
	return text
}

func splitList(s string) []string {
	out := []string{}
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
