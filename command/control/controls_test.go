package control_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command/control"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

func TestTheTableIsComplete(t *testing.T) {
	require.NoError(t, control.Check(control.All()))
	assert.Len(t, control.All(), len(protocol.ControlCommandTypes), "one control a control command of the protocol")
}

// Every field of a row, and of its route, is required: blanking any one
// of them makes Check fail, naming it. A field added to Control without a
// check fails here.
func TestCheckRefusesAnIncompleteRow(t *testing.T) {
	for _, base := range control.All() {
		for _, path := range fieldPaths(reflect.TypeOf(base), nil) {
			name := strings.Join(path, ".")
			if name == "SidecarData" || name == "RequestForced" {
				continue // nil is allowed: the reaction composes the data; the control cannot be forced
			}
			t.Run(base.Name+"/"+name, func(t *testing.T) {
				row := base
				reflect.ValueOf(&row).Elem().FieldByIndex(indexOf(reflect.TypeOf(row), path)).SetZero()
				err := control.Check([]control.Control{row})
				require.Error(t, err)
				want := name
				if name == "Name" {
					want = "no name"
				}
				assert.Contains(t, err.Error(), want)
			})
		}
	}
}

func TestCheckRefusesWhatTheProtocolDoesNotKnow(t *testing.T) {
	row := control.All()[0]
	row.Sidecar = domain.SidecarCommand("dance")
	assert.ErrorContains(t, control.Check([]control.Control{row}), `the protocol has no command "dance"`)

	row = control.All()[0]
	row.Ack = protocol.SessionStarted{}
	assert.ErrorContains(t, control.Check([]control.Control{row}), "echoes no command_id")

	row = control.All()[0]
	row.Requested = domain.SessionPausedEvent{}
	assert.ErrorContains(t, control.Check([]control.Control{row}), "names no commandId")
}

func TestCheckRefusesTwoRowsForOneThing(t *testing.T) {
	rows := control.All()
	twin := rows[1]
	twin.Name = "pause-again"
	err := control.Check(append(rows, twin))
	require.Error(t, err)
	for _, what := range []string{"request", "confirm", "sidecar command", "route", "requested event", "ack"} {
		assert.Contains(t, err.Error(), "share the "+what)
	}
}

func TestLookups(t *testing.T) {
	for _, c := range control.All() {
		byEvent, ok := control.ByRequested(c.Requested.EventType())
		require.True(t, ok, c.Name)
		assert.Equal(t, c.Name, byEvent.Name)
		byAck, ok := control.ByAck(c.Ack.EventType())
		require.True(t, ok, c.Name)
		assert.Equal(t, c.Name, byAck.Name)
	}
	_, ok := control.ByAck(protocol.EventSessionStarted)
	assert.False(t, ok)
	_, ok = control.ByRequested("session_paused")
	assert.False(t, ok)
}

// fieldPaths lists the leaf fields of a struct type, descending into
// nested structs (Route).
func fieldPaths(t reflect.Type, prefix []string) [][]string {
	var out [][]string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		path := append(append([]string(nil), prefix...), f.Name)
		if f.Type.Kind() == reflect.Struct {
			out = append(out, fieldPaths(f.Type, path)...)
			continue
		}
		out = append(out, path)
	}
	return out
}

func indexOf(t reflect.Type, path []string) []int {
	var index []int
	for _, name := range path {
		f, _ := t.FieldByName(name)
		index = append(index, f.Index...)
		t = f.Type
	}
	return index
}
