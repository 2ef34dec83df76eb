package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"regexp"
	"strings"

	"github.com/axgate/axgate/manifest"
)

const toolsAbout = `
Prints the manifest's actions as tool definitions, for handing to a model or
serving from a tool server:

  mcp        the result of an MCP tools/list: {"tools": [...]}, with the MCP
             annotations (readOnlyHint, destructiveHint, idempotentHint) and
             the AXAG safety block in _meta["axag/safety"]
  openai     OpenAI function tools: [{"type":"function","function":{name,
             description, parameters}}]
  anthropic  Anthropic tools: [{name, description, input_schema}]

The input schemas are the ones axgate enforces. OpenAI and Anthropic accept
tool names of 1–64 letters, digits, "_" and "-" only; a manifest whose tool
names do not fit fails (exit 1) rather than producing definitions the
provider would refuse.`

func runTools(_ context.Context, e *env, args []string) int {
	flags := newFlags(e, "tools", "tools MANIFEST [--format mcp|openai|anthropic]", toolsAbout)
	format := flags.String("format", "mcp", "output format: mcp, openai or anthropic")
	pos, err := parseFlags(e, flags, args)
	if err != nil {
		return flagStatus(err)
	}
	if len(pos) != 1 {
		return usageError(e, flags, "want exactly one MANIFEST, got %d arguments", len(pos))
	}
	if !oneOf(*format, "mcp", "openai", "anthropic") {
		return usageError(e, flags, "--format must be mcp, openai or anthropic, not %q", *format)
	}
	if err := fileArg(pos[0]); err != nil {
		return fileError(e, "tools", err)
	}
	m, err := manifest.LoadFile(pos[0])
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		// A file that cannot be read is a usage error, as for lint: exit 2,
		// not the 1 of a manifest that is wrong.
		return usageError(e, flags, "%v", err)
	}
	if err != nil {
		return failf(e, "tools", "%v\n(run \"axgate lint %s\" for fixes)", err, pos[0])
	}
	var out any
	switch *format {
	case "mcp":
		out = struct {
			Tools []manifest.MCPTool `json:"tools"`
		}{m.MCPTools()}
	case "openai":
		if bad := badProviderNames(m); len(bad) > 0 {
			return failf(e, "tools", "OpenAI refuses these tool names (want ^[a-zA-Z0-9_-]{1,64}$; set operation_id): %s", strings.Join(bad, ", "))
		}
		out = openAITools(m)
	case "anthropic":
		if bad := badProviderNames(m); len(bad) > 0 {
			return failf(e, "tools", "Anthropic refuses these tool names (want ^[a-zA-Z0-9_-]{1,64}$; set operation_id): %s", strings.Join(bad, ", "))
		}
		out = anthropicTools(m)
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return failf(e, "tools", "%v", err)
	}
	return exitOK
}

// providerNameRE is the tool name both OpenAI and Anthropic accept.
var providerNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func badProviderNames(m *manifest.Manifest) []string {
	var bad []string
	for _, a := range m.Actions {
		if !providerNameRE.MatchString(a.ToolName()) {
			bad = append(bad, a.ToolName())
		}
	}
	return bad
}

// OpenAIFunction is an OpenAI function tool (Chat Completions "tools").
type OpenAIFunction struct {
	Type     string           `json:"type"`
	Function OpenAIDefinition `json:"function"`
}

// OpenAIDefinition is the function of an OpenAIFunction.
type OpenAIDefinition struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
}

// AnthropicTool is an Anthropic Messages API tool.
type AnthropicTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"input_schema"`
}

func openAITools(m *manifest.Manifest) []OpenAIFunction {
	out := make([]OpenAIFunction, 0, len(m.Actions))
	for _, t := range m.Tools() {
		out = append(out, OpenAIFunction{Type: "function", Function: OpenAIDefinition{
			Name: t.Name, Description: t.Description, Parameters: providerSchema(t.InputSchema),
		}})
	}
	return out
}

func anthropicTools(m *manifest.Manifest) []AnthropicTool {
	out := make([]AnthropicTool, 0, len(m.Actions))
	for _, t := range m.Tools() {
		out = append(out, AnthropicTool{Name: t.Name, Description: t.Description, InputSchema: providerSchema(t.InputSchema)})
	}
	return out
}

// providerSchema returns the input schema without its "$schema" member,
// which the providers do not expect at the top of a tool's parameters. The
// manifest's own map is shared and never modified.
func providerSchema(s map[string]any) map[string]any {
	out := make(map[string]any, len(s))
	for k, v := range s {
		if k != "$schema" {
			out[k] = v
		}
	}
	return out
}
