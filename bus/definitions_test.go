package bus_test

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

func TestSubjectMatches(t *testing.T) {
	t.Parallel()
	tests := []struct {
		filter, subject string
		want            bool
	}{
		{"agents.cmd.>", "agents.cmd.session.pause", true},
		{"agents.cmd.>", "agents.cmd", false},
		{"agents.cmd.>", "agents.evt.session.1.x", false},
		{"agents.sidecar.*.events.>", "agents.sidecar.s1.events.pause_ack", true},
		{"agents.sidecar.*.events.>", "agents.sidecar.s1.commands.pause", false},
		{"agents.sidecar.*.events.>", "agents.sidecar.s1.events", false},
		{"a.b", "a.b", true},
		{"a.b", "a.b.c", false},
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
	}
	for _, tt := range tests {
		t.Run(tt.filter+"~"+tt.subject, func(t *testing.T) {
			assert.Equal(t, tt.want, bus.SubjectMatches(tt.filter, tt.subject))
		})
	}
}

func TestDefaultDefinitions(t *testing.T) {
	t.Parallel()
	defs, err := bus.DefaultDefinitions()
	require.NoError(t, err)

	var names []string
	for _, s := range defs.Streams {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{bus.StreamCommands, bus.StreamDLQ, bus.StreamEvents, bus.StreamSidecarCommands, bus.StreamSidecarEvents}, names)

	tests := []struct {
		subject, stream string
	}{
		{bus.CommandSubject("session", "pause"), bus.StreamCommands},
		{bus.EventSubject("session", "0b5e", "session_paused"), bus.StreamEvents},
		{bus.SidecarEventSubject("0b5e", "pause_ack"), bus.StreamSidecarEvents},
		{bus.SidecarCommandSubject("0b5e", "pause"), bus.StreamSidecarCommands},
		{bus.DLQSubject("pool"), bus.StreamDLQ},
		{"elsewhere.x", ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.stream, defs.StreamFor(tt.subject), tt.subject)
	}

	for stream, consumers := range map[string][]string{
		bus.StreamCommands:        {"commands"},
		bus.StreamEvents:          {"pool", "runtime", "sidecar-dispatch"},
		bus.StreamSidecarEvents:   {"acl", "transcript", "autocontinue-results"},
		bus.StreamSidecarCommands: {"relay-outbound"},
	} {
		for _, name := range consumers {
			c := defs.Consumer(stream, name)
			require.NotNil(t, c, "%s/%s", stream, name)
			assert.Equal(t, jetstream.AckExplicitPolicy, c.AckPolicy)
		}
	}
}

func TestLoadDefinitionsRejects(t *testing.T) {
	t.Parallel()
	stream := `{"name":"S","subjects":["s.>"],"retention":"limits","storage":"file"}`
	tests := []struct {
		name  string
		files fstest.MapFS
	}{
		{"stream named unlike its file", fstest.MapFS{
			"streams/T.json": {Data: []byte(stream)},
		}},
		{"consumer named unlike its file", fstest.MapFS{
			"streams/S.json":     {Data: []byte(stream)},
			"consumers/S/a.json": {Data: []byte(`{"durable_name":"b"}`)},
		}},
		{"consumer of an undefined stream", fstest.MapFS{
			"streams/S.json":     {Data: []byte(stream)},
			"consumers/X/a.json": {Data: []byte(`{"durable_name":"a"}`)},
		}},
		{"invalid JSON", fstest.MapFS{
			"streams/S.json": {Data: []byte(`{"name":`)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bus.LoadDefinitions(tt.files)
			assert.Error(t, err)
		})
	}
}

func TestRunRefusesADefinitionWithOtherFilters(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	defs, err := bus.DefaultDefinitions()
	require.NoError(t, err)
	handler := func(context.Context, jetstream.Msg) error { return nil }
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()

	err = bus.Run(ctx, js, bus.RunnerConfig{Stream: bus.StreamEvents, Consumer: "runtime", Handler: handler,
		Definitions: defs, FilterSubjects: []string{"agents.evt.session.*.session_allocated"}})
	require.Error(t, err, "the file selects more subjects than the runner handles")
	assert.Contains(t, err.Error(), "runtime")
}
