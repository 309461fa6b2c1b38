package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/agentbus/agentbus/sidecar/launcher"
)

// checkpointRetention reads the checkpoint retention of a runner's
// sidecars: AGENTBUS_CHECKPOINT_KEEP, how many of a session's newest
// checkpoints are kept, and AGENTBUS_CHECKPOINT_MAX_AGE, the age (a Go
// duration, 72h) past which they are pruned. Unset keeps them all.
func checkpointRetention() (launcher.CheckpointRetention, error) {
	var r launcher.CheckpointRetention
	if v := os.Getenv("AGENTBUS_CHECKPOINT_KEEP"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return r, fmt.Errorf("AGENTBUS_CHECKPOINT_KEEP=%q: want a number of checkpoints, 0 for all", v)
		}
		r.Keep = n
	}
	if v := os.Getenv("AGENTBUS_CHECKPOINT_MAX_AGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || (d > 0 && d < time.Second) {
			return r, fmt.Errorf("AGENTBUS_CHECKPOINT_MAX_AGE=%q: want a duration of a second or more, 0 for any age", v)
		}
		r.MaxAge = d
	}
	return r, nil
}
