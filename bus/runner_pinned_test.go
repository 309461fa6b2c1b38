package bus_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

// orderedCopies runs copies of an ordered runner (OrderKey BySubject) and
// records, per subject, the envelope versions in the order they were
// handled over all copies, and how many messages each copy handled.
type orderedCopies struct {
	mu       sync.Mutex
	versions map[string][]int64
	byCopy   []atomic.Int64
	runs     []*running
}

func startOrderedCopies(t *testing.T, js jetstream.JetStream, n int, defs *bus.Definitions) *orderedCopies {
	c := &orderedCopies{versions: map[string][]int64{}, byCopy: make([]atomic.Int64, n)}
	for i := range n {
		cfg := runnerConfig(t, "pinned", func(_ context.Context, m jetstream.Msg) error {
			env, err := bus.DecodeEnvelope(m.Data())
			if err != nil {
				return bus.Permanent(err)
			}
			c.mu.Lock()
			c.versions[m.Subject()] = append(c.versions[m.Subject()], env.Version)
			c.mu.Unlock()
			c.byCopy[i].Add(1)
			return nil
		})
		cfg.Concurrency, cfg.OrderKey = 4, bus.BySubject
		if defs != nil {
			cfg.Definitions, cfg.FilterSubjects = defs, nil
		}
		c.runs = append(c.runs, start(t, js, cfg))
	}
	// Every copy waits with a pull request before anything is published.
	require.Eventually(t, func() bool {
		c, err := js.Consumer(context.Background(), bus.StreamEvents, "pinned")
		return err == nil && c.CachedInfo().NumWaiting >= n
	}, waitFor, 10*time.Millisecond)
	return c
}

// busy returns the index of the only copy that handled messages, or -1.
func (c *orderedCopies) busy() int {
	at := -1
	for i := range c.byCopy {
		if c.byCopy[i].Load() > 0 {
			if at >= 0 {
				return -1
			}
			at = i
		}
	}
	return at
}

func (c *orderedCopies) total() int64 {
	var n int64
	for i := range c.byCopy {
		n += c.byCopy[i].Load()
	}
	return n
}

func (c *orderedCopies) assertInOrder(t *testing.T, subjects, each int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Len(t, c.versions, subjects)
	for subject, vs := range c.versions {
		assert.Len(t, vs, each, subject)
		assert.True(t, slices.IsSorted(vs), "%s handled in publish order across the copies", subject)
	}
}

// pinned returns the id of the client pinned in the consumer's group, or "".
func pinned(t *testing.T, js jetstream.JetStream) string {
	c, err := js.Consumer(context.Background(), bus.StreamEvents, "pinned")
	if err != nil {
		return ""
	}
	for _, g := range c.CachedInfo().PriorityGroups {
		if g.PinnedClientID != "" {
			return g.PinnedClientID
		}
	}
	return ""
}

// TestRunOrderHoldsAcrossCopies runs two copies of a runner with an
// OrderKey on one consumer: the server pins one of them, so every message
// of a key is handled in stream order even with two processes running.
func TestRunOrderHoldsAcrossCopies(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	copies := startOrderedCopies(t, js, 2, nil)
	info := consumerInfo(t, js, bus.StreamEvents, "pinned")
	assert.Equal(t, jetstream.PriorityPolicyPinned, info.Config.PriorityPolicy)
	assert.Equal(t, []string{"ordered"}, info.Config.PriorityGroups)

	publishEvents(t, js, "pinned", 600, 3)
	require.Eventually(t, func() bool { return copies.total() == 600 }, waitFor, 10*time.Millisecond)
	copies.assertInOrder(t, 3, 200)
	assert.GreaterOrEqual(t, copies.busy(), 0, "the pinned copy handles everything, the other waits")
	assert.NotEmpty(t, pinned(t, js))
}

// TestRunPinnedCopyHandsOverWhenItStops stops the pinned copy: it unpins
// itself, so the other copy is pinned at once, not after the group's
// timeout of an hour, and handles what follows in order; nothing is lost
// or handled twice.
func TestRunPinnedCopyHandsOverWhenItStops(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	defs, err := bus.LoadDefinitions(fstest.MapFS{
		"streams/AGENTS_EVENTS.json": {Data: []byte(`{"name":"AGENTS_EVENTS","subjects":["agents.evt.>"],"storage":"file","retention":"limits"}`)},
		"consumers/AGENTS_EVENTS/pinned.json": {Data: []byte(`{
			"durable_name": "pinned", "filter_subject": "agents.evt.>", "ack_policy": "explicit", "ack_wait": 30000000000,
			"max_deliver": 6, "priority_groups": ["ordered"], "priority_policy": "pinned_client", "priority_timeout": 3600000000000}`)},
	})
	require.NoError(t, err)
	copies := startOrderedCopies(t, js, 2, defs)

	publishEvents(t, js, "before", 90, 3)
	require.Eventually(t, func() bool { return copies.total() == 90 }, waitFor, 10*time.Millisecond)
	first := copies.busy()
	require.GreaterOrEqual(t, first, 0, "one copy handles everything")
	pin := pinned(t, js)
	require.NoError(t, copies.runs[first].stop(t))

	publishEvents(t, js, "after", 90, 3)
	other := 1 - first
	require.Eventually(t, func() bool { return copies.byCopy[other].Load() == 90 }, waitFor, 20*time.Millisecond,
		"the other copy takes over at once")
	assert.NotEqual(t, pin, pinned(t, js))
	assert.EqualValues(t, 90, copies.byCopy[first].Load())
	// Each round publishes versions 0, 3, 6... on each subject again.
	copies.mu.Lock()
	defer copies.mu.Unlock()
	require.Len(t, copies.versions, 3)
	for subject, vs := range copies.versions {
		require.Len(t, vs, 60, subject)
		assert.True(t, slices.IsSorted(vs[:30]), "%s: the first copy kept the order", subject)
		assert.Equal(t, vs[:30], vs[30:], "%s: the second copy kept the order", subject)
	}
}
