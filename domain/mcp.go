package domain

import (
	"errors"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Limits of tool and subagent definitions.
const (
	MaxDefinitionNameChars   = 100
	MaxToolDescriptionChars  = 500
	schemaResourceURL        = "urn:agentbus:tool-input-schema"
	errRemoteSchemaReference = "schema references must stay inside the schema"
)

// MCPToolDefinition declares a custom tool served by an MCP server. The
// domain checks it before any session can use it, so a bad definition is
// refused when it is added, not when a sidecar starts.
type MCPToolDefinition struct {
	// Name is unique among the tools of a template, skill or subagent.
	Name        string `json:"name"`
	Description string `json:"description"`
	// InputSchema is the tool's input, a JSON Schema of type object.
	InputSchema string `json:"inputSchema"`
	// ServerURI is the absolute URI of the MCP server (http, sse, stdio...).
	ServerURI string `json:"serverUri"`
}

// NewMCPToolDefinition trims and validates a definition.
func NewMCPToolDefinition(name, description, inputSchema, serverURI string) (MCPToolDefinition, error) {
	d := MCPToolDefinition{Name: strings.TrimSpace(name), Description: strings.TrimSpace(description),
		InputSchema: inputSchema, ServerURI: strings.TrimSpace(serverURI)}
	return d, d.Validate()
}

// Validate checks the name (1-100), the description (1-500), that the
// input schema is a valid JSON Schema describing an object, and that the
// server URI is absolute.
func (d MCPToolDefinition) Validate() error {
	if _, err := requireText("name", d.Name, 1, MaxDefinitionNameChars); err != nil {
		return err
	}
	if _, err := requireText("description", d.Description, 1, MaxToolDescriptionChars); err != nil {
		return err
	}
	if err := validateInputSchema(d.InputSchema); err != nil {
		return err
	}
	u, err := url.Parse(d.ServerURI)
	if err != nil || !u.IsAbs() || (u.Host == "" && u.Opaque == "" && u.Path == "") {
		return invalid("serverUri", "must be an absolute URI, got %q", d.ServerURI)
	}
	return nil
}

// denyLoader keeps schema compilation pure: a schema may not pull other
// documents from files or the network.
type denyLoader struct{}

// Load refuses every document.
func (denyLoader) Load(string) (any, error) { return nil, errors.New(errRemoteSchemaReference) }

// validateInputSchema compiles the schema against its meta-schema (draft
// 2020-12 unless it says otherwise) and requires type object, as MCP does.
func validateInputSchema(schema string) error {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		return invalid("inputSchema", "must be valid JSON")
	}
	obj, ok := doc.(map[string]any)
	if !ok || obj["type"] != "object" {
		return invalid("inputSchema", `must be a JSON Schema object with "type": "object"`)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(denyLoader{})
	if err := c.AddResource(schemaResourceURL, doc); err != nil {
		return invalid("inputSchema", "is not a valid JSON Schema: %v", err)
	}
	if _, err := c.Compile(schemaResourceURL); err != nil {
		return invalid("inputSchema", "is not a valid JSON Schema: %v", err)
	}
	return nil
}

// validateToolSet checks each definition and that names are unique.
func validateToolSet(field string, tools []MCPToolDefinition) error {
	seen := map[string]bool{}
	for _, t := range tools {
		if err := t.Validate(); err != nil {
			return err
		}
		if seen[t.Name] {
			return invalid(field, "tool name %q appears twice", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// SkillSubAgentDefinition is a subagent a skill provides.
type SkillSubAgentDefinition struct {
	// Name is unique within the skill (test-runner).
	Name            string              `json:"name"`
	Description     string              `json:"description"`
	ModelID         string              `json:"modelId"`
	Instructions    string              `json:"instructions"`
	ToolDefinitions []MCPToolDefinition `json:"toolDefinitions"`
}

// Validate checks the name (1-100), the model and the subagent's tools.
func (d SkillSubAgentDefinition) Validate() error {
	if _, err := requireText("subAgent.name", d.Name, 1, MaxDefinitionNameChars); err != nil {
		return err
	}
	if _, err := requireText("subAgent.modelId", d.ModelID, 1, 200); err != nil {
		return err
	}
	return validateToolSet("subAgent.toolDefinitions", d.ToolDefinitions)
}

func cloneSubAgentDefs(defs []SkillSubAgentDefinition) []SkillSubAgentDefinition {
	if defs == nil {
		return nil
	}
	out := make([]SkillSubAgentDefinition, len(defs))
	for i, d := range defs {
		d.ToolDefinitions = append([]MCPToolDefinition(nil), d.ToolDefinitions...)
		out[i] = d
	}
	return out
}
