package nats_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	natsdefs "github.com/agentbus/agentbus/nats"
)

func streams(t *testing.T) map[string]jetstream.StreamConfig {
	t.Helper()
	files, err := fs.Glob(natsdefs.Definitions, "streams/*.json")
	require.NoError(t, err)
	out := map[string]jetstream.StreamConfig{}
	for _, f := range files {
		var cfg jetstream.StreamConfig
		b, err := fs.ReadFile(natsdefs.Definitions, f)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &cfg), f)
		assert.Equal(t, strings.TrimSuffix(path.Base(f), ".json"), cfg.Name, "%s is named after its file", f)
		out[cfg.Name] = cfg
	}
	return out
}

func TestStreams(t *testing.T) {
	t.Parallel()
	got := streams(t)
	want := map[string]struct {
		subject   string
		retention jetstream.RetentionPolicy
	}{
		"AGENTS_COMMANDS":         {"agents.cmd.>", jetstream.WorkQueuePolicy},
		"AGENTS_EVENTS":           {"agents.evt.>", jetstream.LimitsPolicy},
		"AGENTS_SIDECAR_EVENTS":   {"agents.sidecar.*.events.>", jetstream.LimitsPolicy},
		"AGENTS_SIDECAR_COMMANDS": {"agents.sidecar.*.commands.>", jetstream.WorkQueuePolicy},
		"AGENTS_DLQ":              {"agents.dlq.>", jetstream.LimitsPolicy},
	}
	require.Len(t, got, len(want))
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			cfg, ok := got[name]
			require.True(t, ok)
			assert.Equal(t, []string{w.subject}, cfg.Subjects)
			assert.Equal(t, w.retention, cfg.Retention)
			assert.Equal(t, jetstream.FileStorage, cfg.Storage)
			assert.Equal(t, 1, cfg.Replicas)
			assert.True(t, cfg.AllowAtomicPublish, "atomic batches")
			assert.Positive(t, cfg.MaxBytes, "bounded by size")
			assert.Positive(t, cfg.Duplicates, "a duplicate window")
			if w.retention == jetstream.LimitsPolicy {
				assert.Positive(t, cfg.MaxAge, "kept for a while, then aged out")
				assert.Equal(t, jetstream.DiscardOld, cfg.Discard)
			} else {
				// A full work queue refuses new commands rather than dropping
				// unhandled ones.
				assert.Equal(t, jetstream.DiscardNew, cfg.Discard)
			}
		})
	}
}

