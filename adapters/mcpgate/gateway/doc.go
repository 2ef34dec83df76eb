// Package gateway is an MCP server that enforces an AXAG manifest in front of another MCP server.
//
// The other server, the upstream, is a streamable HTTP URL or a command
// run as a child process over stdio (Upstream). Every tool call to it
// passes axgate's whole chain: only an allowed call reaches it, with the
// checked arguments in canonical form (RFC 8785) and none of the client's
// credentials. It is what `axgate mcp` runs. How it works, and why, is in
// docs/mcp-gateway.md.
//
// # Several upstreams
//
// NewMulti serves several upstreams behind one endpoint, each a Named
// with its own enforcer: tools (and prompts) under each upstream's prefix,
// the union per caller; a call routed by the longest prefix to that
// upstream's chain, which it reaches under its own name; resources by
// the manifest that declares them. Everything below holds per upstream;
// the sessions' bounds are the front's. Upstreams reports each one's
// readiness, and Reload replaces them, keeping the sessions of those that
// did not change.
//
// # Sessions
//
// Each client session has an upstream session of its own; for a command
// upstream that is a child process of its own, started at the session's
// initialize and stopped, with every process it started, when the session
// ends, is idle for WithSessionTimeout, or on Close. An upstream session
// that ends is connected again with a back-off (WithRestartBackoff);
// meanwhile calls are refused with AXGATE_STORE_UNAVAILABLE, reason
// upstream_unavailable. New connects once before it returns, to check the
// pins and learn the upstream's capabilities, and fails when the upstream
// cannot be reached. The child's environment is the gateway's PATH and
// HOME plus Upstream.Env (Upstream.InheritEnv passes all of it).
//
// Over HTTP a client of MCP 2026-07-28, which has no session, is served
// by the go-sdk's stateless handler through the same front; its caller
// (tenant and user) has one upstream session, reused by the caller's
// requests, counted as one of its sessions, and closed after
// WithSessionTimeout without a request. Callers never share one. Such a
// client gets none of the upstream's notifications, and the upstream
// cannot ask it anything.
//
// # Tools
//
// tools/list shows the manifest's tools that the upstream offers and this
// caller may call, with the manifest's definitions (mcpgate.Tool); any
// other tool is refused by the intent gate. tools/call runs mcpgate's
// handler around the upstream; the postconditions and output_schema check
// the upstream's result, and the client reads what they checked
// (KeepUncheckedContent passes the rest on). An upstream failure is
// AXGATE_TOOL_FAILED, retryable only when the upstream says so or its
// cause passes.
//
// A tool whose definition no longer matches its pin (upstream_sha256,
// mcpgate.ToolDigest), or that the upstream lists twice, is disabled for
// as long as the gateway runs: it leaves tools/list and its calls are
// refused with AXGATE_TOOL_CHANGED. After the upstream's
// notifications/tools/list_changed, calls wait (at most WithCallTimeout)
// until the new list is checked, and are refused (reason tools_unverified)
// while it cannot be listed.
//
// # People
//
// A client's answer to the confirmation question (form elicitation) is
// not the person's: the gateway asks none unless WithTrustClientElicitation.
// With axgate.WithDecisionPages on the enforcer, a call waiting for a
// person's decision is answered, for a client that declares URL-mode
// elicitation, with a URL-mode request for the page of the call (an
// input_required result on MCP 2026-07-28; elicitation/create on older
// versions, after which the call is checked again); other clients get
// the 428 refusal naming the page (details decision_url), and the same
// call repeated after the decision runs once. Approvals never come from
// elicitation.
//
// # Everything else
//
// Resources, prompts and completions reach the upstream only as the
// manifest declares them (manifest.Resource, manifest.Prompt), through the
// chain of the entry's read action; anything else is refused with
// AXAG_INTENT_NOT_FOUND and not forwarded. What the upstream asks the
// client is refused unless the operator allows it: roots are the
// operator's (WithRoots, ForwardClientRoots), sampling and elicitation
// need AllowUpstreamSampling and AllowUpstreamElicitation. ToolsOnly
// refuses all but tools.
//
// # Bounds
//
// Each bound is an option with a default: WithMaxSessions,
// WithMaxMessageBytes, WithCallTimeout, WithMaxCallsPerSession,
// WithMaxCallsPerPrincipal, WithMaxUpstreamTools,
// WithMaxPendingUpstreamRequests, WithRelistInterval, WithRestartBackoff.
// Requests passed through to the upstream count as calls.
//
// # Callers
//
// Over streamable HTTP (Handler) the caller comes from the transport's
// authentication (WithBearer: an OAuth 2.0 protected resource); over stdio
// (ServeStdio) it is WithLocalPrincipal's. A POST whose Mcp-Method or
// Mcp-Name header does not match its body is refused (HTTP 400, JSON-RPC
// -32020).
package gateway
