package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// skeleton is the pipeline a steering message takes through `up`, built
// from bare library calls with none of agentbus's logic, on the same NATS,
// Postgres and Redis servers as the stack it is measured beside. What it
// takes is what the pipeline's shape costs here (HTTP, three fsynced
// JetStream publishes, two pull consumers, a transaction of two round
// trips, a Redis stream); what ours takes beyond it is our own work.
//
//	POST /skeleton/sessions/{id}/messages   net/http; the HS256 JWT is checked
//	  → js.PublishMsg on SKEL_COMMANDS        AGENTS_COMMANDS' config: file, fsynced, Msg-Id
//	  → worker (pull consumer, Messages/Next from several goroutines, as bus.Run)
//	      BEGIN + SELECT the session's row          round trip 1
//	      UPDATE it + INSERT an outbox row + COMMIT round trip 2
//	      reply on core NATS, the handler answers 201
//	      js.PublishMsg on SKEL_SIDECAR             AGENTS_SIDECAR_COMMANDS' config,
//	        and at once the event on SKEL_EVENTS    AGENTS_EVENTS' config
//	      ack
//	  → relay (pull consumer on SKEL_SIDECAR): XADD to the session's stream, ack
//	  → reader: XREAD blocked on that stream, as the sidecar
//
// The worker replies before it publishes the steering message, as ours
// does: the outbox row is committed by then, so the reply promises nothing
// a crash could lose. Without relay (startSkeleton), an enqueued message
// is a Queued one: it raises its event and goes nowhere else.
//
// With confirm set, the reader also answers each steering message as our
// sidecar does, and the skeleton does the durable work of that answer,
// which ours does while the next message is on its way:
//
//	reader: XADD message_delivered to the session's event stream
//	  → relay (XREADGROUP over the sessions' event streams): js.PublishMsg
//	    on SKEL_RAW (AGENTS_SIDECAR_EVENTS' config), XACK
//	  → acl (pull consumer on SKEL_RAW): INSERT an activity row, publish
//	    it on SKEL_EVENTS for the live feed; send mark_delivered on
//	    SKEL_COMMANDS and wait for its reply; ack
//	  → worker: the transaction, the reply, the event on SKEL_EVENTS
//
// and a consumer of SKEL_EVENTS acks every event, as each reader of
// AGENTS_EVENTS does.
type skeleton struct {
	base, token string
	nc          *nats.Conn
	js          jetstream.JetStream
	pool        *pgxpool.Pool
	rdb         *redis.Client
	parser      *jwt.Parser
	ids         []uuid.UUID
	// own counts the skeleton's Redis commands, left out of the stack's.
	own *atomic.Int64
	// relays is whether enqueued messages go on to the sessions' streams
	// (startSkeleton's relay), and confirm makes their readers answer
	// each one (see skeleton).
	relays  bool
	confirm atomic.Bool
	// dir is on the disk the servers write to (see diskFlushes).
	dir string

	inbox   string
	mu      sync.Mutex
	waiting map[uuid.UUID]chan struct{}
	// marks holds each message's stages by its number, when tracing (the
	// steering benchmark); got receives each message read by a reader.
	marks map[int]*skeletonMarks
	got   chan delivery
	next  atomic.Int64
}

// skeletonMarks are the stages of one message, set where the skeleton
// passes them: the same stages as ours (see hopMarks), and the commit.
type skeletonMarks struct {
	hopMarks
	committed time.Time
}

// The skeleton's streams and how many messages its consumers take at once.
const (
	skeletonCommands = "SKEL_COMMANDS"
	skeletonSidecar  = "SKEL_SIDECAR"
	skeletonEvents   = "SKEL_EVENTS"
	skeletonRaw      = "SKEL_RAW"
	// skeletonConcurrency is the worker's, as the commands worker's
	// default (defaultCommandsConcurrency); the relay takes as many.
	skeletonConcurrency = defaultCommandsConcurrency
)

// skeletonStreamKey is the Redis stream of a session, as
// relay.CommandsKey is ours.
func skeletonStreamKey(session string) string { return "skel:cmds:" + session }

// skeletonEventsKey is the Redis stream a session's reader answers on, as
// relay.EventsKey is ours.
func skeletonEventsKey(session string) string { return "skel:events:" + session }

// skeletonCommand is what the handler publishes and the worker reads.
type skeletonCommand struct {
	ID      uuid.UUID `json:"id"`
	Session uuid.UUID `json:"session"`
	Content string    `json:"content"`
}

