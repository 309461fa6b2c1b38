package bus_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/internal/testenv"
)

// outageHandler writes each message's id (its event type) and delivery
// count to Postgres, and fails the message "ordinary" with an error of its
// own. It records every call's delivery count by message id.
type outageHandler struct {
	pool *pgxpool.Pool
	mu   sync.Mutex
	runs map[string][]uint64
}

func (h *outageHandler) handle(ctx context.Context, m jetstream.Msg) error {
	md, err := m.Metadata()
	if err != nil {
		return err
	}
	id := m.Subject()[strings.LastIndex(m.Subject(), ".")+1:]
	h.mu.Lock()
	h.runs[id] = append(h.runs[id], md.NumDelivered)
	h.mu.Unlock()
	if id == "ordinary" {
		return errors.New("ordinary failure")
	}
	_, err = h.pool.Exec(ctx, `INSERT INTO handled (id, delivery) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, int64(md.NumDelivered))
	return err
}

func (h *outageHandler) handleBatch(_ context.Context, batch []bus.Delivery) []error {
	errs := make([]error, len(batch))
	for i, d := range batch {
		errs[i] = h.handle(d.Ctx, d.Msg)
	}
	return errs
}

func (h *outageHandler) deliveries(id string) []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]uint64(nil), h.runs[id]...)
}

// A handler whose database is down for longer than the whole retry
// schedule keeps its message: the runner holds it and runs the handler
// again until the database is back, so the message is handled on its
// first delivery and never dead-lettered. An ordinary error still spends
// the attempts. Both with a handler of single messages and with a batch
// handler in ordered lanes.
func TestRunHoldsAMessageWhileItsDatabaseIsDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	top := t
	pg := testenv.PrivatePostgres(t)
	_, js, _ := bustest.Server(t)
	dlq, err := js.Stream(ctx, bus.StreamDLQ)
	require.NoError(t, err)

	for _, batch := range []bool{false, true} {
		name := map[bool]string{false: "outage-single", true: "outage-batch"}[batch]
		t.Run(name, func(t *testing.T) {
			pool, err := pgxpool.New(ctx, pg.URL("postgres"))
			require.NoError(t, err)
			defer pool.Close()
			_, err = pool.Exec(ctx, `DROP TABLE IF EXISTS handled; CREATE TABLE handled (id text PRIMARY KEY, delivery bigint NOT NULL)`)
			require.NoError(t, err)

			h := &outageHandler{pool: pool, runs: map[string][]uint64{}}
			cfg := runnerConfig(t, name, h.handle)
			cfg.FilterSubjects = []string{bus.EventSubject("session", name, "*")}
			if batch {
				cfg.Handler, cfg.BatchHandler = nil, h.handleBatch
				cfg.OrderKey, cfg.RetryInOrder, cfg.LaneBuffer = bus.BySubject, true, 4
			}
			cfg.MaxDeliver = 3 // three attempts 10ms apart: over in well under a second
			start(t, js, cfg)

			deadLetters := func() map[string]string {
				dead := map[string]string{}
				info, err := dlq.Info(ctx, jetstream.WithSubjectFilter(bus.DLQSubject(name)))
				if err != nil {
					return dead
				}
				for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
					if raw, err := dlq.GetMsg(ctx, seq); err == nil && raw.Subject == bus.DLQSubject(name) {
						subject := raw.Header.Get(bus.HeaderOriginalSubject)
						dead[subject[strings.LastIndex(subject, ".")+1:]] = raw.Header.Get(bus.HeaderDeliveries)
					}
				}
				return dead
			}
			publish := func(id string) {
				m := nats.NewMsg(bus.EventSubject("session", name, id))
				m.Header.Set(nats.MsgIdHdr, name+"-"+id)
				_, err := js.PublishMsg(ctx, m)
				require.NoError(t, err)
			}

			// An ordinary error uses up the three attempts.
			publish("ordinary")
			require.Eventually(t, func() bool { return deadLetters()["ordinary"] != "" }, waitFor, 50*time.Millisecond)
			assert.Contains(t, deadLetters(), "ordinary")
			assert.Len(t, h.deliveries("ordinary"), 3)

			// An outage goes on for more runs than that.
			pg.Kill()
			publish("outage")
			require.Eventually(t, func() bool {
				return deadLetters()["outage"] != "" || len(h.deliveries("outage")) >= 5
			}, waitFor, 50*time.Millisecond)
			require.NotContains(t, deadLetters(), "outage", "dead letters while the database is down")

			pg = testenv.RestartPostgres(top, pg)
			var delivery int64
			require.Eventually(t, func() bool {
				return pool.QueryRow(ctx, `SELECT delivery FROM handled WHERE id = 'outage'`).Scan(&delivery) == nil
			}, waitFor, 10*time.Millisecond, "the held message is handled once the database is back")
			assert.Equal(t, int64(1), delivery, "handled on its first delivery")
			for _, n := range h.deliveries("outage") {
				assert.Equal(t, uint64(1), n, "every run of the held message is of its first delivery")
			}
			assert.NotContains(t, deadLetters(), "outage", "dead letters once the database is back")
		})
	}
}
