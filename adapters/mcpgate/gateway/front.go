package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/axgate/axgate"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/direct"
	"github.com/axgate/axgate/adapters/mcpgate/internal/childproc"
	"github.com/axgate/axgate/adapters/mcpgate/internal/statescope"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/wire"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// front is the MCP server the clients talk to: one for streamable HTTP
// (the principal from the bearer token), one for stdio (the local
// principal).
type front struct {
	g *Gateway
	// stateless is the front of MCP 2026-07-28 and later over HTTP
	// (stateless.go): no sessions, each request on its own, its upstream
	// the caller's link.
	stateless bool
	kind      int
	server    *mcp.Server
	principal mcpgate.PrincipalFunc
	// send is the server's sending method handler, which sends the
	// upstream's notifications to one client session.
	send mcp.MethodHandler
}

// The kinds of front: streamable HTTP sessions, stateless HTTP, stdio.
const (
	frontHTTP = iota
	frontStateless
	frontLocal
	frontKinds
)

func (g *Gateway) newFront(kind int) *front {
	local, stateless := kind == frontLocal, kind == frontStateless
	f := &front{g: g, principal: g.cfg.principal, stateless: stateless, kind: kind}
	if local {
		f.principal = mcpgate.StaticPrincipal(*g.cfg.local)
	}
	versions := legacyVersions()
	if stateless {
		versions = statelessVersions()
	}
	noop := func(context.Context, *mcp.SubscribeRequest) error { return nil }
	srv := mcp.NewServer(g.cfg.impl, &mcp.ServerOptions{
		Logger:                    g.cfg.logger,
		Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: !stateless}},
		SupportedProtocolVersions: versions,
		// The upstream keeps the subscriptions (receive forwards them);
		// the front only acknowledges them.
		SubscribeHandler:   noop,
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		SetCacheable:       privateCacheable,
	})
	srv.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		f.send = next
		return next
	})
	if stateless {
		srv.AddReceivingMiddleware(f.receiveStateless)
	} else {
		srv.AddReceivingMiddleware(f.receive)
	}
	srv.AddReceivingMiddleware(privateLists) // outermost: it sees every answer
	f.server = srv
	return f
}

// toolHandler runs a tools/call of b through enf's whole chain (mcpgate's
// handler: credentials, elicitation, refusals), with the upstream as the
// tool.
func (f *front) toolHandler(enf *axgate.Enforcer, b *backend) mcp.ToolHandler {
	opts := append(slices.Clone(f.g.cfg.mcpOpts), mcpgate.WithPrincipal(f.principal))
	if !f.g.cfg.trustClientElicitation {
		// The trust rule: the client is the agent's, and its answer to a
		// form question is not the person's (WithTrustClientElicitation).
		opts = append(opts, mcpgate.WithoutElicitation())
	}
	return mcpgate.ToolHandler(enf, middleware.InvokerFunc(b.forward), opts...)
}

// receive admits a client session at its initialize, answers the tool
// methods itself (a tool the manifest does not name is refused), and
// passes resources, prompts, completions and logging on to the session's
// upstream only as far as the manifest and the chain allow.
func (f *front) receive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		switch {
		case ss == nil:
			return next(ctx, method, req)
		case method == "initialize":
			return f.initialize(ctx, ss, req, next)
		case !f.g.admitted(ss):
			return beforeInitialize(ctx, method, req, next)
		}
		switch method {
		case "tools/list", "tools/call":
			return f.tool(ctx, method, req, next)
		case "notifications/roots/list_changed":
			f.rootsChanged(ctx, ss)
		case "logging/setLevel":
			if err := f.setLevel(ctx, ss, req); err != nil {
				return nil, err
			}
		default:
			// Resources, prompts and completions: only what the manifest
			// declares and the chain allows reaches the upstream
			// (entries.go). Every other method is the front's own, and
			// never forwarded.
			if res, handled, err := f.entry(ctx, ss, method, req, next); handled {
				return res, err
			}
		}
		return next(ctx, method, req)
	}
}

