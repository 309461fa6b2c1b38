package commands_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/bus/outbox"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/commands"
	"github.com/agentbus/agentbus/internal/localserver"
	"github.com/agentbus/agentbus/internal/proccpu"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/postgres/migrations"
)

// benchSenders is how many callers send commands at once.
const benchSenders = 16

// benchSessionsPerSender is how many running sessions each sender cycles
// through; they are its own, so senders never contend for one session.
const benchSessionsPerSender = 4

// benchConcurrency is the commands worker's Concurrency in the benchmark,
// AGENTBUS_BENCH_CONCURRENCY to try others.
func benchConcurrency() int {
	if n, err := strconv.Atoi(os.Getenv("AGENTBUS_BENCH_CONCURRENCY")); err == nil && n > 0 {
		return n
	}
	return 8
}

// BenchmarkCommands measures the command pipeline end to end with 16
// concurrent senders, each waiting for its command's result
// (command.Client.Do): commands/s and the p50 and p99 of send -> result.
// Every case runs in the same process, on the same machine, in the same run.
//
// Baselines:
//   - baseline=fsync: one small write and fsync, the unit that every
//     durable write pays on this disk.
//   - baseline=nats-request: a core NATS request to a responder.
//   - baseline=jetstream: the command stored in AGENTS_COMMANDS, delivered
//     by the commands worker's runner and consumer and answered at once by a
//     handler that does nothing: the pipeline without Postgres and the
//     domain. With fsync before ack, storing a command and acknowledging it
//     (on a work queue the ack deletes the message, which writes a tombstone)
//     are two fsyncs of the stream, one after the other.
//
// The real thing:
//   - session/postgres=durable: the commands worker with every handler
//     (Concurrency 8, AGENTBUS_BENCH_CONCURRENCY to try others) and the
//     outbox publisher, on a Postgres with fsync on, as deployed. Each
//     sender cycles its own running sessions through pause_session,
//     confirm_paused, resume_session and confirm_resumed; each command loads
//     the session, saves it with a version check, writes its events to the
//     outbox and records its result, in one transaction.
//
// The floor:
//   - skeleton=durable: the same durable work per command with bare
//     library calls and none of agentbus's logic (see benchSkeleton), on
//     servers configured as the row before it: what this machine can do at
//     all for this shape of work. It runs right after the durable row and
//     reports ours/skel-rate (the durable row's cmds/s over its own) and
//     skel/js (its cmds/s over the jetstream baseline's): how far ours is
//     from the floor, and whether the floor reaches what we aim for.
//
// Where the time goes: jetstream-fsync=off/... are the same cases on a
// server that does not fsync before each ack (bus.EmbeddedConfig.SkipFsync,
// not how agentbus runs). The gap between them and the cases above is what
// the two fsyncs that each command costs AGENTS_COMMANDS (storing it, and
// the work queue's delete on ack) take on this disk.
//
// Every row also reports the CPU it spent per command, in this process
// (client, NATS server, worker) and the Postgres servers it started
// (cpu-ms/cmd, of which pg-cpu-ms/cmd). The rows end with a table of them
// all, printed since a benchmark with sub-benchmarks drops its own log.
//
// Run it with:
//
//	go test -run '^$' -bench BenchmarkCommands -benchtime 5000x ./handlers/commands/
func BenchmarkCommands(b *testing.B) {
	cases := []struct {
		name  string
		setup func(tb testing.TB) benchOp
	}{
		{"baseline=nats-request", benchNATSRequest},
		{rowJetStream, func(tb testing.TB) benchOp { return benchJetStreamRequest(tb, false) }},
		{rowDurable, func(tb testing.TB) benchOp {
			return benchSessions(tb, durablePostgres(tb), false)
		}},
		{rowSkeleton, func(tb testing.TB) benchOp { return benchSkeleton(tb, durablePostgres(tb), false) }},
		{fsyncOff + rowJetStream, func(tb testing.TB) benchOp { return benchJetStreamRequest(tb, true) }},
		{fsyncOff + rowDurable, func(tb testing.TB) benchOp {
			return benchSessions(tb, durablePostgres(tb), true)
		}},
		{fsyncOff + rowSkeleton, func(tb testing.TB) benchOp { return benchSkeleton(tb, durablePostgres(tb), true) }},
	}
	b.Run("baseline=fsync", benchFsync)
	// results holds each row's last round, for the ratios of the rows
	// after it and the closing table.
	results := map[string]benchResult{}
	var names []string
	for _, c := range cases {
		var op benchOp
		names = append(names, c.name)
		b.Run(c.name, func(sb *testing.B) {
			// The servers belong to the parent, so that the rounds that
			// find b.N share them and only the first one starts them.
			if op == nil {
				op = c.setup(b)
			}
			if r, ok := measure(sb, op); ok {
				results[c.name] = r
				reportRatios(sb, c.name, results)
			}
		})
	}
	writeCommandsTable(os.Stdout, names, results)
}