// startSkeleton starts the skeleton on st's servers with sessions rows.
// With relay, the steering messages go on to Redis, read by one reader
// per session as the sidecar; without, they stay on SKEL_SIDECAR as the
// events of a command nobody is sent do.
func startSkeleton(b *testing.B, st *steeringStack, sessions int, relay bool) *skeleton {
	// Its own context ends first when the benchmark does, so that what its
	// goroutines still do then is not reported as a failure.
	ctx, cancel := context.WithCancel(st.ctx)
	s := &skeleton{nc: st.nc, js: st.js, token: st.token, own: &st.own, inbox: st.nc.NewRespInbox(), dir: st.dataDir,
		waiting: map[uuid.UUID]chan struct{}{}, got: make(chan delivery, 1024),
		parser: jwt.NewParser(jwt.WithExpirationRequired(), jwt.WithValidMethods([]string{"HS256"}))}
	if relay {
		s.marks, s.relays = map[int]*skeletonMarks{}, true
	}

	// Its streams copy the config of the ones they stand for, so storage,
	// sync and deduplication are the same.
	for _, c := range [][3]string{{skeletonCommands, "AGENTS_COMMANDS", "skel.cmd.>"}, {skeletonSidecar, "AGENTS_SIDECAR_COMMANDS", "skel.sidecar.>"},
		{skeletonEvents, "AGENTS_EVENTS", "skel.evt.>"}, {skeletonRaw, "AGENTS_SIDECAR_EVENTS", "skel.raw.>"}} {
		ours, err := st.js.Stream(ctx, c[1])
		require.NoError(b, err)
		cfg := ours.CachedInfo().Config
		cfg.Name, cfg.Subjects, cfg.Description, cfg.Metadata = c[0], []string{c[2]}, "benchmark skeleton", nil
		require.Equal(b, jetstream.FileStorage, cfg.Storage)
		_, err = st.js.CreateOrUpdateStream(ctx, cfg)
		require.NoError(b, err)
	}

	// A tiny table for the aggregate and one for the outbox, in a database
	// of its own on the stack's Postgres server: the server's disk and WAL
	// are shared, the stack's counts of transactions and rows are not.
	dbURL := testenv.PostgresURL(b)
	var err error
	s.pool, err = pgxpool.New(ctx, dbURL+fmt.Sprintf("%spool_max_conns=%d", sep(dbURL), skeletonConcurrency+1))
	require.NoError(b, err)
	b.Cleanup(s.pool.Close)
	_, err = s.pool.Exec(ctx, `
		CREATE TABLE IF NOT EXISTS skel_session (id uuid PRIMARY KEY, version bigint NOT NULL, doc jsonb NOT NULL);
		CREATE TABLE IF NOT EXISTS skel_outbox (id uuid PRIMARY KEY, subject text NOT NULL, payload jsonb NOT NULL);
		CREATE TABLE IF NOT EXISTS skel_activity (id uuid PRIMARY KEY, session_id uuid NOT NULL, type text NOT NULL, detail jsonb NOT NULL)`)
	require.NoError(b, err)
	for range sessions {
		id := uuid.New()
		_, err := s.pool.Exec(ctx, `INSERT INTO skel_session VALUES ($1, 0, '{}')`, id)
		require.NoError(b, err)
		s.ids = append(s.ids, id)
	}

	sub, err := st.nc.Subscribe(s.inbox+".*", func(m *nats.Msg) {
		id, err := uuid.Parse(m.Subject[len(s.inbox)+1:])
		if err != nil {
			return
		}
		s.mu.Lock()
		ch := s.waiting[id]
		s.mu.Unlock()
		select {
		case ch <- struct{}{}:
		default: // a reply already arrived, or nobody waits
		}
	})
	require.NoError(b, err)
	b.Cleanup(func() { _ = sub.Unsubscribe() })

	s.consume(b, ctx, skeletonCommands, s.work)
	s.consume(b, ctx, skeletonEvents, func(context.Context, jetstream.Msg) error { return nil })
	s.rdb = redis.NewClient(st.rdb.Options())
	b.Cleanup(func() { _ = s.rdb.Close() })
	if relay {
		s.consume(b, ctx, skeletonSidecar, s.relay)
		s.consume(b, ctx, skeletonRaw, s.acl)
		for _, id := range s.ids {
			s.read(ctx, id)
		}
		s.relayEvents(b, ctx)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /skeleton/sessions/{id}/messages", s.post)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	s.base = "http://" + ln.Addr().String()
	b.Cleanup(cancel)
	return s
}

func sep(url string) string {
	if strings.Contains(url, "?") {
		return "&"
	}
	return "?"
}

// post is the api's handler: check the token, publish the command, answer
// 201 once the worker replied.
func (s *skeleton) post(w http.ResponseWriter, r *http.Request) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		http.Error(w, "no token", http.StatusUnauthorized)
		return
	}
	var claims jwt.RegisteredClaims
	if _, err := s.parser.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return []byte(runtimeSecret), nil }); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	session, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	var in struct {
		Content string `json:"content"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	cmd := skeletonCommand{ID: uuid.New(), Session: session, Content: in.Content}
	body, _ := json.Marshal(cmd)
	n := itemNumber(in.Content)
	s.mark(n, func(m *skeletonMarks) { m.command = time.Now() })
	msg := &nats.Msg{Subject: "skel.cmd.queue.enqueue_message", Data: body, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, cmd.ID.String())
	err = s.send(r.Context(), cmd.ID, msg, func() { s.mark(n, func(m *skeletonMarks) { m.commandStored = time.Now() }) })
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"commandId":"` + cmd.ID.String() + `"}`))
}