// beforeInitialize handles a message of a session the gateway has not
// admitted: the SDK takes a few (ping, notifications, logging/setLevel,
// resources/subscribe and unsubscribe) on a session that was never
// initialized, and a POST without a session id makes such a session. Only
// ping and notifications reach the SDK; nothing reaches the upstream,
// neither a child nor an upstream session.
func beforeInitialize(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	if method == "ping" || strings.HasPrefix(method, "notifications/") {
		return next(ctx, method, req)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("method %q is invalid before the session is initialized", method)}
}

// initialize admits the session, counting it against the bounds of
// WithMaxSessions, or refuses it (the SDK then closes it); it links the
// session to its upstream and answers with the gateway's capabilities.
func (f *front) initialize(ctx context.Context, ss *mcp.ServerSession, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	key := ""
	if p, err := f.principalOf(ctx, ss, req.GetExtra()); err == nil {
		key = sessionKey(p)
	}
	// With TokenExchange the upstream session is the caller's: a caller
	// whose token cannot be exchanged is refused here, before any link
	// (whose failing starts would hold back the others').
	caller, err := f.g.exchangeAtStart(ctx, f, ss, req.GetExtra())
	if err != nil {
		return nil, err
	}
	counted, e := f.g.admit(ss, key)
	if e != nil {
		return nil, sessionRefusal(e)
	}
	res, err := next(ctx, "initialize", req)
	if err != nil {
		// A failed initialize of a new session uncounts it; a second
		// initialize of an open session (the SDK refuses it as a
		// duplicate) leaves it counted.
		if counted {
			f.g.release(ss)
		}
		return res, err
	}
	s := f.g.sessionWith(f, ss, caller)
	for _, b := range f.g.set().list {
		if !b.probeless {
			continue
		}
		// The session's child is the only one (New started none): the
		// client's initialize is answered once it runs, its pins checked,
		// with its capabilities.
		if err := b.awaitUpstream(ctx, s.link(b)); err != nil {
			if counted {
				f.g.release(ss)
			}
			f.g.dropSession(ss, s)
			return nil, upstreamNotStarted(err)
		}
	}
	version := ""
	if ir, ok := res.(*mcp.InitializeResult); ok {
		ir.Capabilities = f.g.frontCaps()
		version = ir.ProtocolVersion
	}
	if f == f.g.httpFront {
		userID := ""
		if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
			userID = ex.TokenInfo.UserID
		}
		f.g.registerHTTP(s, ss.ID(), userID, version)
	}
	return res, nil
}

// tool answers tools/list, and refuses a tools/call of a tool the manifest
// does not name, by the chain's intent gate. A tool the manifest declares
// is registered on the server and reaches callTool through the SDK (which
// asks clients on older protocols the confirmation question itself).
func (f *front) tool(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	switch r := req.(type) {
	case *mcp.ListToolsRequest:
		return f.listTools(ctx, r)
	case *mcp.CallToolRequest:
		if r.Params != nil {
			// A tool no manifest declares is not the server's: refused
			// here, by the chain's intent gate.
			if b, name := f.g.set().route(r.Params.Name); b == nil || b.pol().m.Tool(name) == nil {
				return f.callTool(ctx, r)
			}
		}
	}
	return next(ctx, method, req)
}

// rootsChanged tells the upstream that the client's roots changed, when
// the operator forwards them (asks.go); the client's roots are not the
// upstream's otherwise.
func (f *front) rootsChanged(ctx context.Context, ss *mcp.ServerSession) {
	for _, l := range f.g.sessionFor(f, ss).linksNow() {
		if l.forwards(methodListRoots) {
			l.notifyRootsChanged(ctx)
		}
	}
}