// The rows that the ratios compare, each also run under fsyncOff.
const (
	rowJetStream = "baseline=jetstream"
	rowDurable   = "session/postgres=durable"
	rowSkeleton  = "skeleton=durable"
	fsyncOff     = "jetstream-fsync=off/"
)

// benchResult is what one row measured.
type benchResult struct {
	rate     float64 // commands per second
	p50, p99 float64 // ms
	// cpu is the CPU ms per command of this process and the Postgres
	// servers it started; pgCPU is the servers' part of it.
	cpu, pgCPU float64
}

// reportRatios reports the ratios of row name to the rows before it under
// the same fsync setting: the durable row to the jetstream baseline, the
// skeleton to the durable row and to the baseline.
func reportRatios(b *testing.B, name string, results map[string]benchResult) {
	setting, row := fsyncOff, strings.TrimPrefix(name, fsyncOff)
	if row == name {
		setting = ""
	}
	r, js, ours := results[name], results[setting+rowJetStream], results[setting+rowDurable]
	switch row {
	case rowDurable:
		if js.rate > 0 {
			b.ReportMetric(r.rate/js.rate, "ours/js")
		}
	case rowSkeleton:
		if ours.rate > 0 {
			b.ReportMetric(ours.rate/r.rate, "ours/skel-rate")
		}
		if js.rate > 0 {
			b.ReportMetric(r.rate/js.rate, "skel/js")
		}
	}
}

// writeCommandsTable writes the rows that ran, in order, and for each
// fsync setting the durable row and the skeleton against the baseline.
func writeCommandsTable(out io.Writer, names []string, results map[string]benchResult) {
	if len(results) == 0 {
		return
	}
	fmt.Fprintf(out, "commands, %d senders waiting for their results, beside the skeleton (same run):\n", benchSenders)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "row\tcmds/s\tp50 ms\tp99 ms\tcpu ms/cmd\tof which postgres\t")
	for _, n := range names {
		if r, ok := results[n]; ok {
			fmt.Fprintf(w, "%s\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", n, r.rate, r.p50, r.p99, r.cpu, r.pgCPU)
		}
	}
	_ = w.Flush()
	for _, setting := range []string{"", fsyncOff} {
		js, ours, skel := results[setting+rowJetStream], results[setting+rowDurable], results[setting+rowSkeleton]
		if js.rate == 0 || ours.rate == 0 || skel.rate == 0 {
			continue
		}
		fmt.Fprintf(out, "%sdurable/jetstream %.2f×  skeleton/jetstream %.2f×  durable/skeleton %.2f× (cmds/s); cpu/cmd durable/skeleton %.1f×\n",
			setting, ours.rate/js.rate, skel.rate/js.rate, ours.rate/skel.rate, ours.cpu/skel.cpu)
	}
}

// benchOp is one sender's i-th operation: send one command, wait for its
// result.
type benchOp func(ctx context.Context, sender, i int) error

// benchFsync measures the unit every durable write pays here: one small
// write and fsync in the directory where the tests keep JetStream's store.
func benchFsync(b *testing.B) {
	f, err := os.CreateTemp(b.TempDir(), "fsync")
	require.NoError(b, err)
	defer f.Close()
	record := make([]byte, 256)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := f.Write(record); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "fsync-ms")
}

