package proccpu

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTreeHoldsThisProcessAndItsChildren(t *testing.T) {
	child := exec.Command("sleep", "30")
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

	// Spend some CPU, so this process's time is above zero.
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	var self, sleep int
	for _, p := range Tree() {
		if p.Self {
			self++
			assert.Positive(t, p.CPU)
		}
		if p.Name == "sleep" {
			sleep++
		}
	}
	assert.Equal(t, 1, self, "this process, once")
	assert.Equal(t, 1, sleep, "its child")
}
