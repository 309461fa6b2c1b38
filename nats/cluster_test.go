package nats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/handlers/projections"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/relay"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// clusterWait bounds every wait of the cluster test: generous, so that a
// loaded machine only makes it slower.
const clusterWait = 2 * time.Minute

// cluster is the three-node cluster of nats/cluster/node-N.conf, run in
// this process on free loopback ports.
type cluster struct {
	t       *testing.T
	opts    []*server.Options
	servers []*server.Server
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	setPasswords(t)
	c := &cluster{t: t}
	var routes []string
	for i := 1; i <= 3; i++ {
		opts, err := server.ProcessConfigFile(fmt.Sprintf("cluster/node-%d.conf", i))
		require.NoError(t, err)
		opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", freePort(t), 0
		opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", freePort(t)
		opts.StoreDir = filepath.Join(t.TempDir(), opts.ServerName)
		opts.NoSigs = true
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", opts.Cluster.Port))
		c.opts = append(c.opts, opts)
	}
	for _, opts := range c.opts {
		opts.Routes = server.RoutesFromStr(strings.Join(routes, ","))
	}
	c.servers = make([]*server.Server, 3)
	var wg sync.WaitGroup
	for i := range c.opts {
		wg.Go(func() { c.start(i) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, s := range c.servers {
			if s != nil {
				s.Shutdown()
				s.WaitForShutdown()
			}
		}
	})
	return c
}

// start runs node i on its ports and store.
func (c *cluster) start(i int) {
	srv, err := server.NewServer(c.opts[i].Clone())
	require.NoError(c.t, err)
	go srv.Start()
	require.True(c.t, srv.ReadyForConnections(clusterWait), "node %d ready", i+1)
	c.servers[i] = srv
}

// stop shuts node i down.
func (c *cluster) stop(i int) {
	c.servers[i].Shutdown()
	c.servers[i].WaitForShutdown()
	c.servers[i] = nil
}

// url lists the three nodes for a client.
func (c *cluster) url() string {
	var urls []string
	for _, o := range c.opts {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", o.Port))
	}
	return strings.Join(urls, ",")
}

// connect connects as user to all three nodes, as the binaries do.
func (c *cluster) connect(user string) (*nats.Conn, jetstream.JetStream) {
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	nc, js, err := bus.Connect(ctx, c.url(), nats.UserInfo(user, password(user)), nats.Name("cluster-test-"+user))
	require.NoError(c.t, err)
	c.t.Cleanup(nc.Close)
	return nc, js
}

// leaderOf returns the index of the node leading stream.
func (c *cluster) leaderOf(js jetstream.JetStream, stream string) int {
	var leader string
	require.Eventually(c.t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		if err != nil || info.Cluster == nil {
			return false
		}
		leader = info.Cluster.Leader
		return leader != ""
	}, clusterWait, 100*time.Millisecond, "stream %s has a leader", stream)
	for i, o := range c.opts {
		if o.ServerName == leader {
			return i
		}
	}
	c.t.Fatalf("leader %q of %s is no node", leader, stream)
	return -1
}

// rawWriter appends a session's raw events to its Redis stream as a
// sidecar does: text messages numbered from 0.
type rawWriter struct {
	rdb  *redis.Client
	next map[string]int
}

func (w *rawWriter) write(t *testing.T, ids []string, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		for _, id := range ids {
			k := w.next[id]
			data := fmt.Sprintf(`{"message_id":"m%d","block_type":"text","text":"%d"}`, k, k)
			require.NoError(t, w.rdb.XAdd(ctx, &redis.XAddArgs{Stream: relay.EventsKey(id), Values: []any{
				"type", "assistant_message", "data", data, "ts", strconv.FormatInt(time.Now().UnixMilli(), 10),
			}}).Err())
			w.next[id] = k + 1
		}
	}
}

