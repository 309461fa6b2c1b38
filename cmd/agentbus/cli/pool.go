package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/agentbus/agentbus/internal/client"
)

// poolSynopsis is the synopsis of `agentbus pool`.
const poolSynopsis = "pool [--max N]"

// Pool runs `agentbus pool`: how full the caller's session pool is, and
// with --max, its new size.
func Pool(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	e := newEnv(ctx, stdout, stderr)
	fs := e.flags(poolSynopsis, "Show how many of your sessions run and how many may; --max N sets how many may run at once\n"+
		"(the rest wait Queued).\n\n"+ExitCodesHelp)
	max := fs.Int("max", 0, "let at most this many of your sessions run at once")
	err := func() error {
		if _, err := e.parse(fs, args, 0, 0); err != nil {
			return err
		}
		var pool client.Answer[client.Pool]
		var err error
		set := false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == "max" })
		if set {
			pool, err = e.client.SetPoolSize(e.ctx, *max)
		} else {
			pool, err = e.client.Pool(e.ctx)
		}
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(pool.JSON)
		}
		p := pool.Value
		t := newTable(e.out, "RUNNING", "MAX", "AVAILABLE", "USED")
		t.row(fmt.Sprint(p.ActiveCount), fmt.Sprint(p.MaxCount), fmt.Sprint(p.AvailableSlots), percent(p.Percentage))
		return t.flush()
	}()
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return apiError(err)
}
