package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// The short run of every `go test` kills a few components; `make chaos`
// asks for hundreds.
var (
	kills    = flag.Int("chaos.kills", 12, "how many processes to kill")
	seed     = flag.Uint64("chaos.seed", 0, "seed of the kills and the workload (0: a new one, printed)")
	gapMin   = flag.Duration("chaos.gap-min", 800*time.Millisecond, "shortest pause between two kills")
	gapMax   = flag.Duration("chaos.gap-max", 2*time.Second, "longest pause between two kills")
	sessions = flag.Int("chaos.sessions", 3, "sessions driven at once")
	fleet    = flag.Int("chaos.runners", 0, "runner processes that run the sidecars, killed like the rest, alone or with all their sidecars (0: the runtime worker runs them)")
)

// settle bounds how long the deployment may take to work through what
// the kills left it once they stop: generous, for a loaded machine.
const settle = 3 * time.Minute

func TestMain(m *testing.M) { testenv.Main(m) }

// TestChaos runs the deployment, kills random processes with SIGKILL while
// sessions stream raw events, take steering messages and are closed or
// cancelled, and then checks: every raw event a sidecar wrote is stored
// exactly once and in order, every command answered 2xx took effect
// exactly once (an accepted message reached the agent once, or its session
// ended before it could), every session comes to rest (none waits for an
// ack, none keeps a message pending) in the status its events lead to, a
// cancelled one ends cancelled or failed, and the transcript equals a
// rebuild from the raw events.
func TestChaos(t *testing.T) {
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos seed %d (replay: -chaos.seed %d -chaos.kills %d -chaos.runners %d)", s, s, *kills, *fleet)
	rng := rand.New(rand.NewPCG(s, 1))

	dir, err := testenv.TempDir("chaos")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bin, natsBin, err := Build(ctx, "../..", dir)
	require.NoError(t, err)
	d := &Deployment{Dir: dir, Bin: bin, NATSBin: natsBin, Secret: "chaos-secret-" + uuid.NewString(), Runners: *fleet,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	t.Cleanup(d.Stop)
	t.Cleanup(func() {
		// The deployment's directory goes with the test: keep its logs
		// of a failed run.
		if t.Failed() {
			keep, err := os.MkdirTemp("", fmt.Sprintf("agentbus-chaos-logs-%d-", s))
			if err == nil {
				err = os.CopyFS(keep, os.DirFS(filepath.Join(dir, "log")))
			}
			if err == nil {
				t.Logf("the deployment's logs: %s", keep)
			} else {
				t.Logf("the deployment's logs not kept: %v", err)
			}
		}
	})
	require.NoError(t, d.Start(ctx, "../../nats/users.conf"), "deployment logs in %s", filepath.Join(dir, "log"))

	owner := uuid.NewString()
	token, err := api.NewToken(d.Secret, owner, 2*time.Hour)
	require.NoError(t, err)
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(d.RedisURL, "redis://"), "/0")})
	defer rdb.Close()
	w := &Workload{API: d.APIURL, Token: token, Owner: owner, Workspace: filepath.Join(dir, "workspace"),
		Concurrent: *sessions, Messages: 8, Rand: rand.New(rand.NewPCG(rng.Uint64(), 2)),
		Poison: func(ctx context.Context, session string) error { return poison(ctx, rdb, session) }}
	// Every session driven at once holds a slot of the pool.
	require.True(t, w.send(ctx, http.MethodPut, "/api/agents/pool", map[string]any{"maxConcurrentSessions": *sessions + 5}, nil),
		"size the pool")
	wctx, stopWorkload := context.WithCancel(ctx)
	workloadDone := make(chan struct{})
	go func() { defer close(workloadDone); w.Run(wctx) }()

	// Kill once sessions run, at random moments.
	require.Eventually(t, func() bool {
		pids, err := d.SidecarPIDs(ctx)
		return err == nil && len(pids) > 0
	}, settle, 200*time.Millisecond, "a sidecar runs")
	killed := map[string]int{}
	started := time.Now()
	for n := 0; n < *kills; {
		components := d.Components()
		slices.Sort(components)
		name := components[rng.IntN(len(components))]
		ok, err := d.Kill(ctx, name)
		require.NoError(t, err, "kill %s", name)
		if ok {
			killed[name]++
			n++
		}
		time.Sleep(*gapMin + time.Duration(rng.Int64N(int64(*gapMax-*gapMin)+1)))
	}
	t.Logf("%d kills in %s", *kills, time.Since(started).Round(time.Second))
	stopWorkload()
	<-workloadDone
	require.NoError(t, d.waitReady(ctx))

	nc, err := nats.Connect(d.NATSURL, nats.UserInfo("operator", d.Password("operator")), nats.MaxReconnects(-1))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, d.DBURL)
	require.NoError(t, err)
	defer pool.Close()

	started2 := w.Sessions()
	var ids []string
	for _, s := range started2 {
		ids = append(ids, s.ID)
	}
	require.NotEmpty(t, ids, "sessions were started")

	// The messages a session accepted reach it, unless it ended first,
	// and no session waits for an ack that will not come.
	waitSettled(t, ctx, w, js, started2)
	written, got, err := settleRaw(ctx, js, rdb, ids, time.Now().Add(settle))
	require.NoError(t, err)

	var total RawCount
	for _, id := range ids {
		c := countRaw(written[id], got[id])
		total.Written += c.Written
		total.Found += c.Found
		total.Lost += c.Lost
		total.Doubled += c.Doubled
		total.OutOfOrder += c.OutOfOrder
		total.Phantom += c.Phantom
		assert.Zero(t, c.Lost+c.Doubled+c.OutOfOrder+c.Phantom, "session %s raw events: %+v", id, c)
	}
	var table strings.Builder
	Table(&table, killed, total)
	t.Logf("seed %d\n%s", s, table.String())
	fmt.Printf("chaos seed %d\n%s", s, table.String())
	assert.Positive(t, total.Written, "the sessions streamed")

	// Every 2xx command took effect once: each session once, each
	// accepted message once in its queue and, once delivered, once at
	// the agent.
	messages, cancelled := 0, 0
	for _, s := range started2 {
		var q queue
		require.True(t, w.get(ctx, "/api/agents/sessions/"+s.ID+"/messages/queue", &q), "queue of %s", s.ID)
		var sess struct {
			Status string `json:"status"`
		}
		require.True(t, w.get(ctx, "/api/agents/sessions/"+s.ID, &sess), "session %s", s.ID)
		inQueue := map[string]int{}
		status := map[string]string{}
		for _, m := range q.Messages {
			inQueue[m.MessageID]++
			status[m.MessageID] = m.Status
		}
		delivered := deliveredIDs(got[s.ID])
		for _, id := range s.Messages {
			messages++
			assert.Equal(t, 1, inQueue[id], "session %s: accepted message %s in its queue", s.ID, id)
			switch status[id] {
			case string(domain.MessageDelivered):
				assert.Equal(t, 1, delivered[id], "session %s: delivered message %s reached the agent once", s.ID, id)
			case string(domain.MessagePending):
				// Only a session that ended before it could take the
				// message leaves it pending.
				assert.True(t, domain.SessionStatus(sess.Status).IsTerminal(),
					"session %s: message %s pending while the session is %s", s.ID, id, sess.Status)
				fallthrough
			default:
				assert.Zero(t, delivered[id], "session %s: message %s is %s but reached the agent", s.ID, id, status[id])
			}
		}
		if s.Cancelled {
			cancelled++
			assert.Contains(t, []string{string(domain.StatusCancelled), string(domain.StatusFailed)}, sess.Status,
				"session %s: a cancel was accepted; it ends cancelled, or failed when its sidecar died while stopping", s.ID)
		}
	}
	t.Logf("%d sessions (%d cancelled, %d with poison raw events), %d accepted messages, %d refused requests",
		len(started2), cancelled, w.Poisoned(), messages, w.Refused())
	failed := failures(ctx, w, started2)
	fmt.Printf("%d failed sessions\n", len(failed))
	for _, f := range failed {
		fmt.Printf("  %s  %s: %s (cancel accepted: %v)\n", f.id, f.reason, f.message, f.cancelled)
	}
	// Counted, not hidden by the retries: an api whose dependencies were
	// just killed answers 503.
	fmt.Printf("5xx answers (each repeated with its Idempotency-Key): %v\n", w.ServerErrors())
	// What no handler took, by consumer and error: a poison raw event is
	// expected there, a lost event of a healthy session is not.
	dead, err := deadLetters(ctx, js)
	require.NoError(t, err)
	reasons := slices.Sorted(maps.Keys(dead))
	fmt.Printf("%d kinds of dead-lettered messages\n", len(reasons))
	for _, r := range reasons {
		fmt.Printf("  %5d  %s\n", dead[r], r)
	}

	// Each session is in the status its events lead to, and no domain
	// event is stored twice.
	events, err := readDomain(ctx, js)
	require.NoError(t, err)
	for _, id := range ids {
		seen := map[string]bool{}
		for _, ev := range events[id] {
			assert.False(t, seen[ev.ID], "session %s: event %s (%s) stored twice", id, ev.ID, ev.Type)
			seen[ev.ID] = true
		}
		want, unknown := explainedStatus(events[id])
		assert.Empty(t, unknown, "session %s: an event the check does not fold", id)
		var sess struct {
			Status string `json:"status"`
		}
		require.True(t, w.get(ctx, "/api/agents/sessions/"+id, &sess))
		assert.Equal(t, string(want), sess.Status, "session %s: status explained by its events", id)
	}

	// The transcript equals its rebuild from the raw events: the rows
	// the raw events make are deleted and the stream replayed from its
	// start, as a rebuild of the projection does.
	// The transcript worker has projected every raw event before its rows
	// are read: a session's last events may still be on their way.
	require.Eventually(t, func() bool {
		c, err := js.Consumer(ctx, "AGENTS_SIDECAR_EVENTS", "transcript")
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}, settle, time.Second, "the transcript worker did not catch up with the raw events")
	live := map[string]map[string][][]any{}
	for _, id := range ids {
		live[id], err = transcriptRows(ctx, pool, id)
		require.NoError(t, err)
	}
	require.NoError(t, deleteTranscripts(ctx, pool, ids))
	require.NoError(t, rebuildTranscript(ctx, js, pool))
	for _, id := range ids {
		again, err := transcriptRows(ctx, pool, id)
		require.NoError(t, err)
		for _, tb := range projectedTables {
			if !reflect.DeepEqual(live[id][tb.name], again[tb.name]) {
				t.Errorf("the transcript differs from its rebuild: session %s, %s: %d rows live, %d rebuilt; first difference:\n%s",
					id, tb.name, len(live[id][tb.name]), len(again[tb.name]), firstDifference(live[id][tb.name], again[tb.name]))
			}
		}
	}
}

