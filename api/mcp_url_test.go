package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckMCPServerURL(t *testing.T) {
	t.Parallel()
	const (
		ok       = ""
		scheme   = "http or https"
		metadata = "cloud metadata"
		link     = "link-local"
		private  = "loopback or private"
		dotted   = "dotted decimal"
	)
	tests := []struct {
		url string
		// want is what the refusal mentions, without and with private
		// ranges allowed.
		want, allowed string
	}{
		{"https://mcp.example.com/tickets", ok, ok},
		{"http://tools.example:8080/mcp", ok, ok},
		{"https://203.0.113.7/mcp", ok, ok},
		{"https://[2001:db8::1]/mcp", ok, ok},
		{"stdio:///usr/bin/lint-mcp", scheme, scheme},
		{"file:///etc/passwd", scheme, scheme},
		{"gopher://mcp.example.com", scheme, scheme},
		{"ws://mcp.example.com", scheme, scheme},
		{"https:///no-host", scheme, scheme},
		{"/relative", scheme, scheme},
		{"http://169.254.169.254/latest/meta-data/", metadata, metadata},
		{"http://[fd00:ec2::254]/latest/meta-data/", metadata, metadata},
		{"http://[::ffff:169.254.169.254]/", metadata, metadata},
		{"http://[64:ff9b::a9fe:a9fe]/", metadata, metadata},
		{"http://metadata.google.internal/computeMetadata/v1/", metadata, metadata},
		{"http://METADATA.google.internal./computeMetadata/v1/", metadata, metadata},
		{"http://100.100.100.200/latest/meta-data/", metadata, metadata},
		{"http://169.254.1.1/", link, link},
		{"http://[fe80::1]/", link, link},
		{"http://[fe80::1%25eth0]/", link, link},
		{"http://2852039166/", dotted, dotted},
		{"http://0xA9FEA9FE/", dotted, dotted},
		{"http://0251.0376.0251.0376/", dotted, dotted},
		{"http://169.254.43518/", dotted, dotted},
		{"http://127.0.0.1:9000/mcp", private, ok},
		{"http://[::1]/mcp", private, ok},
		{"http://localhost:9000/mcp", private, ok},
		{"http://api.localhost/mcp", private, ok},
		{"http://10.1.2.3/mcp", private, ok},
		{"http://172.16.0.1/mcp", private, ok},
		{"http://192.168.1.10/mcp", private, ok},
		{"http://100.64.0.1/mcp", private, ok},
		{"http://0.0.0.0/mcp", private, ok},
		{"http://[fd12:3456::1]/mcp", private, ok},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			for allow, want := range map[bool]string{false: tt.want, true: tt.allowed} {
				got := checkMCPServerURL(tt.url, allow)
				if want == ok {
					assert.Empty(t, got, "allowPrivate=%v", allow)
				} else {
					assert.Contains(t, got, want, "allowPrivate=%v", allow)
				}
			}
		})
	}
}

// TestMCPAllowPrivate: the operator's switch lets a tool's server be on a
// loopback or private address, and never on a metadata one; the refusal
// names the field.
func TestMCPAllowPrivate(t *testing.T) {
	t.Parallel()
	tool := func(uri string) ToolDefinitionRequest {
		return ToolDefinitionRequest{Name: "x", Description: "d", InputSchema: map[string]any{"type": "object"}, ServerURI: uri}
	}
	strict, allowing := newServer(t, Config{}, Deps{}), newServer(t, Config{MCPAllowPrivate: true}, Deps{})

	_, err := strict.toolDefinitionsOf("customToolDefinitions", []ToolDefinitionRequest{tool("https://mcp.example.com"), tool("http://127.0.0.1:9000/mcp")})
	var f FieldError
	require.ErrorAs(t, err, &f)
	assert.Equal(t, "customToolDefinitions[1].serverUri", f.Field())
	assert.Contains(t, err.Error(), MCPAllowPrivateEnv)

	d, err := allowing.toolDefinitionOf("", tool("http://127.0.0.1:9000/mcp"))
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:9000/mcp", d.ServerURI)
	_, err = allowing.toolDefinitionOf("", tool("http://169.254.169.254/"))
	require.ErrorAs(t, err, &f)
	assert.Equal(t, "serverUri", f.Field())
}