// setLevel forwards logging/setLevel to the upstream; the front answers it
// itself (it keeps the level) once the upstream took it.
func (f *front) setLevel(ctx context.Context, ss *mcp.ServerSession, req mcp.Request) error {
	if f.g.cfg.toolsOnly {
		return notFound("logging/setLevel")
	}
	p, ok := req.GetParams().(*mcp.SetLoggingLevelParams)
	if !ok || p == nil {
		return nil
	}
	// Every upstream's level; the request fails only when none took it
	// (one down upstream does not keep the others' logs at their level).
	list := f.g.set().list
	var first error
	failed := 0
	for _, b := range list {
		_, err := f.toUpstream(ctx, ss, b, func(ctx context.Context, cs *mcp.ClientSession) (mcp.Result, error) {
			return nil, cs.SetLoggingLevel(ctx, clean(p))
		})
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if failed == len(list) {
		return first
	}
	return nil
}

// toUpstream forwards a request that is not a tool call to the session's
// upstream, within the bounds of a tool call: it counts against the calls
// in flight of the session and of the caller (WithMaxCallsPerSession,
// WithMaxCallsPerPrincipal) and waits for the upstream at most
// WithCallTimeout. Without them one caller could keep any number of
// resources/read (or prompts/get, completion/complete…) waiting on a slow
// upstream, each with its goroutine and upstream connection, and exhaust
// what the other callers share.
func (f *front) toUpstream(ctx context.Context, ss *mcp.ServerSession, b *backend, do func(context.Context, *mcp.ClientSession) (mcp.Result, error)) (mcp.Result, error) {
	s := f.g.sessionFor(f, ss)
	l := s.link(b)
	if !s.calls.take() {
		return nil, mcpgate.JSONRPCError(tooManyCalls("", "this session", f.g.cfg.maxCallsPerSession))
	}
	defer s.calls.put()
	key, ok := f.g.takeCall(ss)
	if !ok {
		return nil, mcpgate.JSONRPCError(tooManyCalls("", "this caller", f.g.cfg.maxCallsPerPrincipal))
	}
	defer f.g.putCall(key)
	cs, err := l.session(ctx)
	if err != nil {
		return nil, mcpgate.JSONRPCError(unavailable(""))
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.callTimeout)
	defer cancel()
	res, err := do(ctx, cs)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, mcpgate.JSONRPCError(callTimedOut("", b.cfg.callTimeout))
		}
		return nil, upstreamRPCError(err)
	}
	return res, nil
}

// upstreamNotStarted answers the initialize of a session whose upstream
// did not start (probeless): the client shows why.
func upstreamNotStarted(err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("the upstream MCP server did not start: %v (its standard error is in the gateway's log)", err)}
}

func notFound(method string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "the gateway serves tools only: " + method + " is not available"}
}

// upstreamRPCError passes the upstream's JSON-RPC error on as it is, and
// any other failure as an internal error that does not say how the
// upstream is reached.
func upstreamRPCError(err error) error {
	var re *jsonrpc.Error
	if errors.As(err, &re) {
		return re
	}
	return mcpgate.JSONRPCError(unavailable(""))
}

// principalOf finds the caller of a request, as the tool handler will.
func (f *front) principalOf(ctx context.Context, ss *mcp.ServerSession, extra *mcp.RequestExtra) (middleware.Principal, error) {
	return f.principal(ctx, &mcp.CallToolRequest{Session: ss, Extra: extra, Params: &mcp.CallToolParamsRaw{}})
}

// listTools lists the manifest's tools that the session's upstream offers,
// that have not changed since they were pinned, and that this caller may
// call; with the manifest's definitions. A caller who cannot be
// authenticated is listed nothing.
func (f *front) listTools(ctx context.Context, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
	res := &mcp.ListToolsResult{Tools: []*mcp.Tool{}}
	if req.Params != nil && req.Params.Cursor != "" {
		return res, nil // one page: there is nothing after it
	}
	p, err := f.principalOf(ctx, req.Session, req.Extra)
	if err != nil {
		return res, nil
	}
	s := f.g.sessionFor(f, req.Session)
	list := f.g.set().list
	links := make([]*link, len(list))
	for i, b := range list {
		links[i] = s.link(b)
	}
	for i, b := range list {
		links[i].session(ctx) // wait for the first connection; a down upstream lists what it listed last
		offered := links[i].offered()
		pol := b.pol()
		for _, name := range pol.order {
			if _, ok := offered[name]; !ok || pol.isChanged(name) || !pol.mayCall(p, name) {
				continue
			}
			res.Tools = append(res.Tools, pol.defs[name])
		}
	}
	return res, nil
}

// outboundKey carries a call's upstream session from callTool to forward,
// through the chain.
type outboundKey struct{}

