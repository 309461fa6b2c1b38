package protocol_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/protocol"
	"github.com/agentbus/agentbus/sidecar/protocol/protocoltest"
)

func readme(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	return string(raw)
}

func TestEveryTypeHasItsData(t *testing.T) {
	for _, typ := range append(append([]string(nil), protocol.EventTypes...), protocol.CommandTypes...) {
		_, ok := protocol.NewData(typ)
		assert.True(t, ok, typ)
	}
	_, ok := protocol.NewData(protocol.TypeInvalid)
	assert.False(t, ok)
	for _, typ := range protocol.EventTypes {
		data, _ := protocol.NewData(typ)
		ev, ok := data.(protocol.Event)
		require.True(t, ok, "%s is an Event", typ)
		assert.Equal(t, typ, ev.EventType())
		assert.True(t, protocol.IsEventType(typ))
		assert.False(t, protocol.IsCommandType(typ) && typ != protocol.EventError, typ)
	}
	for _, typ := range protocol.CommandTypes {
		assert.True(t, protocol.IsCommandType(typ))
	}
	assert.False(t, protocol.IsEventType(protocol.TypeInvalid))
	assert.False(t, protocol.IsEventType(""))
	assert.False(t, protocol.IsCommandType("dance"))
}

// Every example of README.md decodes strictly into its Go type, and the
// Go type writes it back to the same JSON: the documentation and the types
// say the same thing, field by field.
func TestEveryReadmeExampleRoundTrips(t *testing.T) {
	examples, err := protocoltest.Examples(readme(t))
	require.NoError(t, err)
	require.Len(t, examples, len(protocol.EventTypes)+len(protocol.CommandTypes), "one example a type")
	for _, ex := range examples {
		t.Run(ex.Name, func(t *testing.T) {
			v, ok := protocol.NewData(ex.Name)
			require.True(t, ok, "README documents %q, which the protocol does not have", ex.Name)
			require.NoError(t, protocoltest.Strictly(ex.Data, v), "%s", ex.Data)
			again, err := json.Marshal(v)
			require.NoError(t, err)
			assert.JSONEq(t, string(ex.Data), string(again))

			// Through a stream entry and back.
			var values []any
			if protocol.IsCommandType(ex.Name) {
				values, err = protocol.CommandValues(ex.Name, ex.CommandID, v, time.UnixMilli(ex.TS))
			} else {
				values, err = protocol.EventValues(v.(protocol.Event), time.UnixMilli(ex.TS))
			}
			require.NoError(t, err)
			e, err := protocol.ParseEntry("1-0", fields(values))
			require.NoError(t, err)
			wantID := ex.CommandID
			if wantID == "" { // an event that names a command carries its id in data
				var inData struct {
					CommandID string `json:"command_id"`
				}
				require.NoError(t, json.Unmarshal(ex.Data, &inData))
				wantID = inData.CommandID
			}
			assert.Equal(t, protocol.Entry{ID: "1-0", Type: ex.Name, TS: ex.TS, CommandID: wantID, Data: e.Data}, e)
			assert.JSONEq(t, string(ex.Data), string(e.Data))
		})
	}
}

func TestTheReadmeConfigRoundTrips(t *testing.T) {
	raw, err := protocoltest.ConfigExample(readme(t))
	require.NoError(t, err)
	cfg, err := protocol.ParseConfig(raw)
	require.NoError(t, err)
	var strict protocol.Config
	require.NoError(t, protocoltest.Strictly(raw, &strict))
	again, err := json.Marshal(strict)
	require.NoError(t, err)
	var back protocol.Config
	require.NoError(t, protocoltest.Strictly(again, &back))
	twice, err := json.Marshal(back)
	require.NoError(t, err)
	assert.JSONEq(t, string(again), string(twice))
	// What the example sets survives, but for an empty list, which
	// says no more than its absence.
	var example, written map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &example))
	require.NoError(t, json.Unmarshal(again, &written))
	for key, value := range example {
		if string(value) == "[]" {
			continue
		}
		assert.JSONEq(t, string(value), string(written[key]), key)
	}
	assert.Equal(t, strict.SessionID, cfg.SessionID)
}

// The raw-event envelope the relay writes is what the ACL reads back.
func TestRawEventRoundTrips(t *testing.T) {
	for _, ev := range []protocol.RawEvent{
		{SessionID: "s-1", EntryID: "1700000000000-0", Type: protocol.EventPauseAck, TS: 1700000000000,
			Data: json.RawMessage(`{"command_id":"c-1"}`)},
		{SessionID: "s-1", EntryID: "1700000000001-0", Type: protocol.TypeInvalid, TS: 0,
			Error: `unknown type "nope"`, Fields: map[string]string{"type": "nope", "data": "{}"}},
	} {
		raw, err := json.Marshal(ev)
		require.NoError(t, err)
		var back protocol.RawEvent
		require.NoError(t, protocoltest.Strictly(raw, &back))
		assert.Equal(t, ev, back)
	}
}

func TestParseEntryRefusesMalformedEntries(t *testing.T) {
	for name, tc := range map[string]struct {
		fields map[string]any
		err    string
	}{
		"no type":         {map[string]any{"data": "{}", "ts": "1"}, "missing type"},
		"data not JSON":   {map[string]any{"type": "pause", "data": "{", "ts": "1"}, "data is not JSON"},
		"data not object": {map[string]any{"type": "pause", "data": "[1]", "ts": "1"}, "data is not a JSON object"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := protocol.ParseEntry("1-0", tc.fields)
			assert.EqualError(t, err, tc.err)
		})
	}
	e, err := protocol.ParseEntry("1-0", map[string]any{"type": "pause", "ts": "5"})
	require.NoError(t, err)
	assert.JSONEq(t, `{}`, string(e.Data), "an entry without data has an empty object")
	e, err = protocol.ParseEntry("1-0", map[string]any{"type": "pause", "data": `{"command_id":"c-9"}`, "ts": "5"})
	require.NoError(t, err)
	assert.Equal(t, "c-9", e.CommandID, "a command id inside data is accepted")
}

func TestValuesRefuseDataThatIsNotAnObject(t *testing.T) {
	_, err := protocol.Values(protocol.CommandPause, []int{1}, time.Now())
	assert.ErrorContains(t, err, "not a JSON object")
	v, err := protocol.Values(protocol.CommandResume, nil, time.UnixMilli(42))
	require.NoError(t, err)
	assert.Equal(t, []any{"type", "resume", "data", "{}", "ts", "42"}, v)
}

func fields(values []any) map[string]any {
	out := make(map[string]any, len(values)/2)
	for i := 0; i+1 < len(values); i += 2 {
		out[values[i].(string)] = values[i+1]
	}
	return out
}