// measure runs b.N operations over benchSenders concurrent senders,
// reports the rate, the latency percentiles and the CPU per command of op,
// and returns them; ok is false when nothing was measured.
func measure(b *testing.B, op benchOp) (r benchResult, ok bool) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var next atomic.Int64
	latencies := make([][]time.Duration, benchSenders)
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0, pg0 := treeCPU()
	start := time.Now()
	for s := range benchSenders {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < b.N; i = int(next.Add(1)) - 1 {
				t0 := time.Now()
				if err := op(ctx, s, i); err != nil {
					b.Error(err)
					return
				}
				latencies[s] = append(latencies[s], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, pg1 := treeCPU()
	b.StopTimer()
	all := slices.Concat(latencies...)
	if len(all) == 0 {
		return r, false
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()) / 1000
	}
	n := float64(len(all))
	// A process caught exiting, before its parent collects its times,
	// counts for nothing at the end: never less than zero.
	r = benchResult{rate: n / elapsed.Seconds(), p50: pct(0.50), p99: pct(0.99),
		cpu: max(0, cpu1-cpu0) * 1000 / n, pgCPU: max(0, pg1-pg0) * 1000 / n}
	b.ReportMetric(r.rate, "cmds/s")
	b.ReportMetric(r.p50, "p50-ms")
	b.ReportMetric(r.p99, "p99-ms")
	b.ReportMetric(r.cpu, "cpu-ms/cmd")
	b.ReportMetric(r.pgCPU, "pg-cpu-ms/cmd")
	return r, true
}

// treeCPU returns the CPU seconds (user and system) spent so far by this
// process and its descendants, and by the Postgres servers among them
// (postmaster and backends). It counts a process's waited-for children
// too, so a backend that exits during a row still counts, through its
// postmaster. This process holds the senders, the embedded NATS server and
// the workers; the Postgres servers of earlier rows, idle, count as well.
func treeCPU() (all, postgres float64) {
	for _, p := range proccpu.Tree() {
		all += p.CPU + p.Waited
		if strings.HasPrefix(p.Name, "postgres") {
			postgres += p.CPU + p.Waited
		}
	}
	return all, postgres
}

func benchNATSRequest(b testing.TB) benchOp {
	_, _, nc := bustest.Server(b)
	sub, err := nc.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	require.NoError(b, err)
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	body := []byte(`{"id":"` + uuid.NewString() + `"}`)
	return func(ctx context.Context, _, _ int) error {
		_, err := nc.RequestWithContext(ctx, "bench.echo", body)
		return err
	}
}

// natsServer starts the benchmark's NATS server, without an fsync before
// each ack when skipFsync.
func natsServer(b testing.TB, skipFsync bool) (*server.Server, jetstream.JetStream, *nats.Conn) {
	return bustest.ServerWith(b, func(c *bus.EmbeddedConfig) { c.SkipFsync = skipFsync })
}

func benchJetStreamRequest(b testing.TB, skipFsync bool) benchOp {
	srv, js, nc := natsServer(b, skipFsync)
	wnc, wjs := bustest.Connect(b, srv)
	answer := func(_ context.Context, m jetstream.Msg) error {
		var cmd command.Command
		if err := json.Unmarshal(m.Data(), &cmd); err != nil {
			return bus.Permanent(err)
		}
		body, err := json.Marshal(command.Result{CommandID: cmd.ID})
		if err != nil {
			return err
		}
		return wnc.Publish(m.Headers().Get(command.ReplyHeader), body)
	}
	runWorkers(b, wjs, bus.RunnerConfig{Stream: bus.StreamCommands, Consumer: commands.Consumer,
		Handler: answer, Concurrency: benchConcurrency()})
	client, err := command.NewClient(nc, js, nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = client.Close() })
	return func(ctx context.Context, _, _ int) error {
		cmd, err := command.New(domain.AggregateSession, command.PauseSession, uuid.New(), "", nil)
		if err != nil {
			return err
		}
		_, err = client.Do(ctx, cmd)
		return err
	}
}

// runWorkers runs the runner and any other component until the benchmark
// ends.
func runWorkers(b testing.TB, js jetstream.JetStream, cfg bus.RunnerConfig, others ...func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = bus.Run(ctx, js, cfg) })
	for _, run := range others {
		wg.Go(func() { _ = run(ctx) })
	}
	b.Cleanup(func() { cancel(); wg.Wait() })
}

