package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/internal/uptest"
	"github.com/agentbus/agentbus/relay"
)

// The steering benchmark's knobs, read from the environment so that `make
// bench` stays short and a bigger run needs no code change.
const (
	// envSteeringSessions lists the numbers of live sessions to measure at
	// (comma-separated, increasing). Default "10,100".
	envSteeringSessions = "AGENTBUS_BENCH_SESSIONS"
	// envSteeringHistory lists the numbers of messages each sampled
	// session already holds (comma-separated, increasing), measured at the
	// largest number of sessions. Default "0,100".
	envSteeringHistory = "AGENTBUS_BENCH_HISTORY"
	// envSteeringHold, when set, adds a row measured while a write
	// transaction stays open elsewhere on the Postgres server.
	envSteeringHold = "AGENTBUS_BENCH_HOLD_TX"
	// envSteeringPlot is where the PNG plot is written. Default
	// steering.png in the package's folder.
	envSteeringPlot = "AGENTBUS_BENCH_PLOT"
	// steeringSampled is how many of the live sessions are steered; the
	// others are live and idle.
	steeringSampled = 8
)

func envInts(b *testing.B, name, def string) []int {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(b, err, "%s=%q", name, v)
		out = append(out, n)
	}
	require.True(b, slices.IsSorted(out), "%s=%q: increasing numbers", name, v)
	return out
}

// steeringStack is an `up` in external-sidecar mode with the benchmark
// playing every session's sidecar.
type steeringStack struct {
	*externalUp
	ids []string

	// sent holds the POST time of each message by its number; got receives
	// the number of each steering_message the sidecar sees.
	mu   sync.Mutex
	sent map[int]time.Time
	got  chan delivery
	// own counts the Redis commands the benchmark itself sends as the
	// sidecars, to leave them out of the stack's count.
	own  atomic.Int64
	next atomic.Int64
	// clock marks each message's stages on the way, for the per-hop
	// breakdown.
	clock *hopClock
}

type delivery struct {
	n  int
	at time.Duration
}

// externalUp is an `up` in external-sidecar mode, started in-process for
// a benchmark that plays the sessions' sidecars itself, with clients of
// its NATS (the relay's sessions bucket) and Redis.
type externalUp struct {
	base, token, dataDir, owner, dbURL string
	ctx                                context.Context
	nc                                 *nats.Conn
	js                                 jetstream.JetStream
	kv                                 jetstream.KeyValue
	rdb                                *redis.Client
}