// send publishes the command id in msg with a reply inbox, calls stored
// once it is stored, and waits for the worker's reply.
func (s *skeleton) send(ctx context.Context, id uuid.UUID, msg *nats.Msg, stored func()) error {
	done := make(chan struct{}, 1)
	s.mu.Lock()
	s.waiting[id] = done
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiting, id)
		s.mu.Unlock()
	}()
	msg.Header.Set("Reply-To", s.inbox+"."+id.String())
	if _, err := s.js.PublishMsg(ctx, msg); err != nil {
		return err
	}
	stored()
	select {
	case <-done:
		return nil
	case <-time.After(wait):
		return errors.New("no reply")
	}
}

// consume runs handle on every message of a durable pull consumer of
// stream, from skeletonConcurrency goroutines taking their next message
// themselves, as bus.Run does for a consumer without an order key.
func (s *skeleton) consume(b *testing.B, ctx context.Context, stream string, handle func(context.Context, jetstream.Msg) error) {
	cons, err := s.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: "skeleton", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second})
	require.NoError(b, err)
	it, err := cons.Messages(jetstream.PullMaxMessages(max(16, 2*skeletonConcurrency)), jetstream.PullHeartbeat(5*time.Second))
	require.NoError(b, err)
	b.Cleanup(it.Stop)
	for range skeletonConcurrency {
		go func() {
			for {
				m, err := it.Next()
				if err != nil {
					if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
						return
					}
					continue
				}
				if err := handle(ctx, m); err != nil {
					if ctx.Err() == nil {
						b.Errorf("skeleton %s: %v", stream, err)
					}
					_ = m.Nak()
					continue
				}
				_ = m.Ack()
			}
		}()
	}
}