type outbound struct {
	link     *link
	pol      *policy // the policy the call was checked by
	front    string  // the tool's name at the front
	progress any
}

// callTool refuses what the chain cannot know — a tool disabled because it
// changed upstream, an upstream that is down or that does not offer the
// tool — and runs the rest through mcpgate's handler: the whole chain, with
// forward as the tool.
func (f *front) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	set := f.g.set()
	if req == nil || req.Params == nil {
		return set.list[0].pol().handlers[f.kind](ctx, req)
	}
	b, name := set.route(req.Params.Name)
	if b == nil {
		return mcpgate.Refusal(unknownTool(req.Params.Name)), nil
	}
	pol := b.pol()
	front := req.Params.Name
	if name != front {
		// The upstream's enforcer checks, and the upstream gets, its own
		// name of the tool. The request state of a confirmation question
		// is this upstream's only (stateOf).
		r, p := *req, *req.Params
		p.Name = name
		p.RequestState = b.stateIn(p.RequestState)
		r.Params = &p
		req = &r
		res, err := f.callOf(ctx, req, b, pol, front)
		if res != nil && res.RequestState != "" {
			res.RequestState = b.stateOut(res.RequestState)
		}
		if res != nil && res.IsError && pol.m.Tool(name) == nil && refusedAs(res, axerr.CodeIntentNotFound) {
			// The chain's refusal (audited) names the tools as the
			// upstream does: the client is told the names it can call.
			return mcpgate.Refusal(unknownToolOf(front, b, pol)), nil
		}
		return res, err
	}
	return f.callOf(ctx, req, b, pol, front)
}

// callOf is callTool of b's tool, named as b names it (front: as the
// client does).
func (f *front) callOf(ctx context.Context, req *mcp.CallToolRequest, b *backend, pol *policy, front string) (*mcp.CallToolResult, error) {
	if b.g.multi {
		// The person's answer about this upstream's call is this
		// upstream's only, even where chains share the elicitation key.
		ctx = statescope.With(ctx, b.name)
	}
	name := req.Params.Name
	if a := pol.m.Tool(name); a != nil {
		if pol.isChanged(name) {
			return mcpgate.Refusal(toolChanged(a, front)), nil
		}
		s := f.g.sessionFor(f, req.Session)
		l := s.link(b)
		if !s.calls.take() {
			return mcpgate.Refusal(tooManyCalls(a.Intent, "this session", f.g.cfg.maxCallsPerSession)), nil
		}
		defer s.calls.put()
		key, ok := f.g.takeCall(req.Session)
		if !ok {
			return mcpgate.Refusal(tooManyCalls(a.Intent, "this caller", f.g.cfg.maxCallsPerPrincipal)), nil
		}
		defer f.g.putCall(key)
		if _, err := l.session(ctx); err != nil {
			return mcpgate.Refusal(b.unavailable(a.Intent)), nil
		}
		// The upstream said its tools changed: wait for the new list to be
		// checked against the pins; a list that failed trusts none.
		if err := l.awaitFresh(ctx, b.cfg.callTimeout); err != nil {
			return mcpgate.Refusal(unverified(a.Intent)), nil
		}
		if pol.isChanged(name) {
			return mcpgate.Refusal(toolChanged(a, front)), nil
		}
		if _, ok := l.offered()[name]; !ok {
			return mcpgate.Refusal(notOffered(a, front)), nil
		}
		if b.perCaller() {
			ctx = f.withCaller(ctx, l, req)
		}
		ctx = context.WithValue(ctx, outboundKey{}, &outbound{link: l, pol: pol, front: front, progress: progressToken(req.Params.GetProgressToken())})
	}
	return pol.handlers[f.kind](ctx, req)
}

// maxUpstreamText bounds the upstream's error text kept in a refusal.
const maxUpstreamText = 4096

