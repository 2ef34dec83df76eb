// Package gateway is an MCP server that enforces an AXAG manifest in front of another MCP server.
//
// The other server is the upstream, in whatever language it is written; every
// tool call to it passes axgate's whole chain: the checks the upstream cannot
// make (roles, scopes, tenant, arguments, constraints, rate limits),
// confirmations and approvals bound to the exact call, and postconditions on
// what the upstream answered. It is what `axgate mcp` runs.
//
// # Upstream and sessions
//
// The upstream is a streamable HTTP URL, or a command the gateway runs as a
// child process over stdio (Upstream). Each client session of the gateway
// has one upstream session of its own, so that the upstream's per-session
// state, its questions to the person (elicitation, sampling, roots, where
// the operator allows them) and its notifications stay with the client
// they belong to. For a command upstream
// that means one child process per client session: a stdio server serves one
// client. New itself starts one more, to check the pins and learn the
// upstream's capabilities before it returns, except with
// WithLocalPrincipal (a stdio gateway: one client, one child), where the
// session's own child does both before the client's initialize is
// answered. The child is started when the session initializes, stopped when
// the session ends (or is idle for WithSessionTimeout) and on Close, and
// restarted with a back-off that doubles on each failure in a row
// (WithRestartBackoff) when it dies; calls in the meantime are refused with
// AXGATE_STORE_UNAVAILABLE (503, retryable), reason upstream_unavailable. An
// HTTP upstream session that is lost is connected again the same way.
// Failing starts (and children that die soon after starting) also hold back
// every other session's starts, with one gateway-wide back-off, so that N
// sessions do not restart N children in a storm. A child is not shared
// between sessions: the upstream's per-session state and its requests to
// the person must stay with their client, so the number of children is
// bounded by the number of sessions (WithMaxSessions); a session counts from
// its initialize, and one that was never initialized gets no upstream
// session at all. The child's environment is the gateway's PATH and HOME
// plus Upstream.Env, not the gateway's whole environment
// (Upstream.InheritEnv).
//
// On Unix the child runs in a session of its own, and stopping it stops
// the session: its standard input is closed, then its processes get
// SIGTERM after 5 s and SIGKILL after 5 s more, and what is left of them
// once the child exited is killed (on Linux every process of the session,
// whatever its process group; elsewhere the child's process group). A
// wrapper's server (sh -c, npx, uvx) and a helper the child started end
// with it; a process that starts a session of its own (a daemon) is not
// reached. A terminal's Ctrl-C reaches the gateway, not its children: the
// gateway stops them itself. A question the upstream asks the client
// (elicitation, sampling, roots) ends when the session's upstream link
// closes, so a person who never answers does not hold the session's end
// or Close. The child's standard error is copied to
// Upstream.Stderr for at most 2 s after the child exited, so a helper that
// keeps it open does not hold the stop.
//
// New connects once itself, before any client, to check the pins and learn
// the upstream's capabilities, and fails when the upstream cannot be
// reached. For an HTTP upstream it keeps that session (GET /healthz reports
// it); a command upstream's child of that first session is stopped once it
// has been checked.
//
// The front speaks the MCP versions that have sessions (up to 2025-11-25); a
// client on a newer version falls back to them, as the SDK's client does.
//
// # Tools
//
// tools/list shows the manifest's tools that the session's upstream also
// offers, with the manifest's descriptions, annotations and the input
// schemas the parameter gate enforces (mcpgate.Tool), and only those this
// caller may call: its roles, granted scopes and tenant pass the access
// gate. An upstream tool the manifest does not declare is hidden, and its
// calls are refused by the intent gate (AXAG_INTENT_NOT_FOUND); so is a
// manifest tool the upstream does not offer.
//
// tools/call runs mcpgate's handler (credentials from _meta or headers,
// confirmation asked inline by elicitation when the client supports it,
// refusals as tool results the model can read) around the upstream: only an
// allowed call reaches it, with the checked arguments in their canonical
// form (RFC 8785), none of the client's credentials (neither its HTTP
// headers nor its _meta, but its progress token) and the gateway's trace
// context. The postconditions and the output_schema check the upstream
// result's data: its structuredContent, else the text of its content (as
// JSON when it is JSON), else its content blocks. The client reads what they
// checked: MCP lets a tool put a text or an image beside its
// structuredContent, which would reach the model unchecked, so the result
// of an action with either check that has structuredContent reaches the
// client with one text block, the JSON of its structuredContent, in place of
// its content; without structuredContent, content that is all text blocks
// keeps only their text (other content is checked, and passed on, whole);
// and the result's other fields (_meta, requestState, inputRequests)
// are dropped (KeepUncheckedContent passes all of it on). Results of
// actions with neither check reach the client as they are. An upstream result with isError, or
// a JSON-RPC error of the upstream, is refused as AXGATE_TOOL_FAILED with the
// upstream's text in the message. It is retryable only when the upstream
// says so (a "retryable" boolean in its structuredContent, or an AXAG
// envelope's details.retryable) or the cause passes (a JSON-RPC request
// timeout; a text naming ETIMEDOUT, ECONNRESET, "temporarily unavailable",
// …); a file that does not exist is not retryable, and the refusal says to
// fix what the upstream names rather than call again.
//
// # The direct path
//
// The common tool call skips the SDK's server and client, each of which
// decodes and re-encodes every message (BenchmarkGatewayRead): a tools/call
// POST on an established streamable HTTP session, for a tool whose chain
// has no confirmation stage, with only name, arguments and _meta in its
// params (each written once) and no progress token, is read once by the
// gateway, runs through the same checks, bounds and chain, and is answered
// with one JSON body (where the SDK answers with an event stream). A call
// to an HTTP upstream is one POST whose answer (a JSON body or an event
// stream) the gateway reads itself, handling the upstream's notifications
// and requests on that stream as the SDK's client does. Everything else —
// a call that may ask the person, a request the SDK would refuse or read
// differently, the first POST after a quarter of WithSessionTimeout (so
// that the SDK, which times idle sessions out, sees the session live), and
// every call when WithCallTimeout is more than an eighth of
// WithSessionTimeout (a direct call could then outlast the SDK's timer) —
// goes through the SDK. Upstream sessions are opened at protocol version
// 2025-11-25, with sessions, as the front's. A client's
// notifications/cancelled of a direct call cancels it (and the upstream's
// call), and a direct call whose id is in flight on the session's direct
// path is refused as the SDK refuses one in flight on its own (HTTP 400);
// a direct call and an SDK call of one session with the same id are not
// compared, as each side sees only its own.
//
// # Pins
//
// A manifest action may pin the upstream tool's definition (upstream_sha256,
// mcpgate.ToolDigest). Each upstream session's tools are checked when it
// connects and whenever the upstream sends notifications/tools/list_changed;
// a tool whose definition no longer matches its pin, or that the upstream
// lists twice, is disabled for as long
// as the gateway runs with this manifest (a definition that changes back is
// not trusted again): it leaves tools/list (the clients are told), its calls
// are refused with AXGATE_TOOL_CHANGED (409, reason upstream_changed), the
// log names it and the metric axgate.gateway.tool_changed counts it with
// gen_ai.tool.name. A tool with no pin is not checked. From a
// list_changed until the new list has been checked, the session's calls
// wait (at most WithCallTimeout); when the new list fails they are refused
// (AXGATE_STORE_UNAVAILABLE, reason tools_unverified) until a list
// succeeds. Notifications are coalesced: at most one list per
// WithRelistInterval.
//
// A manifest tool the upstream does not offer is logged (a warning naming
// it) when the gateway starts and at every re-list, and when a session's
// first list finds a different set missing: the operator learns it from
// the log, not from an agent's AXAG_INTENT_NOT_FOUND.
//
// # Bounds
//
// No caller exhausts what the others share; each bound is an option with a
// default (options.go):
//   - client sessions, in total and per caller (user id and tenant):
//     WithMaxSessions, refused at initialize (reason too_many_sessions);
//   - each upstream message and each client request body:
//     WithMaxMessageBytes (AXGATE_TOOL_FAILED, reason result_too_large;
//     413);
//   - the wait for a tools/call, WithCallTimeout (reason upstream_timeout),
//     and the calls in flight per session and per caller,
//     WithMaxCallsPerSession and WithMaxCallsPerPrincipal (reason
//     too_many_calls); the requests passed through to the upstream
//     (resources, prompts, completions, logging/setLevel, subscriptions)
//     count as calls and time out the same way, refused as JSON-RPC errors
//     with the AXAG envelope in their data;
//   - the upstream's tools/list, WithMaxUpstreamTools, and its requests to
//     a client awaiting an answer, WithMaxPendingUpstreamRequests;
//   - re-lists after list_changed, WithRelistInterval;
//   - the upstream responses read on after their answer, so that their
//     connections are kept: 256 at once, each for at most 10 s (an upstream
//     that keeps its streams open loses those connections instead);
//   - upstream starts, WithRestartBackoff (per session and gateway-wide).
//
// A progress token is forwarded upstream only when it is a string of at most
// 256 bytes or an integer.
//
// # Everything else
//
// Resources, prompts and completions reach the upstream only as the
// manifest declares them (manifest.Resource: an exact URI, an RFC 6570
// level 1 URI template or a URI prefix; manifest.Prompt: a name), what the
// manifest does not declare never:
//   - resources/list, resources/templates/list and prompts/list show the
//     upstream's entries that the manifest declares (a template by its
//     exact uriTemplate) and that this caller passes the access gate for,
//     with the manifest's descriptions, in one page: the gateway reads the
//     upstream's pages itself (within WithMaxUpstreamTools), so a client's
//     cursor never reaches the upstream;
//   - resources/read, resources/subscribe, prompts/get and
//     completion/complete (of a declared prompt, or of a declared template
//     or resource) run the enforcer's chain of the declared entry's read
//     action, with a template's variables, a prompt's arguments or a
//     completion's arguments as the call's arguments: access (roles,
//     granted scopes, tenant), rate limit, audit and telemetry, refused as
//     JSON-RPC errors with the AXAG envelope in their data
//     (mcpgate.JSONRPCError); resources/unsubscribe needs the resource
//     declared and the caller's access;
//   - anything the manifest does not declare is refused with
//     AXAG_INTENT_NOT_FOUND and not forwarded; a URI matches an exact URI
//     first, then the first template, then the longest prefix, and never
//     through a "." or ".." segment, even encoded, nor an empty one after
//     a prefix;
//   - the contents of a read's answer, and the resources a prompt's
//     messages embed, reach the client only for URIs the manifest declares
//     and the caller may read (a message embedding another is dropped);
//     a completion's values, only those the caller passes the access gate
//     with as the argument (not another tenant's id);
//   - notifications/resources/updated reaches the client only for a
//     declared URI that the session's subscriber may read, the list_changed
//     notifications only for a kind the manifest declares; the front
//     announces resources, prompts and completions only where the manifest
//     declares some.
//
// The forwarded requests carry none of the client's credentials and none
// of the protocol's own _meta keys. logging/setLevel passes through, as do
// the upstream's other notifications. ToolsOnly refuses all of it, the
// declared resources and prompts too.
//
// # The upstream's requests to the client
//
// What the upstream asks the client is not under the manifest, so it does
// not reach the client unless the operator allows it:
//   - Roots are the operator's. The upstream's roots/list is answered with
//     WithRoots (file:// URIs; none by default, and then the upstream is not
//     offered the roots capability at all, so that a server such as
//     @modelcontextprotocol/server-filesystem keeps the folders it was
//     started with rather than take an empty list or the client's). A
//     client's roots, and its notifications/roots/list_changed, never reach
//     the upstream: a caller could otherwise widen what such a server reads
//     and writes to "/". ForwardClientRoots restores the old behaviour (New
//     logs a warning).
//   - sampling/createMessage and elicitation/create are not offered to the
//     upstream, and one it sends anyway is refused with JSON-RPC "method
//     not found" and logged with the upstream's identity (its URL or
//     command, and the name and version it gave): the agent's model does
//     not write what the upstream wants, and the person is not asked for a
//     password in the gateway's name. AllowUpstreamSampling and
//     AllowUpstreamElicitation pass them to a client that offers them, each
//     logged the same way and counted against WithMaxPendingUpstreamRequests.
//
// The gateway's own confirmation question (mcpgate's elicitation for a
// confirmation_required call) is the gateway's, not the upstream's, and is
// asked either way. The SDK's path and the direct path decide alike. The
// log lines of these requests are bounded per session (a burst of 20, then
// one a second).
//
// # MCP 2026-07-28 at the front
//
// A POST whose Mcp-Method or Mcp-Name header (SEP-2243: the method, and the
// tool or prompt name or resource URI, mirrored for proxies and WAFs) does
// not match its JSON-RPC body is refused with HTTP 400 and JSON-RPC -32020
// (HeaderMismatch), its data the AXAG error (reason header_mismatch), before
// either path reads it; on protocol 2026-07-28 and later the headers are
// also required. A header value "=?base64?…?=" is decoded first. A body the
// headers cannot be compared with (a batch, a key spelled twice or with an
// escape) is refused when the headers are present. The policy never reads
// these headers, only the body. The results the front lists per caller
// (tools/list and the other lists, resources/read) carry the caching hints
// cacheScope "private" and ttlMs 0: a shared cache must not serve one
// caller's list to another.
//
// # Callers
//
// Over streamable HTTP (Handler) the caller comes from the transport's
// authentication: WithBearer makes /mcp an OAuth 2.0 protected resource
// (bearer tokens, RFC 9728 metadata at /.well-known/oauth-protected-resource,
// WWW-Authenticate: Bearer resource_metadata="…" on 401). Over stdio
// (ServeStdio) it is the local user given to WithLocalPrincipal.
//
// The enforcer's chain traces and audits each call; the span of a call that
// reached the upstream carries mcp.method.name and mcp.session.id.
// Refusals the gateway makes before the chain (a changed tool, an
// unavailable upstream) are not in the audit.
package gateway