// TestClusterLosesANodeMidStream runs the relay and the transcript worker
// on the three-node cluster with three-replica streams. Sessions stream raw
// events while the leader of AGENTS_SIDECAR_EVENTS is stopped and later
// the node leading the relay's session bucket: the relay and the worker
// carry on with the two nodes left, and after each node is back every
// event is stored once, in order, and projected once.
func TestClusterLosesANodeMidStream(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	_, opJS := c.connect("operator")
	require.Eventually(t, func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
		defer pcancel()
		return bus.ProvisionWith(pctx, opJS, bus.ProvisionOptions{Replicas: 3}) == nil
	}, clusterWait, time.Second, "the streams are provisioned with three replicas")
	for _, name := range []string{bus.StreamSidecarEvents, bus.StreamEvents, bus.StreamCommands} {
		s, err := opJS.Stream(ctx, name)
		require.NoError(t, err)
		require.Equal(t, 3, s.CachedInfo().Config.Replicas, name)
	}

	// The runtime marks the sessions live; the relay and the transcript
	// worker run as their own users.
	_, runtimeJS := c.connect("runtime")
	sessions, err := relay.SessionsKV(ctx, runtimeJS)
	require.NoError(t, err)
	ids := []string{uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()}
	for _, id := range ids {
		require.NoError(t, relay.Activate(ctx, sessions, id))
	}
	redisURL := testenv.RedisURL(t)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	_, relayJS := c.connect("relay")
	r, err := relay.New(relay.Config{Redis: testenv.RedisClient(t, redisURL), JetStream: relayJS, Name: "relay-cluster",
		Block: 200 * time.Millisecond, LeaseTTL: 2 * time.Second, TrimInterval: -1})
	require.NoError(t, err)
	wg.Go(func() { assert.NoError(t, r.Run(ctx)) })

	pool := testenv.Postgres(t)
	_, transcriptJS := c.connect("transcript")
	wg.Go(func() { _ = projections.NewTranscript(pool).Run(ctx, transcriptJS) })

	w := &rawWriter{rdb: testenv.RedisClient(t, redisURL), next: map[string]int{}}
	carriedOn := func(phase string) {
		t.Helper()
		for _, id := range ids {
			require.Eventually(t, func() bool {
				var n int
				err := pool.QueryRow(ctx, `SELECT count(*) FROM agent_messages WHERE session_id = $1`, id).Scan(&n)
				return err == nil && n == w.next[id]
			}, clusterWait, 100*time.Millisecond, "%s: session %s projected up to event %d", phase, id, w.next[id])
		}
	}

	w.write(t, ids, 50)
	carriedOn("before")

	for _, stream := range []string{bus.StreamSidecarEvents, "KV_" + relay.SessionsBucket} {
		down := c.leaderOf(opJS, stream)
		var writing sync.WaitGroup
		writing.Go(func() { w.write(t, ids, 50) })
		time.Sleep(50 * time.Millisecond)
		c.stop(down)
		writing.Wait()
		w.write(t, ids, 50)
		carriedOn(fmt.Sprintf("without the leader of %s", stream))

		c.start(down)
		w.write(t, ids, 50)
		carriedOn(fmt.Sprintf("with the leader of %s back", stream))
	}

	// Every raw event is stored once and in order, and the restarted
	// nodes hold every message of the streams again.
	checkStored(t, opJS, ids, w.next)
	for _, id := range ids {
		rows, err := pool.Query(ctx, `SELECT content FROM agent_messages WHERE session_id = $1 ORDER BY source_seq`, id)
		require.NoError(t, err)
		var texts []string
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			texts = append(texts, s)
		}
		require.NoError(t, rows.Err())
		require.Len(t, texts, w.next[id])
		for k, s := range texts {
			require.Equal(t, strconv.Itoa(k), s, "session %s: message %d", id, k)
		}
	}
	require.Eventually(t, func() bool { return replicasCurrent(t, opJS, bus.StreamSidecarEvents) }, clusterWait,
		200*time.Millisecond, "every replica of %s is current", bus.StreamSidecarEvents)
}

// checkStored reads AGENTS_SIDECAR_EVENTS and checks each session's events
// 0..want-1 are there once each, in order.
func checkStored(t *testing.T, js jetstream.JetStream, ids []string, want map[string]int) {
	t.Helper()
	ctx := context.Background()
	total := 0
	for _, id := range ids {
		total += want[id]
	}
	stream, err := js.Stream(ctx, bus.StreamSidecarEvents)
	require.NoError(t, err)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(total), info.State.Msgs, "raw events stored")
	require.Equal(t, uint64(total), info.State.LastSeq-info.State.FirstSeq+1, "no gap in the stream")
	next := map[string]int{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		// Each message is read by its sequence: a cluster that just had a
		// node back may still be electing, and a read that finds no
		// leader yet is tried again, where a consumer would have to be
		// created again first.
		var m *jetstream.RawStreamMsg
		require.Eventually(t, func() bool {
			get, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			m, err = stream.GetMsg(get, seq)
			return err == nil
		}, clusterWait, 100*time.Millisecond, "message %d read", seq)
		var ev relay.Event
		require.NoError(t, json.Unmarshal(m.Data, &ev))
		var d struct{ Text string }
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		require.Equal(t, strconv.Itoa(next[ev.SessionID]), d.Text, "session %s: event out of order or repeated", ev.SessionID)
		next[ev.SessionID]++
	}
	for _, id := range ids {
		assert.Equal(t, want[id], next[id], "session %s", id)
	}
}

// replicasCurrent says whether every replica of stream is current.
func replicasCurrent(t *testing.T, js jetstream.JetStream, stream string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return false
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		return false
	}
	for _, r := range info.Cluster.Replicas {
		if !r.Current || r.Offline || r.Lag != 0 {
			return false
		}
	}
	return true
}
