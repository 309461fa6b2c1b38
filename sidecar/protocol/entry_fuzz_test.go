package protocol_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// FuzzParseEntry feeds ParseEntry the fields a Redis entry may carry, as
// any writer of the stream could set them. It never panics, always keeps
// the entry id, and what it accepts has a JSON object for data. The seed
// corpus is in testdata/fuzz/FuzzParseEntry.
func FuzzParseEntry(f *testing.F) {
	f.Add("assistant_message", `{"message_id":"m1","block_type":"text","text":"hi"}`, "1700000000000", "", true)
	f.Add("pause_ack", `{"command_id":"c1"}`, "1", "", true)
	f.Add("pause", `{}`, "x", "6f1c2b0e-3d4a-4e5f-8a9b-0c1d2e3f4a5b", true)
	f.Add("", `[]`, "", "", false)
	f.Fuzz(func(t *testing.T, typ, data, ts, commandID string, hasData bool) {
		fields := map[string]any{protocol.FieldType: typ, protocol.FieldTS: ts}
		if hasData {
			fields[protocol.FieldData] = data
		}
		if commandID != "" {
			fields[protocol.FieldCommandID] = commandID
		}
		e, err := protocol.ParseEntry("1-0", fields)
		if e.ID != "1-0" {
			t.Fatalf("lost the entry id: %+v", e)
		}
		if err != nil {
			return
		}
		if e.Type != typ || typ == "" {
			t.Fatalf("type %q read as %q", typ, e.Type)
		}
		if !json.Valid(e.Data) || !bytes.HasPrefix(bytes.TrimLeft(e.Data, " \t\r\n"), []byte("{")) {
			t.Fatalf("accepted data that is not a JSON object: %q", e.Data)
		}
	})
}