// work is the commands worker: the transaction, the reply, and what the
// command raises: an event, and for an enqueued message the steering
// message too, published at once.
func (s *skeleton) work(ctx context.Context, m jetstream.Msg) error {
	var cmd skeletonCommand
	if err := json.Unmarshal(m.Data(), &cmd); err != nil {
		return err
	}
	// An enqueued message is sent on to its session when the skeleton
	// relays; otherwise it is a Queued message, which only raises its
	// event.
	steer := s.relays && strings.HasSuffix(m.Subject(), ".enqueue_message")
	n := -1
	if steer {
		n = itemNumber(cmd.Content)
	}
	s.mark(n, func(h *skeletonMarks) { h.commandDelivered = time.Now() })
	event, _ := json.Marshal(map[string]any{"type": "message_event", "message_id": cmd.ID, "content": cmd.Content})
	if err := s.transaction(ctx, cmd, event); err != nil {
		return err
	}
	s.mark(n, func(h *skeletonMarks) { h.committed = time.Now() })
	if err := s.nc.Publish(m.Headers().Get("Reply-To"), nil); err != nil {
		return err
	}
	now := time.Now()
	s.mark(n, func(h *skeletonMarks) { h.reply, h.sidecar, h.event = now, now, now })
	evt := &nats.Msg{Subject: "skel.evt." + cmd.Session.String(), Data: event, Header: nats.Header{}}
	evt.Header.Set(jetstream.MsgIDHeader, cmd.ID.String())
	published, err := s.js.PublishMsgAsync(evt)
	if err != nil {
		return err
	}
	if steer {
		steering, _ := json.Marshal(map[string]any{"type": "steering_message", "message_id": cmd.ID, "content": cmd.Content})
		msg := &nats.Msg{Subject: "skel.sidecar." + cmd.Session.String() + ".commands.steering_message", Data: steering, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, cmd.ID.String())
		if _, err := s.js.PublishMsg(ctx, msg); err != nil {
			return err
		}
		s.mark(n, func(h *skeletonMarks) { h.sidecarStored = time.Now() })
	}
	select {
	case <-published.Ok():
		return nil
	case err := <-published.Err():
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// transaction has the round trips of a command's transaction in ours
// (postgres.InTx with QueueCommit): BEGIN goes with the load, the writes
// with COMMIT.
func (s *skeleton) transaction(ctx context.Context, cmd skeletonCommand, event []byte) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	load := &pgx.Batch{}
	load.Queue("BEGIN")
	var version int64
	load.Queue(`SELECT version FROM skel_session WHERE id = $1`, cmd.Session).QueryRow(func(r pgx.Row) error { return r.Scan(&version) })
	if err := conn.SendBatch(ctx, load).Close(); err != nil {
		_, _ = conn.Exec(ctx, "ROLLBACK")
		return err
	}
	save := &pgx.Batch{}
	save.Queue(`UPDATE skel_session SET version = $2, doc = $3 WHERE id = $1`, cmd.Session, version+1, event)
	save.Queue(`INSERT INTO skel_outbox VALUES ($1, $2, $3)`, cmd.ID, "skel.sidecar", event)
	save.Queue("COMMIT")
	if err := conn.SendBatch(ctx, save).Close(); err != nil {
		_, _ = conn.Exec(ctx, "ROLLBACK")
		return err
	}
	return nil
}

// relay writes a steering message to its session's Redis stream.
func (s *skeleton) relay(ctx context.Context, m jetstream.Msg) error {
	var e struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(m.Data(), &e)
	s.mark(itemNumber(e.Content), func(h *skeletonMarks) { h.sidecarDelivered = time.Now() })
	session := strings.Split(m.Subject(), ".")[2]
	s.own.Add(1)
	return s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: skeletonStreamKey(session), Values: []any{
		"type", "steering_message", "data", string(m.Data())}}).Err()
}

// relayEvents is the relay's inbound side: one XREADGROUP over every
// session's event stream, each entry published on SKEL_RAW, then
// acknowledged in Redis.
func (s *skeleton) relayEvents(b *testing.B, ctx context.Context) {
	streams := make([]string, 0, 2*len(s.ids))
	for _, id := range s.ids {
		key := skeletonEventsKey(id.String())
		err := s.rdb.XGroupCreateMkStream(ctx, key, "relay", "$").Err()
		if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
			require.NoError(b, err)
		}
		streams = append(streams, key)
	}
	for range s.ids {
		streams = append(streams, ">")
	}
	go func() {
		for ctx.Err() == nil {
			s.own.Add(1)
			res, err := s.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "relay", Consumer: "skeleton", Streams: streams, Block: time.Second}).Result()
			if err != nil {
				continue
			}
			for _, st := range res {
				session := strings.TrimPrefix(st.Stream, "skel:events:")
				ids := make([]string, 0, len(st.Messages))
				for _, e := range st.Messages {
					data, _ := e.Values["data"].(string)
					msg := &nats.Msg{Subject: "skel.raw." + session + ".message_delivered", Data: []byte(data), Header: nats.Header{}}
					msg.Header.Set(jetstream.MsgIDHeader, session+":"+e.ID)
					if _, err := s.js.PublishMsg(ctx, msg); err != nil {
						break
					}
					ids = append(ids, e.ID)
				}
				if len(ids) > 0 {
					s.own.Add(1)
					_ = s.rdb.XAck(ctx, st.Stream, "relay", ids...).Err()
				}
			}
		}
	}()
}