// forward is the tool behind the chain: it calls the upstream with the
// checked arguments (their canonical encoding) and nothing of the client's
// _meta but its progress token, and hands the upstream's result to the
// postconditions.
func (b *backend) forward(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
	g := b.g
	ob, _ := ctx.Value(outboundKey{}).(*outbound)
	if ob == nil {
		return middleware.Result{}, axerr.New(axerr.CodeInternal, "the call reached the gateway's tool without an upstream session").WithIntent(call.Intent())
	}
	l := ob.link
	if l.b != b {
		// Never the wrong upstream: the chain is b's, the session another's.
		return middleware.Result{}, axerr.New(axerr.CodeInternal, "the call reached another upstream's session").WithIntent(call.Intent())
	}
	cs := l.current()
	if cs == nil {
		return middleware.Result{}, b.unavailable(call.Intent())
	}
	// A last look before the call leaves: the chain may have run a while
	// since callTool checked (a slow store, a precondition), and a
	// list_changed that arrived meanwhile must not let a tool that changed
	// through. The upstream can still change after this; nothing a gateway
	// does closes that, but what it already knows it enforces.
	if err := ob.link.awaitFresh(ctx, b.cfg.callTimeout); err != nil {
		return middleware.Result{}, unverified(call.Intent())
	}
	if ob.pol.isChanged(call.Tool) && call.Action != nil {
		return middleware.Result{}, toolChanged(call.Action, ob.front)
	}
	if err := b.upstreamCredential(ctx); err != nil {
		return middleware.Result{}, credentialsRefused(call.Intent(), err)
	}
	canon, err := call.CanonicalArguments()
	if err != nil {
		return middleware.Result{}, err
	}
	params := &mcp.CallToolParams{Name: call.Tool, Arguments: json.RawMessage(canon)}
	var meta mcp.Meta
	if ob.progress != nil {
		meta = mcp.Meta{"progressToken": ob.progress}
	}
	if injects(g.propagator, ctx) {
		if meta == nil {
			meta = mcp.Meta{}
		}
		g.propagator.Inject(ctx, wire.MetaCarrier(meta))
	}
	if len(meta) > 0 {
		params.Meta = meta
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		attrs := []attribute.KeyValue{attribute.String("mcp.method.name", "tools/call")}
		if ob.link.client != nil && ob.link.client.ID() != "" {
			attrs = append(attrs, attribute.String("mcp.session.id", ob.link.client.ID()))
		}
		if g.multi {
			attrs = append(attrs, attribute.String("axgate.upstream", b.name))
		}
		span.SetAttributes(attrs...)
	}
	// The person's confirmation is behind; the upstream's answer is bounded
	// in time from here. The upstream call's own context follows that
	// deadline (and the client's cancellation) while the call runs, but is not
	// cancelled the moment it returns, so the HTTP connection can be reused.
	ctx, cancel := context.WithTimeout(ctx, b.cfg.callTimeout)
	defer cancel()
	var res *mcp.CallToolResult
	viaDirect := func(up direct.Upstream) {
		res, err = b.direct.Call(ctx, up, params)
		if ir := (*direct.InputRequired)(nil); errors.As(err, &ir) {
			// The SDK's client takes the upstream's answer up as its own,
			// as it would have: its multi-round-trip handling.
			upCtx, done := g.upstreamContext(withReplay(ctx, ir.Result))
			res, err = cs.CallTool(upCtx, params)
			done()
		}
	}
	if version := b.directVersion(cs); version != "" {
		viaDirect(direct.Upstream{Session: cs, Version: version, Peer: directLink{l}, Life: l.ctx, Fail: func() { l.failUp(cs) }})
	} else if b.statelessDirect(l, cs, params) {
		viaDirect(direct.Upstream{Session: cs, Version: b.direct.StatelessVersion(cs), Stateless: true, Peer: directLink{l}, Life: l.ctx, Fail: func() { l.failUp(cs) }})
	} else {
		upCtx, done := g.upstreamContext(ctx)
		res, err = cs.CallTool(upCtx, params)
		done()
	}
	if err != nil {
		return middleware.Result{}, b.callFailed(ctx, call, ob.link, err)
	}
	if res.IsError {
		return middleware.Result{}, upstreamToolError(call.Intent(), res)
	}
	if res.InputRequests != nil || res.RequestState != "" || res.NeedsInput() {
		// A multi-round-trip result: the upstream's elicitation, sampling
		// or roots/list in another form, which the client's SDK would
		// answer (asks.go). The gateway never relays the answers to the
		// upstream, so the call cannot complete either way.
		return middleware.Result{}, axerr.New(axerr.CodeToolFailed, "the upstream tool asked for input from the client (inputRequests), which the gateway does not relay").
			WithIntent(call.Intent())
	}
	res = withoutResultType(res)
	stripProtocolMeta(res)
	if !b.cfg.keepUncheckedContent && checksOutput(call.Action) {
		if res, err = checkedContent(res); err != nil {
			return middleware.Result{}, axerr.New(axerr.CodeToolFailed, "the upstream's structuredContent cannot be sent as JSON").
				WithIntent(call.Intent()).WithCause(err)
		}
	}
	return middleware.Result{Value: &mcpgate.Forwarded{Result: res, Value: resultValue(res)}}, nil
}

