package postgres_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/bus/outbox"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
)

// The crash tests run a second process: it commits a transaction with
// outbox rows, becomes the active outbox publisher, and is killed (SIGKILL)
// at the point under test. A publisher started afterwards must bring every
// event to AGENTS_EVENTS exactly once.

const (
	crashEnvDatabase = "AGENTBUS_CRASH_DATABASE_URL"
	crashEnvNATS     = "AGENTBUS_CRASH_NATS_URL"
	crashEnvRows     = "AGENTBUS_CRASH_ROWS"
	// crashEnvForward makes the process forward its rows as the commands
	// worker does, instead of sweeping them.
	crashEnvForward = "AGENTBUS_CRASH_FORWARD"
	// crashApp names the crashing process's database sessions.
	crashApp = "agentbus-crashing-publisher"
)

// TestOutboxCrashingProcess is the process the crash tests start and kill;
// run on its own it does nothing. It commits its rows in one transaction,
// says "committed", waits for a line on stdin, then publishes the outbox
// until it is killed.
func TestOutboxCrashingProcess(t *testing.T) {
	dbURL := os.Getenv(crashEnvDatabase)
	if dbURL == "" {
		t.Skip("started by the crash tests only")
	}
	ctx := context.Background()
	rows, err := strconv.Atoi(os.Getenv(crashEnvRows))
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	_, js, err := bus.Connect(ctx, os.Getenv(crashEnvNATS))
	require.NoError(t, err)

	agg := uuid.New()
	msgs := make([]postgres.OutboxMessage, rows)
	for i := range msgs {
		msgs[i] = outboxMsg(agg, i)
	}
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return postgres.WriteOutbox(ctx, tx, msgs)
	}))
	fmt.Println("committed")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	f := forwarder(t, pool, js)
	if os.Getenv(crashEnvForward) != "" {
		// Forgetting is left for later than the kill.
		f.ForgetDelay = time.Hour
		batch := make([]outbox.Message, len(msgs))
		for i, m := range msgs {
			batch[i] = m.Message()
		}
		require.NoError(t, f.Forward(ctx, batch))
		select {}
	}
	f.PollInterval = 20 * time.Millisecond
	_ = f.Run(ctx)
}

// crashingProcess is a running TestOutboxCrashingProcess.
type crashingProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startCrashingProcess starts the process and waits until it committed
// rows outbox rows.
func startCrashingProcess(t *testing.T, dbURL, natsURL string, rows int, env ...string) *crashingProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutboxCrashingProcess$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), env...),
		crashEnvDatabase+"="+dbURL+"&application_name="+crashApp,
		crashEnvNATS+"="+natsURL,
		crashEnvRows+"="+strconv.Itoa(rows))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &crashingProcess{cmd: cmd, stdin: stdin}
	t.Cleanup(p.kill)

	committed := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if lines.Text() == "committed" {
				close(committed)
			}
		}
	}()
	select {
	case <-committed:
	case <-time.After(60 * time.Second):
		t.Fatal("the crashing process did not commit")
	}
	return p
}

// publish lets the process start publishing.
func (p *crashingProcess) publish(t *testing.T) {
	_, err := io.WriteString(p.stdin, "go\n")
	require.NoError(t, err)
}

// kill kills the process with SIGKILL: no deferred call, no clean close.
func (p *crashingProcess) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// crashSessions counts the database sessions of the crashing process;
// leading also requires that one of them holds the publisher's lock.
func crashSessions(t *testing.T, pool *pgxpool.Pool, leading bool) int {
	q := "SELECT count(*) FROM pg_stat_activity a WHERE a.application_name = $1 AND a.datname = current_database()"
	if leading {
		q += " AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted)"
	}
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), q, crashApp).Scan(&n))
	return n
}

// afterDeath waits until the dead process's database sessions are gone.
// A session blocked on a lock notices that its client died only when it
// next reads from the socket, so it is terminated, as a server's client
// connection check would: whatever it was about to do never happens.
func afterDeath(t *testing.T, pool *pgxpool.Pool) {
	_, err := pool.Exec(context.Background(), `
		SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database()`, crashApp)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return crashSessions(t, pool, false) == 0 },
		30*time.Second, 20*time.Millisecond)
}

// restartPublisher runs a new publisher until the outbox is empty.
func restartPublisher(t *testing.T, pool *pgxpool.Pool, js jetstream.JetStream) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f := forwarder(t, pool, js)
		f.PollInterval = 50 * time.Millisecond
		_ = f.Run(ctx)
	}()
	require.Eventually(t, func() bool { return outboxCount(t, pool) == 0 }, 60*time.Second, 20*time.Millisecond)
	cancel()
	<-done
}

// requireOutboxRows returns the outbox's rows as event id -> body n.
func requireOutboxRows(t *testing.T, pool *pgxpool.Pool) map[string]int {
	rows, err := pool.Query(context.Background(), "SELECT id, payload->>'n' FROM outbox")
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var id uuid.UUID
		var n string
		require.NoError(t, rows.Scan(&id, &n))
		out[id.String()], err = strconv.Atoi(n)
		require.NoError(t, err)
	}
	require.NoError(t, rows.Err())
	return out
}

