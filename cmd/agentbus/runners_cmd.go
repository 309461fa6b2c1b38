package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/agentbus/agentbus/internal/credentials"
	"github.com/agentbus/agentbus/sidecar/runners"
)

// runnerRow is one runner as `agentbus runners` shows it.
type runnerRow struct {
	Name     string  `json:"name"`
	Capacity int     `json:"capacity"`
	Sessions int     `json:"sessions"`
	LeaseAge float64 `json:"leaseAgeSeconds"`
	Draining bool    `json:"draining"`
}

// runRunners is `agentbus runners [--json]`: the runners whose leases
// live, with the sessions assigned to each.
func runRunners(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("runners", flag.ExitOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	dataDir := fs.String("data-dir", "", "the data directory of an `agentbus up` on this machine, to read NATS's URL from")
	natsURL := fs.String("nats-url", envOr("NATS_URL", "nats://127.0.0.1:4222"), "NATS (default $NATS_URL)")
	_ = fs.Parse(args)
	if *dataDir != "" {
		env, err := credentials.ReadEnv(*dataDir)
		if err != nil {
			return fmt.Errorf("runners: %w", err)
		}
		*natsURL = env["NATS_URL"]
	}
	in := &infra{}
	defer in.Close()
	if err := in.connectNATSWithEnvReplicas(ctx, *natsURL); err != nil {
		return err
	}
	ttl, err := leaseTTL()
	if err != nil {
		return err
	}
	store, err := runners.Open(ctx, in.JS, ttl)
	if err != nil {
		return err
	}
	rows, err := runnerRows(ctx, store, time.Now())
	if err != nil {
		return err
	}
	return printRunners(os.Stdout, rows, *asJSON)
}

// runnerRows reads the leases and counts the sessions assigned to each.
func runnerRows(ctx context.Context, store *runners.Store, now time.Time) ([]runnerRow, error) {
	leases, err := store.Leases(ctx)
	if err != nil {
		return nil, err
	}
	cache, err := store.Watch(ctx)
	if err != nil {
		return nil, err
	}
	load := cache.Load()
	rows := make([]runnerRow, 0, len(leases))
	for name, e := range leases {
		rows = append(rows, runnerRow{Name: name, Capacity: e.Capacity, Sessions: load[name],
			LeaseAge: now.Sub(e.Renewed).Seconds(), Draining: e.Draining})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows, nil
}

func printRunners(w io.Writer, rows []runnerRow, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCAPACITY\tSESSIONS\tLEASE AGE\tDRAINING")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1fs\t%t\n", r.Name, r.Capacity, r.Sessions, r.LeaseAge, r.Draining)
	}
	return tw.Flush()
}
