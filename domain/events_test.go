package domain_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

// TestEveryEventIsRegistered parses the package's sources and checks that
// every type named ...Event is in the registry consumers decode with.
func TestEveryEventIsRegistered(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var declared []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && strings.HasSuffix(ts.Name.Name, "Event") && ts.Name.IsExported() {
				if _, isStruct := ts.Type.(*ast.StructType); isStruct {
					declared = append(declared, ts.Name.Name)
				}
			}
			return true
		})
	}
	types := domain.EventTypes()
	assert.Len(t, types, len(declared), "declared events: %v", declared)
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	for _, name := range types {
		assert.Regexp(t, snake, name)
		assert.NotEmpty(t, domain.AggregateTypeOf(name), name)
	}
	assert.Equal(t, len(types), len(slices.Compact(slices.Sorted(slices.Values(types)))), "names are unique")
	for _, want := range []string{"session_pause_requested", "session_paused", "message_enqueued", "session_budget_exhausted",
		"session_pool_exhausted", "tool_permission_requested", "session_chain_created", "memory_pill_recorded", "agent_template_created"} {
		assert.True(t, domain.IsEventType(want), want)
	}
}

// TestEventsRoundTripAsJSON: what a repository writes to the outbox decodes
// back to the same typed event, with lowerCamelCase fields.
func TestEventsRoundTripAsJSON(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	require.NoError(t, s.UpdateMetrics(usage("opus", domain.Dollars(9), 1, 1, 1000), t0))
	require.NoError(t, s.RecordUserQuestionAsked("A?", []string{"A", "B"}, t0))
	require.NoError(t, s.RecordUserQuestionAnswered("A", t0))
	require.NoError(t, s.RecordTurnCompleted(t0))
	q := newQueue(t)
	_, err := q.Enqueue(uuid.New(), "hi", domain.PriorityImmediate, domain.MessageFromUser, domain.StatusIdle, t0)
	require.NoError(t, err)
	c := newChain(t, sessionID)

	events := append(append(s.PopEvents(), q.PopEvents()...), c.PopEvents()...)
	require.NotEmpty(t, events)
	for _, e := range events {
		data, err := json.Marshal(e)
		require.NoError(t, err)
		back, err := domain.DecodeEvent(e.EventType(), data)
		require.NoError(t, err)
		assert.Equal(t, e, back, e.EventType())
		assert.Equal(t, e.AggregateType(), domain.AggregateTypeOf(e.EventType()))
		assert.Equal(t, ownerID, e.AggregateOwnerID())
		assert.Equal(t, t0, e.EventTime())

		var fields map[string]any
		require.NoError(t, json.Unmarshal(data, &fields))
		assert.Contains(t, fields, "ownerId", e.EventType())
		assert.Contains(t, fields, "occurredAt", e.EventType())
	}
	var warning map[string]any
	for _, e := range events {
		if e.EventType() == "session_budget_warning" {
			data, _ := json.Marshal(e)
			require.NoError(t, json.Unmarshal(data, &warning))
		}
	}
	assert.Equal(t, 9.0, warning["spentUsd"], "money is a JSON number in dollars")
	assert.Equal(t, sessionID.String(), warning["sessionId"])

	_, err = domain.DecodeEvent("no_such_event", []byte(`{}`))
	require.ErrorIs(t, err, domain.ErrValidation)
}
