package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestNATSReplicasMustBeANumber: a NATS_REPLICAS that does not parse stops
// the process instead of leaving a cluster on single-replica streams.
func TestNATSReplicasMustBeANumber(t *testing.T) {
	for _, v := range []string{"three", "0", "-1"} {
		t.Setenv("NATS_REPLICAS", v)
		in := &infra{}
		err := in.connectNATSWithEnvReplicas(context.Background(), "nats://127.0.0.1:1")
		assert.ErrorContains(t, err, "NATS_REPLICAS", v)
		in.Close()
	}
}
