package claude

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// mcpServers groups the config's MCP tools by the server that serves them;
// servers are named in order of first appearance, so a config names the
// same servers the same way on every launch.
type mcpServers struct {
	names []string          // server names, in order
	uris  map[string]string // server name -> URI
	tools map[string]string // tool name -> the name the CLI gives it
}

func groupMCPTools(tools []protocol.MCPTool) mcpServers {
	g := mcpServers{uris: map[string]string{}, tools: map[string]string{}}
	byURI := map[string]string{}
	for _, t := range tools {
		if !isHTTP(t.ServerURI) {
			continue // the CLI reaches MCP servers here over HTTP only
		}
		name, ok := byURI[t.ServerURI]
		if !ok {
			name = serverName(t.ServerURI, len(g.names)+1)
			byURI[t.ServerURI] = name
			g.names = append(g.names, name)
			g.uris[name] = t.ServerURI
		}
		if _, seen := g.tools[t.Name]; !seen {
			g.tools[t.Name] = "mcp__" + name + "__" + t.Name
		}
	}
	return g
}

func isHTTP(uri string) bool {
	u, err := url.Parse(uri)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

var notNameChar = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// serverName derives a readable server name from its host; the index
// keeps two servers on one host apart.
func serverName(uri string, index int) string {
	host := "server"
	if u, err := url.Parse(uri); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	return fmt.Sprintf("agentbus_%d_%s", index, strings.Trim(notNameChar.ReplaceAllString(host, "_"), "_"))
}

// config returns the --mcp-config JSON: every server over the streamable
// HTTP transport.
func (g mcpServers) config() (string, error) {
	servers := make(map[string]any, len(g.names))
	for _, name := range g.names {
		servers[name] = map[string]string{"type": "http", "url": g.uris[name]}
	}
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	return string(b), err
}

// allowed maps allowed tool names to the CLI's names: an MCP tool is
// known to the CLI as mcp__<server>__<tool>.
func (g mcpServers) allowed(tools []string) []string {
	out := make([]string, 0, len(tools))
	for _, t := range tools {
		if cli, ok := g.tools[t]; ok {
			t = cli
		}
		out = append(out, t)
	}
	return out
}