// failure is a Failed session and why.
type failure struct {
	id, reason, message string
	cancelled           bool
}

// failures lists the sessions that ended Failed, with their reasons.
func failures(ctx context.Context, w *Workload, sessions []*Session) []failure {
	var out []failure
	for _, s := range sessions {
		var sess struct {
			Status  string `json:"status"`
			Failure *struct {
				Reason  string `json:"reason"`
				Message string `json:"message"`
			} `json:"failure"`
		}
		if !w.get(ctx, "/api/agents/sessions/"+s.ID, &sess) || sess.Status != string(domain.StatusFailed) {
			continue
		}
		f := failure{id: s.ID, cancelled: s.Cancelled, reason: "(no reason recorded)"}
		if sess.Failure != nil {
			f.reason, f.message = sess.Failure.Reason, sess.Failure.Message
		}
		out = append(out, f)
	}
	return out
}

// poison writes into the session's raw event stream what a faulty or
// hostile agent could: an event whose data is not JSON, and a message whose
// text no database takes (a NUL). Each is recorded and dead-lettered; the
// session's later events flow.
//
// Only an agent writes raw events, so they are written once the session's
// sidecar has written to its stream, as the agent's would be: a session
// cancelled before it ran has no sidecar, its stream is never relayed,
// and what the check would find written there no sidecar wrote. Such a
// session gets none (errNotStarted).
func poison(ctx context.Context, rdb *redis.Client, session string) error {
	if err := awaitSidecar(ctx, rdb, session); err != nil {
		return err
	}
	for _, e := range []struct{ typ, data string }{
		{"assistant_message", `{"message_id":"poison","block_type":"text","text":`},
		{"assistant_message", `{"message_id":"poison","block_type":"text","text":"a NUL \u0000 here"}`},
	} {
		err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: protocol.EventsKey(session), Values: []any{
			"type", e.typ, "data", e.data, "ts", strconv.FormatInt(time.Now().UnixMilli(), 10)}}).Err()
		if err != nil {
			return err
		}
	}
	return nil
}