// acl records a raw message_delivered as an activity row, publishes it
// for the live feed, and sends the command that marks the message
// delivered, waiting for its reply.
func (s *skeleton) acl(ctx context.Context, m jetstream.Msg) error {
	session, err := uuid.Parse(strings.Split(m.Subject(), ".")[2])
	if err != nil {
		return err
	}
	item := uuid.New()
	if _, err := s.pool.Exec(ctx, `INSERT INTO skel_activity VALUES ($1, $2, 'message_delivered', $3)`,
		item, session, m.Data()); err != nil {
		return err
	}
	feed := &nats.Msg{Subject: "skel.evt.activity." + session.String(), Data: m.Data(), Header: nats.Header{}}
	feed.Header.Set(jetstream.MsgIDHeader, item.String())
	if _, err := s.js.PublishMsg(ctx, feed); err != nil {
		return err
	}
	cmd := skeletonCommand{ID: uuid.New(), Session: session}
	body, _ := json.Marshal(cmd)
	msg := &nats.Msg{Subject: "skel.cmd.queue.mark_delivered", Data: body, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, cmd.ID.String())
	return s.send(ctx, cmd.ID, msg, func() {})
}

// read plays a session's sidecar: XREAD blocked on its stream.
func (s *skeleton) read(ctx context.Context, id uuid.UUID) {
	go func() {
		last := "$"
		for ctx.Err() == nil {
			s.own.Add(1)
			res, err := s.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{skeletonStreamKey(id.String()), last}, Block: time.Second}).Result()
			if err != nil {
				continue
			}
			now := time.Now()
			for _, e := range res[0].Messages {
				last = e.ID
				var m struct {
					Content string `json:"content"`
				}
				data, _ := e.Values["data"].(string)
				_ = json.Unmarshal([]byte(data), &m)
				if n := itemNumber(m.Content); n >= 0 {
					var posted time.Time
					s.mark(n, func(h *skeletonMarks) { h.redis, posted = now, h.posted })
					s.got <- delivery{n: n, at: now.Sub(posted)}
				}
				if s.confirm.Load() {
					s.own.Add(1)
					_ = s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: skeletonEventsKey(id.String()), Values: []any{
						"type", "message_delivered", "data", data}}).Err()
				}
			}
		}
	}()
}

// mark sets stages of message n when tracing.
func (s *skeleton) mark(n int, set func(*skeletonMarks)) {
	if n < 0 || s.marks == nil {
		return
	}
	markIn(&s.mu, s.marks, n, set)
}

// take returns and forgets the marks of message n.
func (s *skeleton) take(n int) skeletonMarks { return takeFrom(&s.mu, s.marks, n) }

// request is the POST of one message to session i.
func (s *skeleton) request(i int, content string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, s.base+"/skeleton/sessions/"+s.ids[i%len(s.ids)].String()+"/messages",
		strings.NewReader(fmt.Sprintf(`{"content":%q,"priority":"Immediate"}`, content)))
	r.Header.Set("Authorization", "Bearer "+s.token)
	r.Header.Set("Content-Type", "application/json")
	return r
}

// steer posts one message to session i, as steeringStack.steer does to
// ours, and returns its marks and its latency to the reader.
func (s *skeleton) steer(b *testing.B, i int) (skeletonMarks, time.Duration) {
	n := int(s.next.Add(1))
	s.mark(n, func(h *skeletonMarks) { h.posted = time.Now() })
	resp, err := http.DefaultClient.Do(s.request(i, fmt.Sprintf("Steer n=%d", n)))
	require.NoError(b, err)
	resp.Body.Close()
	require.Equal(b, http.StatusCreated, resp.StatusCode)
	for {
		select {
		case d := <-s.got:
			if d.n == n {
				return s.take(n), d.at
			}
		case <-time.After(2 * wait):
			b.Fatalf("skeleton message %d never reached its reader", n)
		}
	}
}

// measure steers b.N messages through the skeleton, one at a time as
// ours, after a warm-up of one per session, and reports them in row; then
// as many again with each message answered (confirm), and reports their
// latency as skel+confirm.
func (s *skeleton) measure(b *testing.B, row *steeringRow) {
	for i := range s.ids {
		s.steer(b, i)
	}
	var c skeletonSamples
	for i := range b.N {
		c.add(s.steer(b, i))
	}
	c.report(b, row)

	s.confirm.Store(true)
	defer s.confirm.Store(false)
	for i := range s.ids {
		s.steer(b, i)
	}
	confirmed := make([]time.Duration, 0, b.N)
	flushes := diskFlushes(s.dir)
	for i := range b.N {
		_, d := s.steer(b, i)
		confirmed = append(confirmed, d)
	}
	if after := diskFlushes(s.dir); flushes >= 0 && after >= 0 {
		b.ReportMetric(float64(after-flushes)/float64(b.N), "skel+confirm-disk-flushes/msg")
	}
	row.skelC50, row.skelC99, row.skelCMax = quantiles(confirmed)
	b.ReportMetric(row.skelC50, "skel+confirm-p50-ms")
	b.ReportMetric(row.skelC99, "skel+confirm-p99-ms")
	b.ReportMetric(row.skelCMax, "skel+confirm-max-ms")
}

