package acl

import (
	"encoding/json"
	"testing"

	"github.com/agentbus/agentbus/internal/jsontext"
	"github.com/agentbus/agentbus/relay"
)

// FuzzTranslate feeds the ACL raw events of every type with any data. It
// never panics; an event whose text passes the edge check becomes an
// activity item and commands whose text Postgres can store; an event that
// fails it is described by an item that Postgres can store as well. The
// seed corpus is in testdata/fuzz/FuzzTranslate.
func FuzzTranslate(f *testing.F) {
	f.Add("assistant_message", []byte(`{"message_id":"m1","block_type":"tool_use","tool_use_id":"t1","tool_name":"AskUserQuestion","input":{"questions":[{"question":"Keep?","options":[{"label":"Yes"},"No"]}]}}`))
	f.Add("assistant_message", []byte(`{"block_type":"tool_use","tool_name":"TodoWrite","input":{"todos":[{"content":"a","status":"in_progress"}]}}`))
	f.Add("usage_update", []byte(`{"model":"m","cost_usd":1e308,"input_tokens":1}`))
	f.Add("session_end", []byte(`{"status":"error","failure_reason":"Nope","exit_code":1}`))
	f.Add("message_delivered", []byte(`{"message_id":"not-a-uuid"}`))
	f.Add("tool_result", []byte(`{"tool_use_id":"t1","content":"a\u0000b"}`))
	f.Fuzz(func(t *testing.T, typ string, data []byte) {
		ev := relay.Event{SessionID: "0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10", EntryID: "1-0", Type: typ, TS: 1}
		if json.Valid(data) {
			ev.Data = data
		}
		body, err := json.Marshal(ev)
		if err != nil {
			return
		}
		if p := invalidText(body); p != nil {
			storable(t, invalidTextActivity(ev, p).Summary, invalidTextActivity(ev, p).Detail)
			return
		}
		tr, err := translate(ev)
		if err != nil {
			a := unknownActivity(ev, err)
			storable(t, a.Summary)
			return
		}
		storable(t, tr.activity.Summary, tr.activity.Detail, tr.activity.ToolName, tr.toolUseID)
		for _, c := range tr.commands {
			raw, err := json.Marshal(c.data)
			if err != nil {
				t.Fatalf("%s: command %s does not encode: %v", typ, c.name, err)
			}
			if p, err := jsontext.Check(raw); err != nil || p != nil {
				t.Fatalf("%s: command %s carries text Postgres refuses: %v %v", typ, c.name, p, err)
			}
		}
	})
}

func storable(t *testing.T, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if reason := jsontext.CheckString(s); reason != "" {
			t.Fatalf("%q %s", s, reason)
		}
	}
}
