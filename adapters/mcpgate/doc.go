// Package mcpgate enforces an AXAG manifest on the tools of an MCP server built with the Go SDK.
//
// The SDK is the official one, github.com/modelcontextprotocol/go-sdk.
//
// AddTools registers every tool of the manifest, with the input schema the
// parameter gate enforces, the MCP annotations (readOnlyHint,
// destructiveHint, idempotentHint) and the AXAG safety block in
// _meta["axag/safety"], each bound to its Go handler with the enforcer's
// whole chain wrapped around it.
//
// The principal comes from the transport's authentication (the TokenInfo of
// auth.RequireBearerToken on the streamable HTTP transport, or a
// StaticPrincipal for stdio), never from the arguments. Confirmation and
// approval tokens, the idempotency key and a claimed tenant come from the
// call's _meta (axag/confirmation, axag/approvals, axag/idempotency_key,
// axag/tenant) or from the X-AXAG-* headers of the HTTP transport. A W3C
// traceparent in _meta is continued.
//
// A refusal is a tool result with isError, a readable text for the model and
// the AXAG envelope as structuredContent, so that the model can correct
// itself; WithJSONRPCParamErrors answers parameter errors with JSON-RPC
// -32602 instead. When the client supports elicitation, a call that needs a
// confirmation asks the person inline (MCP multi round-trip requests);
// other clients present a signed confirmation token.
package mcpgate
