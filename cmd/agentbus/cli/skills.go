package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/agentbus/agentbus/internal/client"
)

// Skills runs `agentbus skills <subcommand>`.
func Skills(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return dispatch(ctx, "skills", skillCommands, args, stdout, stderr)
}

var skillCommands = []subcommand{
	{"ls [--active|--inactive]", "list your skills", catalogList(client.Skills, printSkills)},
	{"show ID", "show a skill and its instructions", skillsShow},
	{"create NAME --description D [--instructions TEXT | --instructions-file F]", "create a skill; prints its id", skillsCreate},
	{"edit ID [--name N] [--description D] [--instructions TEXT | --instructions-file F]", "change the fields given; prints its id", skillsEdit},
	{"activate ID", "let sessions enable the skill again", catalogActivate(client.Skills, true)},
	{"deactivate ID", "stop sessions from enabling the skill", catalogActivate(client.Skills, false)},
}

func printSkills(e *env, raw []byte) error {
	var list client.SkillList
	if err := decodeInto(raw, &list); err != nil {
		return err
	}
	t := newTable(e.out, "ID", "NAME", "VERSION", "ACTIVE", "DESCRIPTION")
	for _, s := range list.Items {
		t.row(s.ID, s.Name, fmt.Sprint(s.Version), yesNo(s.IsActive), oneLine(s.Description, 60))
	}
	return t.flush()
}

func skillsShow(e *env, fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	s, err := client.Get[client.Skill](e.ctx, e.client, client.Skills, pos[0])
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(s.JSON)
	}
	v := s.Value
	t := newTable(e.out)
	t.row("ID", v.ID)
	t.row("Name", v.Name)
	t.row("Description", oneLine(v.Description, 100))
	t.row("Active", yesNo(v.IsActive))
	t.row("Version", fmt.Sprint(v.Version))
	t.row("Updated", when(v.UpdatedAt))
	if err := t.flush(); err != nil {
		return err
	}
	// The instructions are prose people read whole, below the table.
	_, err = fmt.Fprintf(e.out, "\n%s\n", v.Instructions)
	return err
}

// skillFlags declares the flags of a skill's fields on fs; the function
// returned gives the change they make: only the fields given.
func skillFlags(fs *flag.FlagSet) func() (client.SkillChange, error) {
	var c client.SkillChange
	name := fs.String("name", "", "the skill's name")
	description := fs.String("description", "", "what the skill is for")
	instructions := fs.String("instructions", "", "what the agent is told when the skill is enabled")
	file := fs.String("instructions-file", "", "read the instructions from this file")
	return func() (client.SkillChange, error) {
		var err error
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "name":
				c.Name = name
			case "description":
				c.Description = description
			case "instructions":
				c.Instructions = instructions
			case "instructions-file":
				var b []byte
				if b, err = os.ReadFile(*file); err == nil {
					text := string(b)
					c.Instructions = &text
				}
			}
		})
		if err != nil {
			return c, usageError("--instructions-file: %v", err)
		}
		return c, nil
	}
}

func skillsCreate(e *env, fs *flag.FlagSet, args []string) error {
	change := skillFlags(fs)
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := change()
	if err != nil {
		return err
	}
	if c.Name != nil {
		return usageError("skills create: the name is the argument, not --name")
	}
	c.Name = &pos[0]
	s, err := client.Create[client.Skill](e.ctx, e.client, client.Skills, c)
	return printEntry(e, s, err, false)
}

func skillsEdit(e *env, fs *flag.FlagSet, args []string) error {
	change := skillFlags(fs)
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := change()
	if err != nil {
		return err
	}
	// The skill's version counts its consolidations, which an edit is
	// not: the id is all there is to print.
	s, err := client.Update[client.Skill](e.ctx, e.client, client.Skills, pos[0], c)
	return printEntry(e, s, err, false)
}
