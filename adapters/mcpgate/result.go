package mcpgate

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// Refusal renders a refusal as a tool result the model can read and correct itself from.
//
// isError is set, the first text block explains the refusal in words (code,
// message, each violation, what to do next), the second carries the AXAG
// envelope as JSON for clients that pass only text to the model, and
// structuredContent is the envelope itself:
//
//	{"error":{"code":"AXAG_MISSING_PARAM","type":"parameter_error","message":…,"details":{…}}}
func Refusal(e *axerr.Error) *mcp.CallToolResult {
	env := e.Envelope()
	raw, err := json.Marshal(env)
	if err != nil {
		// Details hold a value that does not marshal: keep what does.
		env.Error.Details = map[string]any{"retryable": e.Retryable()}
		raw, _ = json.Marshal(env)
	}
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{
			&mcp.TextContent{Text: e.Text()},
			&mcp.TextContent{Text: string(raw)},
		},
		StructuredContent: json.RawMessage(raw),
	}
}

// JSONRPCError renders a refusal as the JSON-RPC error of the MCP wire:
// -32602 for parameter errors, -32000 otherwise, with the AXAG code, type,
// details and violations in data. Return it from a tool handler as it is: the
// SDK keeps the code and data only of an unwrapped *jsonrpc.Error.
func JSONRPCError(e *axerr.Error) *jsonrpc.Error {
	re := e.ToJSONRPC()
	data, err := json.Marshal(re.Data)
	if err != nil {
		data = nil
	}
	return &jsonrpc.Error{Code: int64(re.Code), Message: re.Message, Data: data}
}

// Forwarded is the value of a tool that passed the call on to another MCP server.
//
// The gateway of package gateway does that. Result is what reaches the
// client: what that server answered, or the checked part of it (see
// gateway.KeepUncheckedContent); Value is the data of the
// result, which the postconditions, the output_schema and an idempotency
// record see (MarshalJSON renders Value, not Result), since they describe
// what the tool returns, not the MCP envelope around it.
type Forwarded struct {
	Result *mcp.CallToolResult
	Value  any
}

// MarshalJSON renders the data of the result: Value.
func (f *Forwarded) MarshalJSON() ([]byte, error) { return json.Marshal(f.Value) }

// Success renders what a tool returned.
//
// A *mcp.CallToolResult is passed on as it is, so a tool can shape its own
// result, and so is the Result of a *Forwarded; any other value becomes a
// text block with its JSON and, when it is a JSON object, structuredContent
// too (MCP's structured content is an object).
func Success(res middleware.Result) (*mcp.CallToolResult, error) {
	switch v := res.Value.(type) {
	case *Forwarded:
		if v != nil && v.Result != nil {
			return v.Result, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
	case *mcp.CallToolResult:
		if v != nil {
			return v, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
	case nil:
		return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
	}
	raw, err := json.Marshal(res.Value)
	if err != nil {
		return Refusal(axerr.New(axerr.CodeToolFailed, "the tool's result cannot be sent as JSON").WithCause(err)), nil
	}
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(raw)}}}
	if len(raw) > 0 && raw[0] == '{' {
		out.StructuredContent = json.RawMessage(raw)
	}
	return out, nil
}