// startExternalUp starts it with its data under a temp dir named prefix
// and the extra flags given; it stops when the benchmark ends.
func startExternalUp(b *testing.B, prefix string, flags ...string) *externalUp {
	dataDir, err := testenv.TempDir(prefix)
	require.NoError(b, err)
	b.Setenv("AGENTBUS_JWT_SECRET", runtimeSecret)
	b.Setenv("AGENTBUS_RUNTIME", "external")
	b.Setenv("AGENTBUS_ENGINE", "")
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(b))
	natsPort, redisPort := freePort(b), freePort(b)
	dbURL := benchDatabase(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runUp(ctx, append([]string{"--data-dir", dataDir, "--http", httpAddr,
			"--nats-port", fmt.Sprint(natsPort), "--nats-monitor-port", "0",
			"--database-url", dbURL, "--redis-port", fmt.Sprint(redisPort), "--redis-url", "", "--nats-url", ""}, flags...))
	}()
	b.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(2 * wait):
			b.Error("up did not stop")
		}
	})
	u := &externalUp{base: "http://" + httpAddr, dataDir: dataDir, owner: uuid.NewString(), dbURL: dbURL, ctx: ctx}
	require.Eventually(b, func() bool {
		resp, err := http.Get(u.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 90*time.Second, 100*time.Millisecond)
	u.token, err = api.NewToken(runtimeSecret, u.owner, time.Hour)
	require.NoError(b, err)
	nc, err := nats.Connect(uptest.Credentials(b, dataDir)["NATS_URL"])
	require.NoError(b, err)
	b.Cleanup(nc.Close)
	u.js, err = jetstream.New(nc)
	require.NoError(b, err)
	u.kv, err = relay.SessionsKV(ctx, u.js)
	require.NoError(b, err)
	u.nc = nc
	u.rdb = uptest.RedisOf(b, dataDir, 64)
	return u
}

func startSteeringStack(b *testing.B) *steeringStack {
	u := startExternalUp(b, "steerbench")
	return &steeringStack{externalUp: u, sent: map[int]time.Time{}, got: make(chan delivery, 1024), clock: newHopClock(b, u.nc)}
}

func (st *steeringStack) do(b *testing.B, method, path, body string, want int) map[string]any {
	req, err := http.NewRequest(method, st.base+path, strings.NewReader(body))
	require.NoError(b, err)
	req.Header.Set("Authorization", "Bearer "+st.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	require.Equal(b, want, resp.StatusCode, "%s %s: %v", method, path, out)
	return out
}

// grow starts sessions until n are live, each read by the relay, and
// waits until they run.
func (st *steeringStack) grow(b *testing.B, n int) {
	for len(st.ids) < n {
		i := len(st.ids)
		body := fmt.Sprintf(`{"workingDirectory":%q,"objective":"Steer","budgetCapUsd":5}`,
			st.dataDir+"/workspace/"+st.owner+"/s"+strconv.Itoa(i))
		out := st.do(b, http.MethodPost, "/api/agents/sessions", body, http.StatusCreated)
		id, _ := out["session"].(map[string]any)["id"].(string)
		require.NotEmpty(b, id)
		require.NoError(b, relay.Activate(st.ctx, st.kv, id))
		st.ids = append(st.ids, id)
		if i < steeringSampled {
			st.playSidecar(b, id)
		}
	}
	for _, id := range st.ids[:min(n, steeringSampled)] {
		require.Eventually(b, func() bool {
			out := st.do(b, http.MethodGet, "/api/agents/sessions/"+id, "", http.StatusOK)
			s, _ := out["session"].(map[string]any)
			if s == nil {
				s = out
			}
			return s["status"] == "Running"
		}, 2*wait, 20*time.Millisecond, "session %s runs", id)
	}
}

// playSidecar reads the session's command stream as its sidecar does and
// answers each steering message with message_delivered.
func (st *steeringStack) playSidecar(b *testing.B, id string) {
	go func() {
		last := "$"
		for st.ctx.Err() == nil {
			st.own.Add(1)
			res, err := st.rdb.XRead(st.ctx, &redis.XReadArgs{Streams: []string{relay.CommandsKey(id), last}, Block: time.Second}).Result()
			if err != nil {
				continue
			}
			now := time.Now()
			for _, e := range res[0].Messages {
				last = e.ID
				if e.Values["type"] != "steering_message" {
					continue
				}
				var m struct {
					MessageID string `json:"message_id"`
					Content   string `json:"content"`
					Priority  string `json:"priority"`
				}
				data, _ := e.Values["data"].(string)
				if json.Unmarshal([]byte(data), &m) != nil {
					continue
				}
				if n := itemNumber(m.Content); n >= 0 {
					st.mu.Lock()
					sent, ok := st.sent[n]
					delete(st.sent, n)
					st.mu.Unlock()
					if ok {
						st.clock.mark(n, func(h *hopMarks) { h.posted, h.redis = sent, now })
						st.got <- delivery{n: n, at: now.Sub(sent)}
					}
				}
				raw, _ := json.Marshal(map[string]string{"message_id": m.MessageID, "priority": m.Priority})
				st.own.Add(1)
				_ = st.rdb.XAdd(st.ctx, &redis.XAddArgs{Stream: relay.EventsKey(id), Values: []any{
					"type", "message_delivered", "ts", strconv.FormatInt(time.Now().UnixMilli(), 10), "data", string(raw)}}).Err()
			}
		}
	}()
}

// enqueue posts a message to a session, waiting and trying again while
// the session's rate limit refuses it (429); before each try it calls
// sending.
func (st *steeringStack) enqueue(b *testing.B, id, body string, sending func()) {
	for {
		sending()
		req, err := http.NewRequest(http.MethodPost, st.base+"/api/agents/sessions/"+id+"/messages/queue", strings.NewReader(body))
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+st.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			time.Sleep(max(time.Duration(wait)*time.Second, 100*time.Millisecond))
			continue
		}
		require.Equal(b, http.StatusCreated, resp.StatusCode, "POST %s: %v", id, out)
		return
	}
}

// steer posts one Immediate message to session i of the sampled ones and
// returns its number and its latency to the sidecar's command stream.
func (st *steeringStack) steer(b *testing.B, i int) (int, time.Duration) {
	n := int(st.next.Add(1))
	id := st.ids[i%min(len(st.ids), steeringSampled)]
	st.enqueue(b, id, fmt.Sprintf(`{"content":"Steer n=%d","priority":"Immediate"}`, n), func() {
		st.mu.Lock()
		st.sent[n] = time.Now()
		st.mu.Unlock()
	})
	for {
		select {
		case d := <-st.got:
			if d.n == n {
				return n, d.at
			}
		case <-time.After(2 * wait):
			b.Fatalf("message %d never reached the sidecar", n)
		}
	}
}

// history brings every sampled session to h messages, several sessions at
// once.
func (st *steeringStack) history(b *testing.B, h int, have int) {
	var wg sync.WaitGroup
	sampled := min(len(st.ids), steeringSampled)
	for s := range sampled {
		wg.Go(func() {
			for range h - have {
				n := int(st.next.Add(1))
				st.enqueue(b, st.ids[s], fmt.Sprintf(`{"content":"History n=%d","priority":"Immediate"}`, n), func() {})
			}
		})
	}
	wg.Wait()
	st.settle(b)
}

// settle waits until the stack stores nothing more on JetStream for a
// second: the deliveries of the messages just posted are all confirmed,
// so a row measures the history, not the backlog of its making.
func (st *steeringStack) settle(b *testing.B) {
	last := st.counters(b).jsStored
	for quiet := 0; quiet < 4; {
		time.Sleep(250 * time.Millisecond)
		now := st.counters(b).jsStored
		if now == last {
			quiet++
		} else {
			quiet, last = 0, now
		}
	}
}

// counters are what the stack did, read before and after a row.
type counters struct {
	jsStored      uint64 // messages stored on every stream
	pgXacts       int64  // Postgres transactions
	pgStatements  int64  // Postgres statements, BEGIN and COMMIT included
	pgTuples      int64  // rows inserted, updated and deleted
	redisCommands int64
	// diskFlushes are the flushes the disk completed (see diskFlushes):
	// the fsyncs of JetStream and Redis, and anything else on the machine.
	diskFlushes int64
}

func (st *steeringStack) counters(b *testing.B) counters {
	var c counters
	lister := st.js.ListStreams(st.ctx)
	for info := range lister.Info() {
		if info.Config.Name != rttStream && !strings.HasPrefix(info.Config.Name, "SKEL_") {
			c.jsStored += info.State.LastSeq
		}
	}
	require.NoError(b, lister.Err())
	conn, err := pgx.Connect(st.ctx, st.dbURL)
	require.NoError(b, err)
	defer conn.Close(st.ctx)
	require.NoError(b, conn.QueryRow(st.ctx, `
		SELECT xact_commit + xact_rollback, tup_inserted + tup_updated + tup_deleted
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&c.pgXacts, &c.pgTuples))
	c.pgStatements, err = pgStatements(st.ctx, conn)
	require.NoError(b, err)
	c.diskFlushes = diskFlushes(st.dataDir)
	info, err := st.rdb.Info(st.ctx, "stats").Result()
	require.NoError(b, err)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			c.redisCommands, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	c.redisCommands -= st.own.Load()
	return c
}

// rttStream is the stream of the JetStream round trip baseline.
const rttStream = "BENCH_RTT"

// baselines measures n bare Redis XADD→XREAD round trips and n JetStream
// publish→ack round trips (stored and fsynced, as every agentbus publish)
// on the same servers.
func (st *steeringStack) baselines(b *testing.B, n int) (redisRTT, jsRTT []time.Duration) {
	ctx := st.ctx
	key := "bench:rtt:" + uuid.NewString()
	reader := redis.NewClient(st.rdb.Options())
	defer reader.Close()
	// Each read starts after the last entry, so it never misses the next
	// one, whether it starts blocking before or after the write.
	last, err := st.rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"n", 0}}).Result()
	require.NoError(b, err)
	for range n {
		got := make(chan time.Time, 1)
		go func() {
			res, err := reader.XRead(ctx, &redis.XReadArgs{Streams: []string{key, last}, Block: 10 * time.Second}).Result()
			if err == nil {
				last = res[0].Messages[0].ID
			}
			got <- time.Now()
		}()
		time.Sleep(200 * time.Microsecond) // most reads are waiting before the write
		start := time.Now()
		require.NoError(b, st.rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"n", 1}}).Err())
		redisRTT = append(redisRTT, (<-got).Sub(start))
	}
	_, err = st.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: rttStream, Subjects: []string{"bench.rtt"}, Storage: jetstream.FileStorage})
	require.NoError(b, err)
	for range n {
		start := time.Now()
		_, err := st.js.Publish(ctx, "bench.rtt", []byte("ping"))
		require.NoError(b, err)
		jsRTT = append(jsRTT, time.Since(start))
	}
	return redisRTT, jsRTT
}

// steeringRow is one measured row.
type steeringRow struct {
	sessions, history int
	held              bool
	p50, p99, max     float64 // milliseconds
	redis99, js99     float64
	// The skeleton's latency in the same run (see skeleton), and the p50
	// of each hop and part of ours and of the skeleton's.
	skel50, skel99, skelMax float64
	// The skeleton's latency when it also does the durable work of each
	// message's confirmation, as ours does (see skeleton's confirm).
	skelC50, skelC99, skelCMax float64
	hop50, skelHop50           [hopCount]float64
	part50, skelPart50         [partCount]float64
	skelTx50                   float64
}

func quantiles(lat []time.Duration) (p50, p99, mx float64) {
	s := slices.Clone(lat)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return ms(s[int(0.50*float64(len(s)-1))]), ms(s[int(0.99*float64(len(s)-1))]), ms(s[len(s)-1])
}

// BenchmarkSteering measures steering end to end on `up` in
// external-sidecar mode: POST .../messages/queue with an Immediate message
// until the steering_message entry appears on the session's Redis command
// stream, with the benchmark playing each session's sidecar (it answers
// message_delivered). Rows vary the live sessions (envSteeringSessions),
// the messages each steered session already holds (envSteeringHistory),
// and, with envSteeringHold, a write transaction held open elsewhere on
// the server. Each row prints p50/p99/max beside a bare Redis XADD→XREAD
// and a JetStream publish→ack round trip measured in the same run, and
// what the stack did per message: JetStream messages stored, Postgres
// transactions, statements and rows written, Redis commands (the
// benchmark's own as the sidecar left out), flushes of the disk, and the
// p50/p99 of each hop of the way (see
// hopNames: api, commands worker, sending to the sidecar, relay), which
// add up to the total, and of the event's publication; the worker and
// relay hops are split further into the store of the message they take,
// its delivery to their pull consumer and their own work (see partNames).
// Each row also steers as many messages through the skeleton of the same
// pipeline (see skeleton), right after ours, and prints its p50/p99/max
// and hops (skel-…) and the ratios ours/skeleton, then as many again with
// the skeleton also doing the durable work of each message's confirmation
// (skel+confirm-…, see skeleton's confirm), as ours does while the next
// message is on its way; a table of both closes the output.
// b.N is the number of messages per row. A PNG plot
// of latency against sessions and history is written to envSteeringPlot.
func BenchmarkSteering(b *testing.B) {
	sessions := envInts(b, envSteeringSessions, "10,100")
	histories := envInts(b, envSteeringHistory, "0,100")
	st := startSteeringStack(b)
	skel := startSkeleton(b, st, steeringSampled, true)
	var rows []steeringRow

	measure := func(b *testing.B, row steeringRow) {
		// Warm up: one message per sampled session.
		for i := range min(len(st.ids), steeringSampled) {
			n, _ := st.steer(b, i)
			st.clock.take(n)
		}
		time.Sleep(1500 * time.Millisecond) // Postgres publishes its statistics at most once a second
		before := st.counters(b)
		lat := make([]time.Duration, 0, b.N)
		ns := make([]int, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			n, d := st.steer(b, i)
			lat = append(lat, d)
			ns = append(ns, n)
		}
		b.StopTimer()
		time.Sleep(1500 * time.Millisecond)
		after := st.counters(b)
		var hops [hopCount + 1][]time.Duration
		var parts [partCount][]time.Duration
		for _, n := range ns {
			marks := st.clock.take(n)
			if h, ok := marks.hops(); ok {
				for i, d := range h {
					hops[i] = append(hops[i], d)
				}
			}
			if p, ok := marks.parts(); ok {
				for i, d := range p {
					parts[i] = append(parts[i], d)
				}
			}
		}
		redisRTT, jsRTT := st.baselines(b, max(b.N, 100))
		// The skeleton right after ours, as many messages: the counts
		// above are of ours alone, and the stack's own periodic work
		// counts per message only over ours' time.
		skel.measure(b, &row)
		row.p50, row.p99, row.max = quantiles(lat)
		r50, r99, rmax := quantiles(redisRTT)
		j50, j99, jmax := quantiles(jsRTT)
		row.redis99, row.js99 = r99, j99
		per := func(d float64) float64 { return d / float64(b.N) }
		b.ReportMetric(row.p50, "p50-ms")
		b.ReportMetric(row.p99, "p99-ms")
		b.ReportMetric(row.max, "max-ms")
		b.ReportMetric(r50, "redis-rtt-p50-ms")
		b.ReportMetric(r99, "redis-rtt-p99-ms")
		b.ReportMetric(rmax, "redis-rtt-max-ms")
		b.ReportMetric(j50, "js-rtt-p50-ms")
		b.ReportMetric(j99, "js-rtt-p99-ms")
		b.ReportMetric(jmax, "js-rtt-max-ms")
		for i, name := range hopNames {
			if len(hops[i]) == 0 {
				continue
			}
			h50, h99, _ := quantiles(hops[i])
			if i < hopCount {
				row.hop50[i] = h50
			}
			b.ReportMetric(h50, name+"-p50-ms")
			b.ReportMetric(h99, name+"-p99-ms")
		}
		for i, name := range partNames {
			if len(parts[i]) == 0 {
				continue
			}
			p50, p99, _ := quantiles(parts[i])
			row.part50[i] = p50
			b.ReportMetric(p50, name+"-p50-ms")
			b.ReportMetric(p99, name+"-p99-ms")
		}
		b.ReportMetric(per(float64(after.jsStored-before.jsStored)), "js-stored/msg")
		b.ReportMetric(per(float64(after.pgXacts-before.pgXacts)), "pg-xacts/msg")
		b.ReportMetric(per(float64(after.pgStatements-before.pgStatements)), "pg-statements/msg")
		if before.diskFlushes >= 0 && after.diskFlushes >= 0 {
			b.ReportMetric(per(float64(after.diskFlushes-before.diskFlushes)), "disk-flushes/msg")
		}
		b.ReportMetric(per(float64(after.pgTuples-before.pgTuples)), "pg-rows/msg")
		b.ReportMetric(per(float64(after.redisCommands-before.redisCommands)), "redis-cmds/msg")
		b.ReportMetric(row.skel50, "skel-p50-ms")
		b.ReportMetric(row.skel99, "skel-p99-ms")
		b.ReportMetric(row.skelMax, "skel-max-ms")
		b.ReportMetric(row.p50/row.skel50, "ours/skel-p50")
		b.ReportMetric(row.p99/row.skel99, "ours/skel-p99")
		b.ReportMetric(row.p50/row.skelC50, "ours/skel+confirm-p50")
		b.ReportMetric(row.p99/row.skelC99, "ours/skel+confirm-p99")
		b.ReportMetric(0, "ns/op")
		rows = append(rows, row)
	}

	for _, n := range sessions {
		b.Run(fmt.Sprintf("sessions=%d/history=0", n), func(b *testing.B) {
			st.grow(b, n)
			measure(b, steeringRow{sessions: n})
		})
	}
	most := sessions[len(sessions)-1]
	have := 0
	for _, h := range histories {
		if h == 0 {
			continue
		}
		b.Run(fmt.Sprintf("sessions=%d/history=%d", most, h), func(b *testing.B) {
			st.grow(b, most)
			st.history(b, h, have)
			have = h
			measure(b, steeringRow{sessions: most, history: h})
		})
	}
	if os.Getenv(envSteeringHold) != "" {
		b.Run(fmt.Sprintf("sessions=%d/history=%d/held-transaction", most, have), func(b *testing.B) {
			st.grow(b, most)
			conn, err := pgx.Connect(st.ctx, st.dbURL)
			require.NoError(b, err)
			defer conn.Close(st.ctx)
			tx, err := conn.Begin(st.ctx)
			require.NoError(b, err)
			defer func() { _ = tx.Rollback(st.ctx) }()
			_, err = tx.Exec(st.ctx, "CREATE TEMP TABLE held (n int); INSERT INTO held VALUES (1)")
			require.NoError(b, err)
			measure(b, steeringRow{sessions: most, history: have, held: true})
		})
	}
	path := os.Getenv(envSteeringPlot)
	if path == "" {
		path = "steering.png"
	}
	if err := plotSteering(path, latestRows(rows)); err != nil {
		b.Fatalf("plot: %v", err)
	}
	var out bytes.Buffer
	writeSkeletonTable(&out, latestRows(rows))
	fmt.Fprintf(&out, "steering plot written to %s\n", path)
	// Printed, not logged: a benchmark with sub-benchmarks drops its own
	// log unless it fails.
	fmt.Print(out.String())
}

// latestRows keeps the last measurement of each row: the benchmark
// framework runs a row more than once (a first run of one message).
func latestRows(rows []steeringRow) []steeringRow {
	var out []steeringRow
	for i, r := range rows {
		later := slices.ContainsFunc(rows[i+1:], func(o steeringRow) bool {
			return o.sessions == r.sessions && o.history == r.history && o.held == r.held
		})
		if !later {
			out = append(out, r)
		}
	}
	return out
}
