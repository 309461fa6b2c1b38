package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	composetypes "github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/sidecar/runners"
)

// TestRunnersListsEachRunnerWithItsSessions lists two runners, one of
// them draining, with the sessions assigned to each; a waiting session
// counts for none.
func TestRunnersListsEachRunnerWithItsSessions(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	ctx := context.Background()
	store, err := runners.Open(ctx, js, time.Minute)
	require.NoError(t, err)
	require.NoError(t, store.Renew(ctx, runners.Lease{Name: "b", Capacity: 3, Draining: true}))
	require.NoError(t, store.Renew(ctx, runners.Lease{Name: "a", Capacity: 5}))
	for i, runner := range []string{"a", "a", "b", ""} {
		_, err := store.Put(ctx, runners.Assignment{SessionID: string(rune('p' + i)), Runner: runner}, 0)
		require.NoError(t, err)
	}
	rows, err := runnerRows(ctx, store, time.Now())
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, printRunners(&out, rows, true))
	var got []runnerRow
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	require.Len(t, got, 2)
	assert.Equal(t, runnerRow{Name: "a", Capacity: 5, Sessions: 2}, withoutAge(got[0]))
	assert.Equal(t, runnerRow{Name: "b", Capacity: 3, Sessions: 1, Draining: true}, withoutAge(got[1]))
	assert.GreaterOrEqual(t, got[0].LeaseAge, 0.0)

	out.Reset()
	require.NoError(t, printRunners(&out, rows, false))
	assert.Contains(t, out.String(), "NAME")
	assert.Contains(t, out.String(), "true")
}

func withoutAge(r runnerRow) runnerRow {
	r.LeaseAge = 0
	return r
}

// TestComposeRunsTwoRunnersOnTheRuntimesFiles checks compose.yaml: two
// runner services as the NATS user runner, given longer to stop than a
// drain lasts, that see the workspace and the checkpoint stores where the
// runtime worker does, which runs no runner itself.
func TestComposeRunsTwoRunnersOnTheRuntimesFiles(t *testing.T) {
	t.Parallel()
	var runtime composetypes.ServiceConfig
	var runnerServices []composetypes.ServiceConfig
	for _, s := range composeServices(t) {
		switch {
		case runsWorker(s, "runtime"):
			runtime = s
		case len(s.Command) > 0 && s.Command[0] == "runner":
			runnerServices = append(runnerServices, s)
		}
	}
	require.NotEmpty(t, runtime.Name, "a compose service runs the runtime worker")
	assert.Equal(t, "0", *runtime.Environment["AGENTBUS_RUNNER_CAPACITY"], "the runtime worker leaves the sidecars to the runners")
	require.Len(t, runnerServices, 2)
	names := map[string]bool{}
	for _, s := range runnerServices {
		assert.Equal(t, "runner", *s.Environment["NATS_USER"], "service %s", s.Name)
		require.NotNil(t, s.StopGracePeriod, "service %s", s.Name)
		assert.Greater(t, time.Duration(*s.StopGracePeriod), defaultDrainTimeout, "service %s is killed before its drain ends", s.Name)
		assert.ElementsMatch(t, mounts(runtime), mounts(s), "service %s sees the runtime's files elsewhere", s.Name)
		assert.Equal(t, *runtime.Environment["AGENTBUS_DATA_DIR"], *s.Environment["AGENTBUS_DATA_DIR"])
		i := slices.Index(s.Command, "--name")
		require.GreaterOrEqual(t, i, 0, "service %s names its runner", s.Name)
		names[s.Command[i+1]] = true
	}
	assert.Len(t, names, 2, "each runner has a name of its own")
}

// mounts are the volumes of s as source:target.
func mounts(s composetypes.ServiceConfig) []string {
	var out []string
	for _, v := range s.Volumes {
		out = append(out, v.Source+":"+v.Target)
	}
	return out
}
