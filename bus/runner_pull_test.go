package bus_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

// TestRunHandlesMessagesOnTheWaitingPull: an idle runner keeps a pull
// request waiting on the server, and a message published then goes to
// its handler on that request: no new pull is asked for, so nothing
// waits for one to be sent or for the waiting one to expire. Ordered
// (lanes) and unordered (workers taking from the subscription) alike.
func TestRunHandlesMessagesOnTheWaitingPull(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			_, js, nc := bustest.Server(t)
			consumer := fmt.Sprintf("waiting-%v", ordered)
			var pulls atomic.Int64
			sub, err := nc.Subscribe("$JS.API.CONSUMER.MSG.NEXT."+bus.StreamEvents+"."+consumer, func(*nats.Msg) { pulls.Add(1) })
			require.NoError(t, err)
			t.Cleanup(func() { _ = sub.Unsubscribe() })
			require.NoError(t, nc.Flush())

			handled := make(chan string, 1)
			cfg := runnerConfig(t, consumer, func(_ context.Context, m jetstream.Msg) error {
				handled <- string(m.Data())
				return nil
			})
			cfg.Concurrency = 2
			if ordered {
				cfg.OrderKey = bus.BySubject
			}
			// Longer than the test: a message handled here did not wait
			// for a heartbeat or an expiry to renew the pull.
			cfg.IdleHeartbeat = 15 * time.Second
			start(t, js, cfg)
			require.Eventually(t, func() bool {
				c, err := js.Consumer(context.Background(), bus.StreamEvents, consumer)
				if err != nil {
					return false
				}
				info, err := c.Info(context.Background())
				// The server may count the pull as waiting before this
				// connection's copy of it arrives: wait for both.
				return err == nil && info.NumWaiting > 0 && pulls.Load() > 0
			}, waitFor, 10*time.Millisecond, "the runner waits on a pull request")
			asked := pulls.Load()
			require.Positive(t, asked)

			for i := range 5 {
				want := fmt.Sprintf("message %d", i)
				_, err := js.Publish(context.Background(), "agents.evt.session.s1.happened", []byte(want))
				require.NoError(t, err)
				select {
				case got := <-handled:
					require.Equal(t, want, got)
				case <-time.After(waitFor):
					t.Fatalf("%s not handled", want)
				}
			}
			assert.Equal(t, asked, pulls.Load(), "every message went out on the pull that was waiting")
		})
	}
}
