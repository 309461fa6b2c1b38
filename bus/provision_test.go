package bus_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"testing"
	"testing/fstest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	natsdefs "github.com/agentbus/agentbus/nats"
)

func TestProvisionCreatesEveryDefinition(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	ctx := context.Background()
	defs, err := bus.DefaultDefinitions()
	require.NoError(t, err)

	for _, want := range defs.Streams {
		s, err := js.Stream(ctx, want.Name)
		require.NoError(t, err, want.Name)
		got := s.CachedInfo().Config
		assert.Equal(t, want.Subjects, got.Subjects, want.Name)
		assert.Equal(t, want.Retention, got.Retention, want.Name)
		assert.Equal(t, jetstream.FileStorage, got.Storage, want.Name)
		assert.True(t, got.AllowAtomicPublish, "%s allows atomic batches", want.Name)
		for _, wc := range defs.Consumers[want.Name] {
			c, err := js.Consumer(ctx, want.Name, wc.Durable)
			require.NoError(t, err, wc.Durable)
			cfg := c.CachedInfo().Config
			assert.Equal(t, wc.FilterSubject, cfg.FilterSubject, wc.Durable)
			assert.Equal(t, wc.MaxDeliver, cfg.MaxDeliver, wc.Durable)
			assert.Equal(t, wc.BackOff, cfg.BackOff, wc.Durable)
		}
	}
}

func TestProvisionIsIdempotent(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	ctx := context.Background()
	pub := newPublisher(t, js)
	env := envelope(t, "e1")
	_, err := pub.Publish(ctx, bus.EventSubject("session", "s1", "session_paused"), env)
	require.NoError(t, err)

	before := snapshot(t, js)
	require.NoError(t, bus.Provision(ctx, js))
	require.NoError(t, bus.Provision(ctx, js))
	after := snapshot(t, js)

	assert.Equal(t, before, after, "a second provisioning changes nothing")
	s, err := js.Stream(ctx, bus.StreamEvents)
	require.NoError(t, err)
	assert.EqualValues(t, 1, s.CachedInfo().State.Msgs, "messages survive provisioning")
}

func TestProvisionUpdatesChangedDefinition(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	ctx := context.Background()

	changed := copyDefinitions(t)
	edit(t, changed, "streams/AGENTS_EVENTS.json", func(m map[string]any) {
		m["max_age"] = int64(7 * 24 * time.Hour)
		m["description"] = "changed"
	})
	edit(t, changed, "consumers/AGENTS_EVENTS/pool.json", func(m map[string]any) {
		m["max_ack_pending"] = 64
	})
	changed["consumers/AGENTS_EVENTS/audit.json"] = &fstest.MapFile{Data: []byte(
		`{"durable_name":"audit","filter_subject":"agents.evt.>","ack_policy":"explicit","deliver_policy":"all"}`)}

	createdBefore := snapshot(t, js)
	require.NoError(t, bus.ProvisionWith(ctx, js, bus.ProvisionOptions{Definitions: changed, Replicas: 1}))

	s, err := js.Stream(ctx, bus.StreamEvents)
	require.NoError(t, err)
	assert.Equal(t, 7*24*time.Hour, s.CachedInfo().Config.MaxAge)
	assert.Equal(t, "changed", s.CachedInfo().Config.Description)
	assert.Equal(t, createdBefore[bus.StreamEvents], s.CachedInfo().Created, "updated in place, not recreated")

	c, err := js.Consumer(ctx, bus.StreamEvents, "pool")
	require.NoError(t, err)
	assert.Equal(t, 64, c.CachedInfo().Config.MaxAckPending)
	assert.Equal(t, createdBefore[bus.StreamEvents+"/pool"], c.CachedInfo().Created)

	_, err = js.Consumer(ctx, bus.StreamEvents, "audit")
	assert.NoError(t, err, "a new definition is created")
}

func TestProvisionRejectsImpossibleChange(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	changed := copyDefinitions(t)
	edit(t, changed, "streams/AGENTS_COMMANDS.json", func(m map[string]any) { m["storage"] = "memory" })
	err := bus.ProvisionWith(context.Background(), js, bus.ProvisionOptions{Definitions: changed})
	assert.ErrorContains(t, err, "AGENTS_COMMANDS")
}

// snapshot maps every stream and consumer to its creation time and config,
// which any re-creation or change would alter.
func snapshot(t *testing.T, js jetstream.JetStream) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{}
	for name := range js.StreamNames(ctx).Name() {
		s, err := js.Stream(ctx, name)
		require.NoError(t, err)
		out[name] = s.CachedInfo().Created
		out[name+" config"] = s.CachedInfo().Config
		for c := range s.ListConsumers(ctx).Info() {
			out[name+"/"+c.Name] = c.Created
			out[name+"/"+c.Name+" config"] = c.Config
		}
	}
	return out
}

func copyDefinitions(t *testing.T) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	err := fs.WalkDir(natsdefs.Definitions, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(natsdefs.Definitions, path)
		out[path] = &fstest.MapFile{Data: b}
		return err
	})
	require.NoError(t, err)
	return out
}

func edit(t *testing.T, fsys fstest.MapFS, path string, change func(map[string]any)) {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(fsys[path].Data, &m))
	change(m)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	fsys[path] = &fstest.MapFile{Data: b}
}

func TestBucketReplicasFollowTheSidecarEventsStream(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	ctx := context.Background()

	got, err := bus.BucketReplicas(ctx, js)
	require.NoError(t, err)
	assert.Equal(t, 1, got, "a single server's streams have one replica")

	require.NoError(t, js.DeleteStream(ctx, bus.StreamSidecarEvents))
	got, err = bus.BucketReplicas(ctx, js)
	require.NoError(t, err)
	assert.Equal(t, 0, got, "before the streams exist the buckets take the server's default")
}
