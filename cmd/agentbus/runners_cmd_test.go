package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

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