// errNotStarted is a session whose sidecar did not write within
// sidecarStart.
var errNotStarted = errors.New("the session's sidecar did not start")

// sidecarStart bounds how long poison waits for a session's sidecar.
const sidecarStart = 15 * time.Second

// awaitSidecar waits until the session's sidecar wrote its first event
// (session_started), at most sidecarStart.
func awaitSidecar(ctx context.Context, rdb *redis.Client, session string) error {
	deadline := time.Now().Add(sidecarStart)
	for {
		n, err := rdb.XLen(ctx, protocol.EventsKey(session)).Result()
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errNotStarted
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

type queue struct {
	Messages []struct {
		MessageID string `json:"messageId"`
		Status    string `json:"status"`
	} `json:"messages"`
}

// unsettled lists what keeps a session from rest: an intermediate status
// (a stop, pause or interrupt that no ack ended), a message accepted and
// still pending while the session lives to take it, or one pending that
// reached the agent (delivered counts its message_delivered raw events).
func unsettled(ctx context.Context, w *Workload, s *Session, delivered map[string]int) []string {
	var q queue
	var sess struct {
		Status string `json:"status"`
	}
	for _, read := range []struct {
		path string
		out  any
	}{{"/api/agents/sessions/" + s.ID, &sess}, {"/api/agents/sessions/" + s.ID + "/messages/queue", &q}} {
		code, raw, err := w.call(ctx, http.MethodGet, read.path, nil, "")
		if err != nil || code != http.StatusOK || json.Unmarshal(raw, read.out) != nil {
			return []string{fmt.Sprintf("GET %s: %d %.200s %v", read.path, code, raw, err)}
		}
	}
	status := domain.SessionStatus(sess.Status)
	var out []string
	if status.IsIntermediate() {
		out = append(out, "still "+sess.Status)
	}
	for _, m := range q.Messages {
		switch {
		case m.Status != string(domain.MessagePending):
		case delivered[m.MessageID] > 0:
			out = append(out, fmt.Sprintf("message %s reached the agent, still pending", m.MessageID))
		case !status.IsTerminal():
			out = append(out, fmt.Sprintf("message %s still pending while %s", m.MessageID, sess.Status))
		}
	}
	return out
}

// waitSettled waits until every session is at rest (see unsettled), and
// fails on those that are not once settle has passed.
func waitSettled(t *testing.T, ctx context.Context, w *Workload, js jetstream.JetStream, sessions []*Session) {
	deadline := time.Now().Add(settle)
	for {
		raw, err := readRaw(ctx, js)
		require.NoError(t, err)
		left := map[string][]string{}
		for _, s := range sessions {
			if u := unsettled(ctx, w, s, deliveredIDs(raw[s.ID])); len(u) > 0 {
				left[s.ID] = u
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for id, u := range left {
				t.Errorf("session %s not at rest after %s: %s", id, settle, strings.Join(u, "; "))
			}
			return
		}
		time.Sleep(time.Second)
	}
}

// firstDifference shows the first row where two tables differ.
func firstDifference(a, b [][]any) string {
	for i := range max(len(a), len(b)) {
		var x, y []any
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if !reflect.DeepEqual(x, y) {
			return fmt.Sprintf("row %d\nlive:    %v\nrebuilt: %v", i, x, y)
		}
	}
	return ""
}
