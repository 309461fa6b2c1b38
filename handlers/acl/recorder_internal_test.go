package acl

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/bus/feed"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
)

// recorderWorld is a started recorder on real Postgres and JetStream.
type recorderWorld struct {
	pool *pgxpool.Pool
	js   jetstream.JetStream
	rec  *recorder
	seq  uint64
}

func newRecorderWorld(t *testing.T) *recorderWorld {
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	pub, err := bus.NewPublisher(js, bus.PublisherConfig{MinBatch: 2})
	require.NoError(t, err)
	rec := newRecorder(pool)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rec.start(ctx, pub)
	return &recorderWorld{pool: pool, js: js, rec: rec}
}

// item is the next raw event's activity row and feed item, of a session
// of its own; text is the feed item's text.
func (w *recorderWorld) item(t *testing.T, text string) *pending {
	w.seq++
	sessionID := uuid.New()
	a := domain.ActivityItem{ID: uuid.New(), SessionID: sessionID, Type: domain.ActivityMessage, Summary: "said", Timestamp: time.Now().UTC()}
	data, err := json.Marshal(feed.LiveAssistantText{SessionID: sessionID.String(), ItemID: a.ID.String(), Text: text, OccurredAt: a.Timestamp})
	require.NoError(t, err)
	msg, err := bus.NewMsg(context.Background(), bus.EventSubject(feed.Aggregate, sessionID.String(), feed.KindAssistantText), bus.Envelope{
		ID: uuid.NewString(), Type: feed.KindAssistantText, Aggregate: feed.Aggregate, AggregateID: sessionID.String(), Data: data})
	require.NoError(t, err)
	return &pending{row: &postgres.ActivityRow{Item: a, Seq: w.seq, RawType: "assistant_message"}, msg: msg}
}

// record hands p to the recorder, as a handler does, and reports the
// outcome on errs.
func (w *recorderWorld) record(p *pending, errs chan<- error) {
	go func() { errs <- w.rec.record(context.Background(), p.row, p.msg) }()
}

func (w *recorderWorld) counts(t *testing.T, items []*pending) (rows int, feedItems uint64) {
	t.Helper()
	seqs := make([]int64, len(items))
	for i, p := range items {
		seqs[i] = int64(p.row.Seq)
	}
	require.NoError(t, w.pool.QueryRow(context.Background(), "SELECT count(*) FROM activity_items WHERE source_seq = ANY($1)", seqs).Scan(&rows))
	s, err := w.js.Stream(context.Background(), bus.StreamEvents)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return rows, info.State.Msgs
}

// TestTheRecorderWritesWhatWaitedInOneWrite holds the first insert on a
// table lock while the other raw events of many sessions are handed in:
// their feed items are published meanwhile, the next insert takes all
// their rows, each row and feed item is stored once, and writing them all
// again (a redelivery) adds nothing.
func TestTheRecorderWritesWhatWaitedInOneWrite(t *testing.T) {
	w := newRecorderWorld(t)
	ctx := context.Background()
	const n = 50
	items := make([]*pending, n)
	for i := range items {
		items[i] = w.item(t, "hello")
	}

	tx, err := w.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "LOCK TABLE activity_items IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	errs := make(chan error, n)
	w.record(items[0], errs)
	require.Eventually(t, func() bool {
		var waiting int
		err := w.pool.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE relation = 'activity_items'::regclass AND NOT granted").Scan(&waiting)
		return err == nil && waiting > 0
	}, time.Minute, 10*time.Millisecond, "the first write waits for the lock")
	for _, p := range items[1:] {
		w.record(p, errs)
	}
	require.Eventually(t, func() bool { return len(w.rec.rows) == n-1 }, time.Minute, 10*time.Millisecond, "the others' rows wait for the next insert")
	require.Eventually(t, func() bool {
		s, err := w.js.Stream(ctx, bus.StreamEvents)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == n
	}, 10*time.Second, 10*time.Millisecond, "the feed items are published while the rows wait: the feed does not wait for the database")
	assert.Empty(t, errs, "each raw event waits for its row too")
	require.NoError(t, tx.Rollback(ctx))
	for range n {
		require.NoError(t, <-errs)
	}
	assert.EqualValues(t, 2, w.rec.writes.Load(), "the first item, then all that waited for it")
	rows, feedItems := w.counts(t, items)
	assert.Equal(t, n, rows)
	assert.EqualValues(t, n, feedItems)

	for _, p := range items {
		w.record(&pending{row: p.row, msg: p.msg}, errs)
	}
	for range n {
		require.NoError(t, <-errs)
	}
	rows, feedItems = w.counts(t, items)
	assert.Equal(t, n, rows, "a redelivered raw event adds no row")
	assert.EqualValues(t, n, feedItems, "nor a feed item")
}

// TestAnItemTheServerRefusesFailsAloneInItsWrite puts a feed item above
// the server's payload limit between two others in one write: it fails,
// and the others are stored, so their raw events are not retried for it
// (and dead-lettered with it in the end).
func TestAnItemTheServerRefusesFailsAloneInItsWrite(t *testing.T) {
	w := newRecorderWorld(t)
	items := []*pending{w.item(t, "before"), w.item(t, strings.Repeat("x", 2<<20)), w.item(t, "after")}
	for _, p := range items {
		p.done = make(chan error, 1)
	}
	w.rec.write(context.Background(), items)
	require.NoError(t, <-items[0].done)
	require.Error(t, <-items[1].done, "the server refuses a message above its payload limit")
	require.NoError(t, <-items[2].done)
	rows, feedItems := w.counts(t, items)
	assert.Equal(t, 3, rows, "the refused item's row is stored; its redelivery finds it")
	assert.EqualValues(t, 2, feedItems)
}