// skeletonSamples collects the skeleton's latencies and hops of a row.
type skeletonSamples struct {
	lat   []time.Duration
	hops  [hopCount][]time.Duration
	parts [partCount][]time.Duration
	tx    []time.Duration
}

func (c *skeletonSamples) add(m skeletonMarks, d time.Duration) {
	c.lat = append(c.lat, d)
	if h, ok := m.hops(); ok {
		for i := range hopCount {
			c.hops[i] = append(c.hops[i], h[i])
		}
	}
	if p, ok := m.parts(); ok {
		for i, d := range p {
			c.parts[i] = append(c.parts[i], d)
		}
	}
	if !m.committed.IsZero() && !m.commandDelivered.IsZero() {
		c.tx = append(c.tx, m.committed.Sub(m.commandDelivered))
	}
}

// report reports the skeleton's p50/p99 and those of its hops, and stores
// its latency and the p50 of its hops in row.
func (c *skeletonSamples) report(b *testing.B, row *steeringRow) {
	row.skel50, row.skel99, row.skelMax = quantiles(c.lat)
	report := func(name string, d []time.Duration) float64 {
		if len(d) == 0 {
			return 0
		}
		p50, p99, _ := quantiles(d)
		b.ReportMetric(p50, "skel-"+name+"-p50-ms")
		b.ReportMetric(p99, "skel-"+name+"-p99-ms")
		return p50
	}
	for i := range hopCount {
		row.skelHop50[i] = report(hopNames[i], c.hops[i])
	}
	for i := range partCount {
		row.skelPart50[i] = report(partNames[i], c.parts[i])
	}
	row.skelTx50 = report("tx", c.tx)
}

// writeSkeletonTable writes ours beside the skeleton, row by row, and the
// p50 of each hop of both with their ratio.
func writeSkeletonTable(out io.Writer, rows []steeringRow) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(out, "steering beside its skeleton (bare library calls, same servers, same run), ms:")
	fmt.Fprintln(w, "row\tours p50\tp99\tmax\tskeleton p50\tp99\tmax\tours/skeleton p50\tp99\tskeleton+confirm p50\tp99\tmax\tours/skeleton+confirm p50\tp99\t")
	for _, r := range rows {
		name := fmt.Sprintf("sessions=%d history=%d", r.sessions, r.history)
		if r.held {
			name += " held-tx"
		}
		fmt.Fprintf(w, "%s\t%.2f\t%.2f\t%.1f\t%.2f\t%.2f\t%.1f\t%.1f×\t%.1f×\t%.2f\t%.2f\t%.1f\t%.1f×\t%.1f×\t\n",
			name, r.p50, r.p99, r.max, r.skel50, r.skel99, r.skelMax, r.p50/r.skel50, r.p99/r.skel99,
			r.skelC50, r.skelC99, r.skelCMax, r.p50/r.skelC50, r.p99/r.skelC99)
	}
	_ = w.Flush()
	fmt.Fprintln(out, "hop p50, ours / skeleton (ms) and ratio:")
	fmt.Fprint(w, "row\t")
	for _, n := range hopNames[:hopCount] {
		fmt.Fprintf(w, "%s\t", n)
	}
	for _, n := range partNames {
		fmt.Fprintf(w, "%s\t", n)
	}
	fmt.Fprintln(w, "skeleton tx\t")
	for _, r := range rows {
		fmt.Fprintf(w, "sessions=%d history=%d held=%v\t", r.sessions, r.history, r.held)
		cell := func(ours, skel float64) {
			if skel < 0.01 { // the skeleton's send is nothing: it replies, then publishes
				fmt.Fprintf(w, "%.2f/%.2f\t", ours, skel)
				return
			}
			fmt.Fprintf(w, "%.2f/%.2f %.1f×\t", ours, skel, ours/skel)
		}
		for i := range hopCount {
			cell(r.hop50[i], r.skelHop50[i])
		}
		for i := range partCount {
			cell(r.part50[i], r.skelPart50[i])
		}
		fmt.Fprintf(w, "%.2f\t\n", r.skelTx50)
	}
	_ = w.Flush()
}
