package claude_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// mcpServer is a minimal MCP server over the streamable HTTP transport:
// JSON-RPC requests by POST, each answered with one JSON response. It
// serves one tool that echoes its input.
type mcpServer struct {
	srv  *httptest.Server
	tool string

	mu      sync.Mutex
	methods []string
}

func newMCPServer(t *testing.T, tool string) *mcpServer {
	m := &mcpServer{tool: tool}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

// URL is the server's endpoint.
func (m *mcpServer) URL() string { return m.srv.URL + "/mcp" }

// called reports whether a client sent method.
func (m *mcpServer) called(method string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, got := range m.methods {
		if got == method {
			return true
		}
	}
	return false
}

func (m *mcpServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		// No server-initiated stream: the client goes on without one.
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.methods = append(m.methods, req.Method)
	m.mu.Unlock()
	if len(req.ID) == 0 {
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	var result any
	switch req.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(req.Params, &p)
		result = map[string]any{
			"protocolVersion": p.ProtocolVersion,
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      map[string]any{"name": "orders", "version": "1.0.0"},
		}
	case "tools/list":
		result = map[string]any{"tools": []any{map[string]any{
			"name": m.tool, "description": "Looks an order up by its number.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"number": map[string]any{"type": "string"}}},
		}}}
	case "tools/call":
		result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "order found: " + string(req.Params)}}}
	default:
		result = map[string]any{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
}