// injects reports whether p may write into a carrier for ctx: not the
// default TraceContext without a valid span context, which writes nothing
// then (so no _meta is made for it on every call).
func injects(p propagation.TextMapPropagator, ctx context.Context) bool {
	if _, ok := p.(propagation.TraceContext); ok {
		return trace.SpanContextFromContext(ctx).IsValid()
	}
	return true
}

// checksOutput reports whether the action's result is checked: by
// postconditions or an output_schema.
func checksOutput(a *manifest.Action) bool {
	return a != nil && (len(a.Postconditions) > 0 || len(a.OutputSchema) > 0)
}

// checkedContent makes what the client reads of a result the data that the
// postconditions and the output_schema check (resultValue). With
// structuredContent, that is the structuredContent alone, and MCP lets a
// tool put anything beside it in its content blocks (a text for people, an
// image): an upstream could pass the checks with its structuredContent and
// tell the model something else in its text. So the content becomes one
// text block with the JSON of the structuredContent, as MCP asks a tool
// with structured output to send (the go-sdk's typed tools do), unless it
// is that block already. Without structuredContent the content is what is
// checked: the text of blocks that are all text (they keep only their text,
// not their _meta and annotations), or else the blocks whole (kept). The result's other fields (_meta, the
// request state and input requests of a multi-round-trip call) are checked
// by neither and are dropped. KeepUncheckedContent turns this off.
func checkedContent(res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	// A new result: no field the checks do not read (_meta, requestState,
	// inputRequests, what a later version adds) is carried over.
	c := mcp.CallToolResult{Content: res.Content, StructuredContent: res.StructuredContent}
	if res.StructuredContent == nil {
		// The text of text blocks is what is checked: not their _meta and
		// annotations. (Other blocks are checked whole.)
		texts := make([]mcp.Content, 0, len(res.Content))
		for _, b := range res.Content {
			tc, ok := b.(*mcp.TextContent)
			if !ok {
				return &c, nil
			}
			texts = append(texts, &mcp.TextContent{Text: tc.Text})
		}
		c.Content = texts
		return &c, nil
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, err
	}
	if len(res.Content) == 1 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok && tc.Text == string(raw) && tc.Meta == nil && tc.Annotations == nil {
			return &c, nil
		}
	}
	c.Content = []mcp.Content{&mcp.TextContent{Text: string(raw)}}
	return &c, nil
}

// upstreamDrain bounds how long the upstream's HTTP response may still be
// read after its answer arrived (see upstreamContext).
const upstreamDrain = direct.DrainFor

// upstreamContext is the context of an upstream call: ctx's values, and
// cancelled when ctx is — while the call runs. Call done when the call
// returns. The go-sdk's client sends the call with this context and reads
// the rest of the HTTP response (the end of its event stream) after it
// handed over the answer: had the client's request context reached it,
// the front's handler returning would cancel that read and the connection
// to the upstream would be closed instead of kept (15 to 45 of 100 calls
// of one agent opened a new connection). After done, the context ends only
// once upstreamDrain has passed, so that an upstream that keeps the
// response open after its answer holds nothing longer than that; and at
// once when direct.Drains is full, the direct path's drains
// counted (the go-sdk does not tell when it has read the response to its
// end: a call counts for upstreamDrain, and beyond the bound an upstream
// called through the go-sdk more than ~25 times a second may lose a
// connection it could have kept).
func (g *Gateway) upstreamContext(ctx context.Context) (context.Context, func()) {
	up, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	return up, func() {
		if !stop() {
			return
		}
		if !g.drains.Take() {
			cancel(nil)
			return
		}
		time.AfterFunc(upstreamDrain, func() {
			cancel(nil)
			g.drains.Done()
		})
	}
}