// assertEachOnce checks AGENTS_EVENTS against want (event id -> body n):
// every event once by Nats-Msg-Id, every body once, nothing else.
func assertEachOnce(t *testing.T, js jetstream.JetStream, want map[string]int) {
	ctx := context.Background()
	stream, err := js.Stream(ctx, "AGENTS_EVENTS")
	require.NoError(t, err)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	byID := map[string]int{}
	byBody := map[int]int{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		require.NoError(t, err)
		byID[m.Header.Get(jetstream.MsgIDHeader)]++
		var body struct{ N int }
		require.NoError(t, json.Unmarshal(m.Data, &body))
		byBody[body.N]++
	}
	assert.EqualValues(t, len(want), info.State.Msgs, "stored messages")
	for id, n := range want {
		assert.Equal(t, 1, byID[id], "messages with Nats-Msg-Id %s", id)
		assert.Equal(t, 1, byBody[n], "messages with body n=%d", n)
	}
	assert.Len(t, byID, len(want), "no message the outbox did not hold")
}

// TestOutboxCrashAfterCommitBeforePublish kills the active publisher's
// process after its transaction committed and before the rows were
// published (a lock the test holds on the outbox keeps them back). The next
// publisher takes the lock over and publishes each once.
func TestOutboxCrashAfterCommitBeforePublish(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.PostgresURL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	srv, js, _ := bustest.Server(t)

	proc := startCrashingProcess(t, dbURL, srv.ClientURL(), 100)
	want := requireOutboxRows(t, pool)
	require.Len(t, want, 100)
	older, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = older.Rollback(ctx) }()
	_, err = older.Exec(ctx, "LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	proc.publish(t)
	require.Eventually(t, func() bool { return crashSessions(t, pool, true) == 1 },
		30*time.Second, 20*time.Millisecond, "the process leads the publishers")
	time.Sleep(200 * time.Millisecond) // its first round waits for the lock

	proc.kill()
	afterDeath(t, pool)
	require.NoError(t, older.Rollback(ctx))
	assertEachOnce(t, js, map[string]int{})
	require.Equal(t, 100, outboxCount(t, pool), "committed and not published")

	restartPublisher(t, pool, js)
	assertEachOnce(t, js, want)
	assert.Equal(t, seq(0, 100), published(t, js), "in commit order")
}

// TestOutboxCrashAfterPublishBeforeDelete kills the active publisher's
// process after JetStream stored its atomic batch and before the rows were
// deleted (the rows are locked, so the delete waits). More rows commit
// before the next publisher starts: it resends the stored rows with the new
// ones, JetStream drops the duplicates, and each event is stored once.
func TestOutboxCrashAfterPublishBeforeDelete(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.PostgresURL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	srv, js, _ := bustest.Server(t)

	proc := startCrashingProcess(t, dbURL, srv.ClientURL(), 100)
	want := requireOutboxRows(t, pool)
	require.Len(t, want, 100)
	locker, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = locker.Rollback(ctx) }()
	_, err = locker.Exec(ctx, "SELECT position FROM outbox FOR UPDATE")
	require.NoError(t, err)

	proc.publish(t)
	awaitStored(t, js, 100, "the process published its rows")

	proc.kill()
	afterDeath(t, pool)
	require.NoError(t, locker.Rollback(ctx))
	require.Equal(t, 100, outboxCount(t, pool), "published and not deleted")

	commitMoreAndRestart(t, pool, js, want)
}

// TestOutboxCrashAfterForwardBeforeForget kills a process that forwarded
// its committed events, as the commands worker does, before it forgot
// their rows. The next publisher publishes them again with rows committed
// later; JetStream drops the duplicates and each event is stored once.
func TestOutboxCrashAfterForwardBeforeForget(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.PostgresURL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	srv, js, _ := bustest.Server(t)

	proc := startCrashingProcess(t, dbURL, srv.ClientURL(), 100, crashEnvForward+"=1")
	want := requireOutboxRows(t, pool)
	require.Len(t, want, 100)
	proc.publish(t)
	awaitStored(t, js, 100, "the process forwarded its rows")

	proc.kill()
	afterDeath(t, pool)
	require.Equal(t, 100, outboxCount(t, pool), "forwarded and not forgotten")

	commitMoreAndRestart(t, pool, js, want)
}

// awaitStored waits until AGENTS_EVENTS holds n events.
func awaitStored(t *testing.T, js jetstream.JetStream, n uint64, why string) {
	t.Helper()
	ctx := context.Background()
	stream, err := js.Stream(ctx, "AGENTS_EVENTS")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs == n
	}, 30*time.Second, 20*time.Millisecond, why)
}

// commitMoreAndRestart commits 50 more rows after the 100 of want, starts
// a fresh publisher and checks that it stores each of the 150 events once,
// in commit order.
func commitMoreAndRestart(t *testing.T, pool *pgxpool.Pool, js jetstream.JetStream, want map[string]int) {
	t.Helper()
	agg := uuid.New()
	later := make([]postgres.OutboxMessage, 50)
	for i := range later {
		later[i] = outboxMsg(agg, 100+i)
		want[later[i].ID.String()] = 100 + i
	}
	writeInTx(t, pool, later...)

	restartPublisher(t, pool, js)
	assertEachOnce(t, js, want)
	assert.Equal(t, seq(0, 150), published(t, js), "in commit order")
}

func seq(from, to int) []int {
	out := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
