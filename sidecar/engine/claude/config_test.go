package claude_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// systemHas checks that the request's system prompt holds every part.
func systemHas(parts ...string) func(modelRequest) error {
	return func(r modelRequest) error {
		for _, p := range parts {
			if !strings.Contains(string(r.System), p) {
				return fmt.Errorf("the system prompt lacks %q", p)
			}
		}
		return nil
	}
}

func toolNames(r modelRequest) []string {
	names := make([]string, 0, len(r.Tools))
	for _, t := range r.Tools {
		names = append(names, t.Name)
	}
	return names
}

func TestComposedConfigReachesTheModelAndAReloadAddsASkill(t *testing.T) {
	t.Parallel()
	const (
		template = "Template: you work on the orders service."
		skillA   = "Skill A: write tests before code."
		skillB   = "Skill B: keep commits small."
		skillC   = "Skill C: answer in haiku."
	)
	orders := newMCPServer(t, "lookup_order")
	w := newWorld(t,
		reply{match: systemHas(template, skillA, skillB), blocks: []block{text("Ready.")}},
		reply{match: systemHas(template, skillA, skillB, skillC), blocks: []block{text("Haiku ready.")}},
	)
	// The CLI may defer MCP tools behind its tool search; this test wants
	// them offered to the model directly.
	w.engine.Env = append(w.engine.Env, "ENABLE_TOOL_SEARCH=false")
	cfg := w.config("Look at the orders")
	cfg.SystemPrompt = template + "\n\n" + skillA + "\n\n" + skillB
	cfg.AllowedTools = []string{"Read", "Grep", "lookup_order"}
	cfg.MCPTools = []protocol.MCPTool{{Name: "lookup_order", Description: "Looks an order up.", ServerURI: orders.URL()}}
	cfg.StayIdle = true
	h := w.start(cfg)
	h.waitType(protocol.EventTurnCompleted)

	first := w.model.mainRequests()[0]
	names := toolNames(first)
	assert.Contains(t, names, "Read")
	assert.Contains(t, names, "Grep")
	mcpTool := slices.IndexFunc(names, func(n string) bool { return strings.HasPrefix(n, "mcp__") && strings.HasSuffix(n, "__lookup_order") })
	assert.GreaterOrEqual(t, mcpTool, 0, "the MCP tool is offered; tools: %v", names)
	assert.True(t, orders.called("tools/list"), "the CLI asked the MCP server for its tools")
	assert.NotContains(t, string(first.System), skillC)

	reloaded := cfg
	reloaded.Engine = "" // as the control plane composes it: the sidecar keeps its engine
	reloaded.SystemPrompt = cfg.SystemPrompt + "\n\n" + skillC
	reload := h.send(protocol.CommandReloadConfig, protocol.ReloadConfig{Config: &reloaded})
	h.waitFor("reload_config_ack", func(e protocol.Entry) bool {
		return e.Type == protocol.EventReloadConfigAck && field(t, e, "command_id") == reload
	})
	h.send(protocol.CommandSteeringMessage, protocol.SteeringMessage{
		MessageID: "msg-after-reload", Content: "Now in haiku, please.", Priority: protocol.PriorityQueued,
	})
	h.waitFor("the second turn", func(e protocol.Entry) bool {
		return e.Type == protocol.EventTurnCompleted && len(h.ofType(protocol.EventTurnCompleted)) == 2
	})
	reqs := w.model.mainRequests()
	require.Len(t, reqs, 2)
	assert.Contains(t, reqs[1].allText(), "Now in haiku, please.")
	assert.Zero(t, w.model.remaining())
}