// callFailed maps a failed upstream call: a JSON-RPC error of the upstream
// is the tool's failure (its message kept), a lost connection makes the
// upstream unavailable.
func (b *backend) callFailed(ctx context.Context, call *middleware.Call, l *link, err error) error {
	var re *jsonrpc.Error
	switch {
	case errors.As(err, &re) && !transportRejected(re):
		// The TypeScript SDK's RequestTimeout; any other JSON-RPC error
		// (invalid params, an unknown tool, the server's own failure) is
		// what the upstream will answer again, unless its text says the
		// cause is passing.
		retry := re.Code == rpcRequestTimeout || transient(re.Message)
		return notRetryableUnless(axerr.New(axerr.CodeToolFailed, "the upstream server refused the call: "+bound(re.Message)).WithIntent(call.Intent()), retry)
	case errors.Is(err, errMessageTooLarge) || errors.Is(err, childproc.ErrTooLarge) || l.cutTooLarge():
		return resultTooLarge(call.Intent(), b.cfg.maxMessageBytes)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return callTimedOut(call.Intent(), b.cfg.callTimeout)
	case ctx.Err() != nil:
		return err // the tool boundary words a cancellation
	}
	b.cfg.logger.Warn("upstream call failed", "tool", call.Tool, "error", err)
	return b.unavailable(call.Intent())
}

// transportRejected reports whether re is the go-sdk client's own error
// for an upstream answer of HTTP 429, 500, 502, 503 or 504
// (jsonrpc2.ErrRejected), which it takes as passing: the upstream is
// unavailable for now, as the direct path reports it, not refusing the call.
func transportRejected(re *jsonrpc.Error) bool {
	return re.Code == -32005 && re.Message == "rejected by transport"
}

// rpcRequestTimeout is the JSON-RPC error code of a request that timed out
// in the TypeScript MCP SDK (ErrorCode.RequestTimeout).
const rpcRequestTimeout = -32001

// upstreamToolError is the refusal of a result the upstream marked isError,
// with the upstream's text. It is retryable only when the upstream says so
// (an AXAG envelope's details.retryable, or a "retryable" member of its
// structuredContent) or its text names a passing cause (a timeout, a
// connection reset, "temporarily unavailable", …): a file that does not
// exist is not found by calling again.
func upstreamToolError(intent string, res *mcp.CallToolResult) *axerr.Error {
	text := contentText(res.Content)
	e := axerr.New(axerr.CodeToolFailed, "the upstream tool reported an error: "+bound(text)).WithIntent(intent)
	if said, ok := upstreamSaysRetryable(res.StructuredContent); ok {
		return e.WithRetryable(said)
	}
	return notRetryableUnless(e, transient(text))
}

// notRetryableUnless marks e not retryable, with a suggestion saying why,
// unless retry.
func notRetryableUnless(e *axerr.Error, retry bool) *axerr.Error {
	if retry {
		return e
	}
	return e.WithRetryable(false).
		WithSuggestion("Calling again with the same arguments will fail the same way: fix what the upstream's message names (a path or an id that does not exist, say), or report it.")
}

// upstreamSaysRetryable reads whether the upstream's structuredContent says
// the call may be repeated: an AXAG envelope's error.details.retryable (an
// upstream that is itself gated), else a boolean "retryable" at its top or
// in its "error" object.
func upstreamSaysRetryable(sc any) (retry, ok bool) {
	m := jsonObject(sc)
	if m == nil {
		return false, false
	}
	if b, ok := m["retryable"].(bool); ok {
		return b, true
	}
	errObj := jsonObject(m["error"])
	if b, ok := errObj["retryable"].(bool); ok {
		return b, true
	}
	b, ok := jsonObject(errObj["details"])["retryable"].(bool)
	return b, ok
}

