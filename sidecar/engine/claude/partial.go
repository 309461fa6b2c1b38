package claude

import (
	"encoding/json"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// streamEvent is the part of a Messages API server-sent event the engine
// reads.
type streamEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message struct {
		ID string `json:"id"`
	} `json:"message"`
	Delta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"delta"`
}

// streamEvent writes the main agent's text deltas as text_delta events, so
// a live view shows the text while the model writes it. The finished
// blocks still come as assistant frames, which are the record; a
// subagent's partial text is left out, as its messages are whole.
func (t *turn) streamEvent(f *frame) error {
	if f.parent() != "" {
		return nil
	}
	var ev streamEvent
	if err := json.Unmarshal(f.Event, &ev); err != nil {
		t.s.log.Warn("stream_event frame without an event", "error", err)
		return nil
	}
	switch ev.Type {
	case "message_start":
		t.streaming = ev.Message.ID
	case "content_block_delta":
		if ev.Delta.Type != "text_delta" || ev.Delta.Text == "" {
			return nil
		}
		return t.s.host.Emit(protocol.TextDelta{MessageID: t.streaming, Index: ev.Index, Text: ev.Delta.Text})
	}
	return nil
}
