package bus_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

// batchWorld runs a batch handler on one key whose first message is held
// until the rest of the key's messages wait in its lane.
type batchWorld struct {
	js      jetstream.JetStream
	holding chan struct{}
	release chan struct{}
	mu      sync.Mutex
	batches [][]string
	fail    func(data string, delivery uint64) error
}

func newBatchWorld(t *testing.T, consumer string, retryInOrder bool, fail func(data string, delivery uint64) error) *batchWorld {
	_, js, _ := bustest.Server(t)
	w := &batchWorld{js: js, holding: make(chan struct{}), release: make(chan struct{}), fail: fail}
	cfg := runnerConfig(t, consumer, nil)
	cfg.Handler = nil
	cfg.BatchHandler = func(_ context.Context, batch []bus.Delivery) []error {
		if md, _ := batch[0].Msg.Metadata(); string(batch[0].Msg.Data()) == "m1" && md.NumDelivered == 1 {
			close(w.holding)
			<-w.release
		}
		errs := make([]error, len(batch))
		var got []string
		for i, d := range batch {
			md, err := d.Msg.Metadata()
			require.NoError(t, err)
			got = append(got, string(d.Msg.Data()))
			errs[i] = w.fail(string(d.Msg.Data()), md.NumDelivered)
		}
		w.mu.Lock()
		w.batches = append(w.batches, got)
		w.mu.Unlock()
		return errs
	}
	cfg.Concurrency, cfg.LaneBuffer = 4, 8
	cfg.RetryInOrder = retryInOrder
	cfg.OrderKey = func(jetstream.Msg) string { return "one key" }
	start(t, js, cfg)
	return w
}

// publish publishes m1, and m2..mn once the handler holds m1, and waits
// until the runner took them all.
func (w *batchWorld) publish(t *testing.T, consumer string, n int) {
	for i := 1; i <= n; i++ {
		m := nats.NewMsg("agents.evt.session.k.Happened")
		m.Data = []byte("m" + string(rune('0'+i)))
		_, err := w.js.PublishMsg(context.Background(), m)
		require.NoError(t, err)
		if i == 1 {
			select {
			case <-w.holding:
			case <-time.After(waitFor):
				t.Fatal("m1 never reached the handler")
			}
		}
	}
	require.Eventually(t, func() bool {
		return consumerInfo(t, w.js, bus.StreamEvents, consumer).NumAckPending == n
	}, waitFor, 10*time.Millisecond, "the runner holds every message")
}

func (w *batchWorld) got() [][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]string(nil), w.batches...)
}

// TestABatchHandlerGetsWhatWaitedInItsLaneAndSettlesEachByItsResult holds
// the first message while four more wait in its lane: they come in one
// batch, in order; the one that fails is redelivered alone, the others
// are acknowledged.
func TestABatchHandlerGetsWhatWaitedInItsLaneAndSettlesEachByItsResult(t *testing.T) {
	t.Parallel()
	w := newBatchWorld(t, "batch", false, func(data string, delivery uint64) error {
		if data == "m3" && delivery == 1 {
			return errors.New("database unavailable")
		}
		return nil
	})
	w.publish(t, "batch", 5)
	close(w.release)
	require.Eventually(t, func() bool { return len(w.got()) == 3 }, waitFor, 10*time.Millisecond)
	require.Eventually(t, settled(t, w.js, bus.StreamEvents, "batch"), waitFor, 10*time.Millisecond)
	assert.Equal(t, [][]string{{"m1"}, {"m2", "m3", "m4", "m5"}, {"m3"}}, w.got(),
		"what waited comes at once; only the failed message comes again")
	assert.Zero(t, streamMsgs(t, w.js, bus.StreamDLQ))
}

// TestABatchRetriedInOrderHoldsWhatIsBehindItsFailure fails the second
// message of a batch once: with RetryInOrder the messages behind it wait
// with it and come again with it, so none of the key is settled before it;
// the one before it is settled at once.
func TestABatchRetriedInOrderHoldsWhatIsBehindItsFailure(t *testing.T) {
	t.Parallel()
	var once sync.Once
	w := newBatchWorld(t, "batchinorder", true, func(data string, _ uint64) error {
		var err error
		if data == "m3" {
			once.Do(func() { err = errors.New("database unavailable") })
		}
		return err
	})
	w.publish(t, "batchinorder", 5)
	close(w.release)
	require.Eventually(t, func() bool { return len(w.got()) == 3 }, waitFor, 10*time.Millisecond)
	require.Eventually(t, settled(t, w.js, bus.StreamEvents, "batchinorder"), waitFor, 10*time.Millisecond)
	assert.Equal(t, [][]string{{"m1"}, {"m2", "m3", "m4", "m5"}, {"m3", "m4", "m5"}}, w.got())
	assert.Zero(t, streamMsgs(t, w.js, bus.StreamDLQ))
}

// TestABatchHandlerThatPanicsFailsItsWholeBatch: every message of the
// batch is redelivered, and the runner goes on.
func TestABatchHandlerThatPanicsFailsItsWholeBatch(t *testing.T) {
	t.Parallel()
	var once sync.Once
	w := newBatchWorld(t, "batchpanic", false, func(data string, _ uint64) error {
		if data == "m2" {
			once.Do(func() { panic("boom") })
		}
		return nil
	})
	w.publish(t, "batchpanic", 3)
	close(w.release)
	require.Eventually(t, settled(t, w.js, bus.StreamEvents, "batchpanic"), waitFor, 10*time.Millisecond)
	var again []string
	for _, b := range w.got()[1:] {
		again = append(again, b...)
	}
	assert.ElementsMatch(t, []string{"m2", "m3"}, again, "the panicked batch comes again, all of it")
	assert.Zero(t, streamMsgs(t, w.js, bus.StreamDLQ))
}

func TestRunRefusesBothHandlers(t *testing.T) {
	t.Parallel()
	cfg := runnerConfig(t, "both", func(context.Context, jetstream.Msg) error { return nil })
	cfg.BatchHandler = func(context.Context, []bus.Delivery) []error { return nil }
	err := cfg.Validate()
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "exclude"), err.Error())
}