func TestConsumers(t *testing.T) {
	t.Parallel()
	strs := streams(t)
	files, err := fs.Glob(natsdefs.Definitions, "consumers/*/*.json")
	require.NoError(t, err)
	byStream := map[string][]jetstream.ConsumerConfig{}
	for _, f := range files {
		stream := path.Base(path.Dir(f))
		t.Run(stream+"/"+path.Base(f), func(t *testing.T) {
			s, ok := strs[stream]
			require.True(t, ok, "folder %s names a stream", stream)
			var cfg jetstream.ConsumerConfig
			b, err := fs.ReadFile(natsdefs.Definitions, f)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &cfg))

			assert.Equal(t, strings.TrimSuffix(path.Base(f), ".json"), cfg.Durable, "named after its file")
			assert.Equal(t, jetstream.AckExplicitPolicy, cfg.AckPolicy)
			assert.Equal(t, jetstream.DeliverAllPolicy, cfg.DeliverPolicy)
			assert.Zero(t, cfg.InactiveThreshold, "a durable never expires")
			assert.Positive(t, cfg.MaxAckPending)
			assert.NotEqual(t, "created by bus.Run", cfg.Description, "a file says what its consumer is for")
			// The server would use a backoff as the ack deadline of each
			// delivery: a delivery whose process died would hold its
			// message for the schedule's long tail. The schedule of
			// failed handlers is the runner's, in retry_backoff.
			assert.Empty(t, cfg.BackOff, "retry_backoff, not backoff")
			assert.Positive(t, cfg.AckWait, "the ack wait bounds a crashed delivery")
			assert.LessOrEqual(t, cfg.AckWait, 30*time.Second, "a crashed delivery comes back soon")
			assert.Greater(t, cfg.MaxDeliver, 1, "handler attempts plus the spare delivery")
			if cfg.PriorityPolicy == jetstream.PriorityPolicyPinned {
				assert.LessOrEqual(t, cfg.PinnedTTL, 10*time.Second, "a crashed pinned copy hands over soon")
			}
			var retries struct {
				RetryBackoff []time.Duration `json:"retry_backoff"`
			}
			require.NoError(t, json.Unmarshal(b, &retries))
			for _, d := range retries.RetryBackoff {
				assert.GreaterOrEqual(t, d, time.Second)
			}
			filters := cfg.FilterSubjects
			if cfg.FilterSubject != "" {
				filters = append(filters, cfg.FilterSubject)
			}
			require.NotEmpty(t, filters)
			for _, f := range filters {
				assert.True(t, within(f, s.Subjects), "filter %s lies within the stream's subjects", f)
			}
			byStream[stream] = append(byStream[stream], cfg)
		})
	}
	for _, want := range []string{"AGENTS_COMMANDS/commands", "AGENTS_SIDECAR_COMMANDS/relay-outbound", "AGENTS_SIDECAR_EVENTS/acl", "AGENTS_EVENTS/pool", "AGENTS_EVENTS/runtime"} {
		_, err := fs.Stat(natsdefs.Definitions, "consumers/"+want+".json")
		assert.NoError(t, err, want)
	}
	// A work queue hands each message to one consumer only: their filters
	// must not overlap.
	for name, s := range strs {
		if s.Retention != jetstream.WorkQueuePolicy {
			continue
		}
		cs := byStream[name]
		for i := range cs {
			for j := i + 1; j < len(cs); j++ {
				assert.False(t, overlap(cs[i].FilterSubject, cs[j].FilterSubject), "%s: %s and %s overlap", name, cs[i].Durable, cs[j].Durable)
			}
		}
	}
}

func TestServerConfigs(t *testing.T) {
	setPasswords(t) // the configs include users.conf, whose passwords come from the environment
	opts, err := server.ProcessConfigFile("server.conf")
	require.NoError(t, err)
	assert.True(t, opts.JetStream)
	assert.True(t, opts.SyncAlways, "fsync before every ack on a single node")
	assert.Equal(t, "127.0.0.1", opts.Host)
	assert.Equal(t, 4222, opts.Port)
	assert.Equal(t, 8222, opts.HTTPPort)

	for i, node := range []string{"nats-1", "nats-2", "nats-3"} {
		t.Run(node, func(t *testing.T) {
			opts, err := server.ProcessConfigFile(fmt.Sprintf("cluster/node-%d.conf", i+1))
			require.NoError(t, err)
			assert.Equal(t, node, opts.ServerName)
			assert.True(t, opts.JetStream)
			assert.Equal(t, "/data", opts.StoreDir)
			assert.Equal(t, "agentbus", opts.Cluster.Name)
			assert.Equal(t, 6222, opts.Cluster.Port)
			assert.Equal(t, 8222, opts.HTTPPort)
			var routes []string
			for _, r := range opts.Routes {
				routes = append(routes, r.Host)
			}
			assert.ElementsMatch(t, []string{"nats-1:6222", "nats-2:6222", "nats-3:6222"}, routes)
		})
	}
}

// within reports whether every subject that filter matches is captured by
// one of subjects (the stream's).
func within(filter string, subjects []string) bool {
	for _, s := range subjects {
		if covers(s, filter) {
			return true
		}
	}
	return false
}

// covers reports whether wide matches every subject narrow matches.
func covers(wide, narrow string) bool {
	w, n := strings.Split(wide, "."), strings.Split(narrow, ".")
	for i, tok := range w {
		if tok == ">" {
			return len(n) > i
		}
		if i >= len(n) || n[i] == ">" || (tok != "*" && (n[i] == "*" || tok != n[i])) {
			return false
		}
	}
	return len(w) == len(n)
}

// overlap reports whether some subject matches both filters.
func overlap(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(at) && i < len(bt); i++ {
		if at[i] == ">" || bt[i] == ">" {
			return true
		}
		if at[i] != "*" && bt[i] != "*" && at[i] != bt[i] {
			return false
		}
	}
	return len(at) == len(bt)
}