// jsonObject is v as a JSON object: a map, or JSON text of one (the SDK
// hands structuredContent on as json.RawMessage); nil otherwise.
func jsonObject(v any) map[string]any {
	switch x := v.(type) {
	case map[string]any:
		return x
	case json.RawMessage:
		var m map[string]any
		if json.Unmarshal(x, &m) == nil {
			return m
		}
	case []byte:
		var m map[string]any
		if json.Unmarshal(x, &m) == nil {
			return m
		}
	}
	return nil
}

// transientMarks are what an error's text says when its cause passes: the
// errno names of a timeout, a reset or a busy resource, and the usual words
// of an overloaded or unreachable service. A mark the upstream puts in its
// text by mistake only makes the refusal retryable, as every upstream
// failure was before.
var transientMarks = []string{
	"etimedout", "econnreset", "econnrefused", "econnaborted", "ehostunreach", "enetunreach", "eagain", "ebusy",
	"timed out", "timeout exceeded", "deadline exceeded", "temporarily unavailable", "service unavailable",
	"try again later", "too many requests", "rate limit", "connection reset", "connection refused",
}

// transient reports whether an upstream's error text names a passing cause.
func transient(text string) bool {
	t := strings.ToLower(text)
	for _, m := range transientMarks {
		if strings.Contains(t, m) {
			return true
		}
	}
	return false
}

// resultValue is the data of an upstream result that the postconditions
// and the output_schema check: its structuredContent; else the text of its
// content, as JSON when it is JSON and as a string otherwise; else the
// content blocks themselves.
func resultValue(r *mcp.CallToolResult) any {
	if r.StructuredContent != nil {
		return r.StructuredContent
	}
	var texts []string
	for _, c := range r.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			return r.Content
		}
		texts = append(texts, tc.Text)
	}
	text := strings.Join(texts, "")
	if mayBeJSON(text) && json.Valid([]byte(text)) {
		return json.RawMessage(text)
	}
	return text
}

// mayBeJSON reports whether s may be a JSON value: its first byte after
// whitespace starts one. (json.Valid allocates its error on a text that
// is not.)
func mayBeJSON(s string) bool {
	s = strings.TrimLeft(s, " \t\r\n")
	if s == "" {
		return false
	}
	switch c := s[0]; {
	case c == '{', c == '[', c == '"', c == '-', c >= '0' && c <= '9', c == 't', c == 'f', c == 'n':
		return true
	}
	return false
}

// contentText is the text blocks of a result, one per line.
func contentText(cs []mcp.Content) string {
	var texts []string
	for _, c := range cs {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// bound cuts s to maxUpstreamText bytes, on a rune boundary.
func bound(s string) string {
	if len(s) <= maxUpstreamText {
		return s
	}
	cut := maxUpstreamText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// protocolMetaPrefix marks the _meta keys of the protocol itself (the
// per-request version, client info and capabilities of SEP-2575), which
// belong to one hop and are never forwarded.
const protocolMetaPrefix = "io.modelcontextprotocol/"

// forwardMeta is the client's _meta as the upstream gets it: without the
// protocol's own keys and without axgate's credentials.
func forwardMeta(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if strings.HasPrefix(k, protocolMetaPrefix) || strings.HasPrefix(k, "axag/") {
			continue
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func stripProtocolMeta(r mcp.Result) {
	m := r.GetMeta()
	if len(m) == 0 {
		return
	}
	if fm := forwardMeta(m); len(fm) != len(m) {
		r.SetMeta(fm)
	}
}

// clean copies request params with the _meta the upstream may see.
func clean[T any, P interface {
	*T
	mcp.Params
}](p P) P {
	if p == nil {
		return nil
	}
	v := *p
	c := P(&v)
	c.SetMeta(forwardMeta(p.GetMeta()))
	return c
}

// result returns an upstream's answer as a Result, without the upstream
// hop's protocol _meta (and never a typed nil).
func result[R mcp.Result](r R, err error) (mcp.Result, error) {
	if err != nil {
		return nil, err
	}
	stripProtocolMeta(r)
	return r, nil
}
