package queries_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
)

// transcript stores a transcript for session id: two parent messages and
// one subagent message, a finished and a pending parent tool call and a
// subagent call, the subagent, three output log chunks and a decision,
// and five activity items (the third a subagent's).
func (f *fixture) transcript(t *testing.T, id, sub uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		_, err := f.db.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	at := func(seq int) time.Time { return t0.Add(time.Duration(seq) * time.Second) }
	for _, m := range []struct {
		seq     int
		sub     *uuid.UUID
		source  string
		content string
	}{{1, nil, "Agent", "Looking around."}, {3, &sub, "SubAgent", "Reading the config."}, {6, nil, "Agent", "Done."}} {
		exec(`INSERT INTO agent_messages (id, session_id, source_seq, subagent_id, source, content, model_id, occurred_at)
			VALUES ($1, $2, $3, $4, $5, $6, 'claude-sonnet-4-5', $7)`, uuid.New(), id, m.seq, m.sub, m.source, m.content, at(m.seq))
	}
	exec(`INSERT INTO tool_calls (id, session_id, tool_use_id, source_seq, subagent_id, tool_name, input, status, result, result_is_error, result_seq, started_at, completed_at)
		VALUES ($1, $2, 'toolu_1', 2, NULL, 'Bash', '{"command":"ls"}', 'Error', 'ls: denied', true, 5, $3, $4)`, uuid.New(), id, at(2), at(5))
	exec(`INSERT INTO tool_calls (id, session_id, tool_use_id, source_seq, subagent_id, tool_name, input, status, started_at)
		VALUES ($1, $2, 'toolu_2', 4, $3, 'Read', '{"file_path":"/etc/x"}', 'Pending', $4)`, uuid.New(), id, sub, at(4))
	exec(`INSERT INTO tool_calls (id, session_id, tool_use_id, source_seq, subagent_id, tool_name, input, status, started_at)
		VALUES ($1, $2, 'toolu_3', 7, NULL, 'Edit', '{}', 'Pending', $3)`, uuid.New(), id, at(7))
	exec(`INSERT INTO subagent_sessions (session_id, id, engine_subagent_id, subagent_type, parent_tool_use_id, model_id, objective, status, source_seq, started_at)
		VALUES ($1, $2, 'agent_1', 'Explore', 'toolu_task', 'claude-haiku-4-5', 'Survey the config', 'Running', 3, $3)`, id, sub, at(3))
	for _, c := range []struct {
		seq     any
		kind    string
		content string
		at      time.Time
	}{{1, "output", "Looking around.", at(1)}, {2, "output", "[tool] Bash", at(2)}, {nil, "decision", "Keep the layout", at(2)}, {6, "output", "Done.", at(6)}} {
		exec(`INSERT INTO session_log_chunks (id, session_id, kind, content, source_seq, recorded_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			uuid.New(), id, c.kind, c.content, c.seq, c.at)
	}
	for seq := 1; seq <= 5; seq++ {
		var subID *string
		if seq == 3 {
			s := sub.String()
			subID = &s
		}
		exec(`INSERT INTO activity_items (id, session_id, source_seq, raw_type, type, summary, tool_name, subagent_id, occurred_at)
			VALUES ($1, $2, $3, 'assistant_message', 'Message', $4, '', $5, $6)`, uuid.New(), id, seq, "item "+string(rune('0'+seq)), subID, at(seq))
	}
}

func TestTranscriptReadsAreScopedToTheOwner(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	alice, bob := uuid.New(), uuid.New()
	s, _ := f.session(t, alice, t0, f.start)
	f.transcript(t, s.ID(), uuid.New())
	for _, c := range []struct {
		name  string
		owner uuid.UUID
		id    uuid.UUID
	}{{"another owner's", bob, s.ID()}, {"an unknown", alice, uuid.New()}} {
		for name, call := range map[string]func() error{
			"messages": func() error {
				_, err := f.store.Messages(ctx, queries.TranscriptParams{Owner: c.owner, Session: c.id})
				return err
			},
			"tool calls": func() error {
				_, err := f.store.ToolCalls(ctx, queries.TranscriptParams{Owner: c.owner, Session: c.id})
				return err
			},
			"subagents": func() error { _, err := f.store.SubAgents(ctx, c.owner, c.id); return err },
			"logs":      func() error { _, err := f.store.Logs(ctx, c.owner, c.id, queries.Paging{}); return err },
			"activity": func() error {
				_, err := f.store.Activity(ctx, queries.ActivityParams{Owner: c.owner, Session: c.id})
				return err
			},
		} {
			assert.ErrorIs(t, call(), queries.ErrNotFound, "%s session: %s", c.name, name)
		}
	}
}

func TestMessagesAreTheParentsUnlessASubagentIsAsked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	owner, sub := uuid.New(), uuid.New()
	s, _ := f.session(t, owner, t0, f.start)
	f.transcript(t, s.ID(), sub)

	contents := func(p queries.Page[queries.Message]) []string {
		out := []string{}
		for _, m := range p.Items {
			out = append(out, m.Content)
		}
		return out
	}
	tests := []struct {
		name      string
		sub       *uuid.UUID
		paging    queries.Paging
		want      []string
		wantTotal int
	}{
		{"parent only", nil, queries.Paging{}, []string{"Looking around.", "Done."}, 2},
		{"the subagent's only", &sub, queries.Paging{}, []string{"Reading the config."}, 1},
		{"another subagent's", func() *uuid.UUID { u := uuid.New(); return &u }(), queries.Paging{}, []string{}, 0},
		{"second page", nil, queries.Paging{Page: 2, PageSize: 1}, []string{"Done."}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := f.store.Messages(ctx, queries.TranscriptParams{Owner: owner, Session: s.ID(), SubAgentID: tt.sub, Paging: tt.paging})
			require.NoError(t, err)
			assert.Equal(t, tt.want, contents(page))
			assert.Equal(t, tt.wantTotal, page.Total)
		})
	}
	page, err := f.store.Messages(ctx, queries.TranscriptParams{Owner: owner, Session: s.ID(), SubAgentID: &sub})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	assert.Equal(t, domain.SourceSubAgent, page.Items[0].Source)
	assert.Equal(t, &sub, page.Items[0].SubAgentID)
}

func TestToolCallsCarryTheirResults(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	owner, sub := uuid.New(), uuid.New()
	s, _ := f.session(t, owner, t0, f.start)
	f.transcript(t, s.ID(), sub)

	page, err := f.store.ToolCalls(ctx, queries.TranscriptParams{Owner: owner, Session: s.ID()})
	require.NoError(t, err)
	require.Len(t, page.Items, 2, "the subagent's call is not the parent's")
	done, pending := page.Items[0], page.Items[1]
	assert.Equal(t, "Bash", done.ToolName)
	assert.Equal(t, domain.ToolCallError, done.Status)
	assert.Equal(t, &domain.ToolResult{Content: "ls: denied", IsError: true}, done.Result)
	require.NotNil(t, done.CompletedAt)
	assert.Equal(t, t0.Add(5*time.Second), done.CompletedAt.UTC())
	assert.Equal(t, domain.ToolCallPending, pending.Status)
	assert.Nil(t, pending.Result)
	assert.Nil(t, pending.CompletedAt)

	page, err = f.store.ToolCalls(ctx, queries.TranscriptParams{Owner: owner, Session: s.ID(), SubAgentID: &sub})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	assert.Equal(t, "Read", page.Items[0].ToolName)

	subs, err := f.store.SubAgents(ctx, owner, s.ID())
	require.NoError(t, err)
	require.Len(t, subs, 1)
	assert.Equal(t, sub, subs[0].ID)
	assert.Equal(t, s.ID(), subs[0].ParentSessionID)
	assert.Equal(t, domain.StatusRunning, subs[0].Status)
	assert.Equal(t, "Survey the config", subs[0].Objective)
	assert.Equal(t, "Explore", subs[0].Type)
}

func TestLogsAreReplayedInOrderWithTheirSequenceNumbers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	owner := uuid.New()
	s, _ := f.session(t, owner, t0, f.start)
	f.transcript(t, s.ID(), uuid.New())

	page, err := f.store.Logs(ctx, owner, s.ID(), queries.Paging{})
	require.NoError(t, err)
	assert.Equal(t, 4, page.Total)
	var got []string
	for i, c := range page.Items {
		assert.EqualValues(t, i, c.SequenceNumber)
		got = append(got, c.Kind+": "+c.Content)
	}
	assert.Equal(t, []string{"output: Looking around.", "output: [tool] Bash", "decision: Keep the layout", "output: Done."}, got,
		"by time recorded; a decision logged in the same instant follows the output")

	page, err = f.store.Logs(ctx, owner, s.ID(), queries.Paging{Page: 2, PageSize: 3})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	assert.EqualValues(t, 3, page.Items[0].SequenceNumber, "numbers count the whole log, not the page")
}

func TestActivityReadsOnFromACursorOrATime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	owner, sub := uuid.New(), uuid.New()
	s, _ := f.session(t, owner, t0, f.start)
	f.transcript(t, s.ID(), sub)

	tests := []struct {
		name       string
		params     queries.ActivityParams
		want       []int64
		wantCursor int64
	}{
		{"all", queries.ActivityParams{}, []int64{1, 2, 3, 4, 5}, 5},
		{"limit", queries.ActivityParams{Limit: 2}, []int64{1, 2}, 2},
		{"after a cursor", queries.ActivityParams{After: 2, Limit: 2}, []int64{3, 4}, 4},
		{"nothing new keeps the cursor", queries.ActivityParams{After: 5}, []int64{}, 5},
		{"since a time", queries.ActivityParams{Since: t0.Add(3 * time.Second)}, []int64{4, 5}, 5},
		{"one subagent's", queries.ActivityParams{SubAgentID: &sub}, []int64{3}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.params
			p.Owner, p.Session = owner, s.ID()
			page, err := f.store.Activity(ctx, p)
			require.NoError(t, err)
			got := []int64{}
			for _, it := range page.Items {
				got = append(got, it.Cursor)
				assert.Equal(t, domain.ActivityMessage, it.Type)
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantCursor, page.NextCursor)
		})
	}
	page, err := f.store.Activity(ctx, queries.ActivityParams{Owner: owner, Session: s.ID(), SubAgentID: &sub})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	assert.Equal(t, &sub, page.Items[0].SubAgentID)
	assert.Equal(t, "item 3", page.Items[0].Summary)
}
