package claude_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeModel is a scripted Anthropic Messages API on loopback: the only part
// of a claude session the tests replace. Each request of the main agent
// (one that offers tools) takes the next reply of the script and gets it
// streamed as server-sent events; other requests (titles, summaries) and
// requests past the script's end get a short text.
type fakeModel struct {
	t   *testing.T
	srv *httptest.Server

	mu     sync.Mutex
	script []reply
	// routes are scripts of their own for the conversations that hold
	// their marker, so that several sessions share one model.
	routes   map[string]*route
	requests []modelRequest
	changed  chan struct{}
	seq      int
}

// route is the script of the conversations that hold a marker.
type route struct {
	t      testing.TB
	script []reply
}

// route gives the conversations holding marker a script of their own; a
// mismatch fails t.
func (f *fakeModel) route(t testing.TB, marker string, script ...reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.routes == nil {
		f.routes = map[string]*route{}
	}
	f.routes[marker] = &route{t: t, script: script}
}

// remainingOf returns how many replies of the route of marker are unused.
func (f *fakeModel) remainingOf(marker string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.routes[marker].script)
}

// reply is one scripted model message.
type reply struct {
	// blocks are the message's content blocks, in order.
	blocks []block
	// hold keeps the stream open this long before message_stop (or until
	// the client goes away), to have a model call in flight.
	hold time.Duration
	// match, when set, must hold for the request this reply answers; the
	// test fails otherwise.
	match func(modelRequest) error
	// inputTokens, when set, is the input the reply's usage reports,
	// instead of an estimate from the request.
	inputTokens int
	// only, when set, makes the reply optional: a request it does not
	// hold for skips it, for the next reply.
	only func(modelRequest) bool
}

// block is a text block (text) or a tool_use block (tool, input).
type block struct {
	text  string
	tool  string
	input any
	id    string
}

func text(s string) block { return block{text: s} }

func toolUse(id, tool string, input any) block { return block{id: id, tool: tool, input: input} }

// modelRequest is what the tests look at in a request.
type modelRequest struct {
	Model    string          `json:"model"`
	Messages []modelMessage  `json:"messages"`
	Tools    []modelTool     `json:"tools"`
	System   json.RawMessage `json:"system"`
}

type modelTool struct {
	Name string `json:"name"`
}

type modelMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// blocks returns a message's content blocks (a string content is one text
// block).
func (m modelMessage) blocks() []contentBlock {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []contentBlock{{Type: "text", Text: s}}
	}
	var bs []contentBlock
	_ = json.Unmarshal(m.Content, &bs)
	return bs
}

// lastUser returns the text of every block of the last user message,
// tool results included.
func (r modelRequest) lastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role != "user" {
			continue
		}
		var b strings.Builder
		for _, c := range r.Messages[i].blocks() {
			b.WriteString(c.Text)
			b.WriteString(resultText(c.Content))
			b.WriteString("\n")
		}
		return b.String()
	}
	return ""
}

// allText returns the text of every message of the request.
func (r modelRequest) allText() string {
	var b strings.Builder
	for _, m := range r.Messages {
		for _, c := range m.blocks() {
			b.WriteString(c.Text)
			b.WriteString(resultText(c.Content))
			b.WriteString("\n")
		}
	}
	return b.String()
}

// toolResult returns the tool_result block for id, if the request has one.
func (r modelRequest) toolResult(id string) (contentBlock, bool) {
	for _, m := range r.Messages {
		for _, c := range m.blocks() {
			if c.Type == "tool_result" && c.ToolUseID == id {
				c.Text = resultText(c.Content)
				return c, true
			}
		}
	}
	return contentBlock{}, false
}

func resultText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []contentBlock
	_ = json.Unmarshal(raw, &bs)
	var b strings.Builder
	for _, c := range bs {
		b.WriteString(c.Text)
	}
	return b.String()
}

func newFakeModel(t *testing.T, script ...reply) *fakeModel {
	f := &fakeModel{t: t, script: script, changed: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the base URL for ANTHROPIC_BASE_URL.
func (f *fakeModel) URL() string { return f.srv.URL }

// mainRequests returns the main agent's requests so far.
func (f *fakeModel) mainRequests() []modelRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]modelRequest(nil), f.requests...)
}

// remaining returns how many scripted replies are still unused.
func (f *fakeModel) remaining() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.script)
}

func (f *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		// count_tokens and anything else: a plausible small answer.
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"input_tokens": 10}`)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req modelRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rep := reply{blocks: []block{text("OK.")}}
	if len(req.Tools) > 0 {
		f.mu.Lock()
		f.requests = append(f.requests, req)
		script, t := &f.script, testing.TB(f.t)
		conversation := req.allText()
		for marker, r := range f.routes {
			if strings.Contains(conversation, marker) {
				script, t = &r.script, r.t
			}
		}
		for len(*script) > 0 && (*script)[0].only != nil && !(*script)[0].only(req) {
			*script = (*script)[1:]
		}
		if len(*script) > 0 {
			rep, *script = (*script)[0], (*script)[1:]
		} else {
			rep = reply{blocks: []block{text("Nothing more to do.")}}
		}
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()
		if rep.match != nil {
			if err := rep.match(req); err != nil {
				t.Errorf("model request %d: %v\nlast user message: %s", len(f.mainRequests()), err, req.lastUser())
			}
		}
	}
	f.stream(w, r, req, rep)
}

// stream writes rep as the Messages API's server-sent events.
func (f *fakeModel) stream(w http.ResponseWriter, r *http.Request, req modelRequest, rep reply) {
	f.mu.Lock()
	f.seq++
	msgID := fmt.Sprintf("msg_fake_%03d", f.seq)
	f.mu.Unlock()
	model := req.Model
	if model == "" {
		model = "claude-sonnet-4-5"
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("request-id", "req_"+msgID)
	flusher, _ := w.(http.Flusher)
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	inputTokens := rep.inputTokens
	if inputTokens == 0 {
		for _, m := range req.Messages {
			inputTokens += len(m.Content) / 4
		}
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": inputTokens, "output_tokens": 1,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	stop, output := "end_turn", 0
	for i, b := range rep.blocks {
		if b.tool != "" {
			stop = "tool_use"
			input, _ := json.Marshal(b.input)
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b.id, "name": b.tool, "input": map[string]any{}}})
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
			output += len(input) / 4
		} else {
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "text_delta", "text": b.text}})
			output += len(b.text)/4 + 1
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	if rep.hold > 0 {
		select {
		case <-time.After(rep.hold):
		case <-r.Context().Done():
			return
		}
	}
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": output}})
	send("message_stop", map[string]any{"type": "message_stop"})
}
