package bus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPublishCosts checks the choice between one atomic batch and single
// publishes follows what the publisher measured.
func TestPublishCosts(t *testing.T) {
	c := newPublishCosts()
	assert.False(t, c.asBatch(1), "a lone message never goes as a batch")

	// A slow disk for single publishes, batches cheap: short runs batch.
	for range 50 {
		c.observe(10, false, 10*5*time.Millisecond)
		c.observe(10, true, 6*time.Millisecond)
	}
	assert.True(t, c.asBatch(2))

	// Single publishes cheap against batches: runs below the crossover go
	// one by one, longer ones as a batch.
	for range 50 {
		c.observe(4, false, 4*time.Millisecond)
		c.observe(10, true, 12*time.Millisecond)
	}
	assert.False(t, c.asBatch(8))
	assert.True(t, c.asBatch(16))

	// Large batches take longer for their size, not for a batch's fixed
	// cost: they leave the choice for short runs as it was.
	for range 50 {
		c.observe(1000, true, 300*time.Millisecond)
	}
	assert.True(t, c.asBatch(16), "the time of large batches must not push short runs to single publishes")
}
