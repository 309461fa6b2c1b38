package runners

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestChoosePlacesOnTheLiveRunnerWithTheMostRoom(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	leases := map[string]RunnerEntry{
		"a": {Lease: Lease{Name: "a", Capacity: 5}, Revision: 1},
		"b": {Lease: Lease{Name: "b", Capacity: 5}, Revision: 2},
		"c": {Lease: Lease{Name: "c", Capacity: 9, Draining: true}, Revision: 3},
	}
	tests := []struct {
		name string
		load map[string]int
		at   time.Time
		want string
	}{
		{"the first of equals", map[string]int{}, t0, "a"},
		{"the one with more room", map[string]int{"a": 3, "b": 1}, t0, "b"},
		{"none when all are full", map[string]int{"a": 5, "b": 5}, t0, ""},
		{"never a draining one", map[string]int{"a": 5, "b": 5, "c": 0}, t0, ""},
		{"none once the leases lapsed", map[string]int{}, t0.Add(6 * time.Second), ""},
		{"all while no read says they lapsed", map[string]int{"a": 5}, t0, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := Liveness{TTL: 6 * time.Second}
			l.Observe(leases, t0)
			l.Observe(leases, tt.at) // the same revisions, read again
			got, ok := l.Choose(tt.load)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.want != "", ok)
		})
	}
}

func TestALeaseLivesWhileItsRevisionChanges(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	l := Liveness{TTL: 6 * time.Second}
	l.Observe(map[string]RunnerEntry{"a": {Revision: 1}, "b": {Revision: 2}}, t0)
	// a renews; b's entry stays the same revision, as a dead runner's does.
	l.Observe(map[string]RunnerEntry{"a": {Revision: 3}, "b": {Revision: 2}}, t0.Add(4*time.Second))
	assert.True(t, l.Live("b"), "no read yet says it lapsed")
	at := t0.Add(7 * time.Second)
	l.Observe(map[string]RunnerEntry{"a": {Revision: 3}, "b": {Revision: 2}}, at)
	assert.True(t, l.Live("a"))
	assert.False(t, l.Live("b"), "no renewal within the TTL")
	l.Observe(map[string]RunnerEntry{"b": {Revision: 2}}, at)
	assert.False(t, l.Live("a"), "its lease is gone")
	age, ok := l.Age("b", at)
	assert.True(t, ok)
	assert.Equal(t, 7*time.Second, age)
}