// durablePostgres starts a Postgres of the benchmark's own with fsync on,
// as in production, and returns the URL of its migrated database.
func durablePostgres(b testing.TB) string {
	b.Helper()
	ctx := context.Background()
	dir, err := testenv.TempDir("bench-pg")
	require.NoError(b, err)
	port, err := localserver.FreePort()
	require.NoError(b, err)
	pg, err := localserver.StartPostgres(ctx, localserver.PostgresConfig{Dir: filepath.Join(dir, "data"), Port: port, Durable: true})
	require.NoError(b, err)
	b.Cleanup(pg.Stop)
	require.NoError(b, pg.CreateDatabase(ctx, "agentbus"))
	_, err = migrations.Apply(ctx, pg.URL("agentbus"))
	require.NoError(b, err)
	return pg.URL("agentbus")
}

// sessionCycle is the commands that take a running session round to
// running again, and whether each is internal (sent without an owner).
// An ack step echoes the id of the command the session awaits.
var sessionCycle = []struct {
	name     string
	internal bool
	ack      domain.SidecarCommand
}{
	{command.PauseSession, false, ""},
	{command.ConfirmPaused, true, domain.SidecarPause},
	{command.ResumeSession, false, ""},
	{command.ConfirmResumed, true, domain.SidecarResume},
}

// benchSession is one running session, the next step of its cycle and
// the state the last step left.
type benchSession struct {
	id    uuid.UUID
	owner string
	step  int
	last  domain.AgentSessionSnapshot
}

// benchSessions starts the commands worker and the outbox publisher on
// dbURL and returns an operation that sends the next command of one of the
// sender's sessions.
func benchSessions(b testing.TB, dbURL string, skipFsync bool) benchOp {
	ctx := context.Background()
	concurrency := benchConcurrency()
	cfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(b, err)
	// Each handler holds a connection for its transaction; the outbox
	// sweep holds one more and queries with another.
	cfg.MaxConns = int32(concurrency + 2)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)

	srv, js, nc := natsServer(b, skipFsync)
	wnc, wjs := bustest.Connect(b, srv)
	sessionPool, err := domain.NewSessionPool(domain.SessionPoolConfig{})
	require.NoError(b, err)
	d := commands.NewDispatcher(pool, wnc, commands.Classify)
	commands.Register(d, nil, sessionPool)
	_, fjs := bustest.Connect(b, srv)
	forwarder, err := outbox.New(postgres.NewOutbox(pool), fjs)
	require.NoError(b, err)
	d.ForwardEvents(forwarder)
	runWorkers(b, wjs, bus.RunnerConfig{Stream: bus.StreamCommands, Consumer: commands.Consumer,
		Handler: d.Handle, Concurrency: concurrency}, forwarder.Run)
	client, err := command.NewClient(nc, js, nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = client.Close() })

	do := func(ctx context.Context, name string, id uuid.UUID, owner string, data any) (domain.AgentSessionSnapshot, error) {
		var snap domain.AgentSessionSnapshot
		cmd, err := command.New(domain.AggregateSession, name, id, owner, data)
		if err != nil {
			return snap, err
		}
		r, err := client.Do(ctx, cmd)
		if err != nil {
			return snap, err
		}
		if err := r.Err(); err != nil {
			return snap, fmt.Errorf("%s: %w", name, err)
		}
		if name != command.StartSession {
			err = json.Unmarshal(r.State, &snap)
		}
		return snap, err
	}

	// Every sender gets running sessions of its own owner.
	sessions := make([][]*benchSession, benchSenders)
	for s := range sessions {
		owner := uuid.NewString()
		for range benchSessionsPerSender {
			id := uuid.New()
			_, err := do(ctx, command.StartSession, id, owner, command.StartSessionData{
				WorkingDirectory: "/work/repo", Objective: "Keep the build green", BudgetCapUsd: domain.Dollars(5)})
			require.NoError(b, err)
			_, err = do(ctx, command.AllocateSession, id, "", nil)
			require.NoError(b, err)
			sessions[s] = append(sessions[s], &benchSession{id: id, owner: owner})
		}
	}

	return func(ctx context.Context, sender, i int) error {
		mine := sessions[sender]
		s := mine[i%len(mine)]
		step := sessionCycle[s.step%len(sessionCycle)]
		s.step++
		owner := s.owner
		if step.internal {
			owner = ""
		}
		var data any
		for _, a := range s.last.AwaitedAcks {
			if step.ack != "" && a.Command == step.ack {
				data = command.AckData{CommandID: a.CommandID}
			}
		}
		last, err := do(ctx, step.name, s.id, owner, data)
		s.last = last
		return err
	}
}
