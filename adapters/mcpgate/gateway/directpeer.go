package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/direct"
	"github.com/axgate/axgate/middleware"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway's side of the direct path (internal/direct): its sessions,
// and the peer of its upstream calls.

// httpSessions are the streamable HTTP sessions' links, by session id.
type httpSessions struct{ g *Gateway }

// Lookup returns the session with that id, or nil.
func (s httpSessions) Lookup(id string) direct.Session {
	s.g.mu.Lock()
	cs := s.g.byID[id]
	s.g.mu.Unlock()
	if cs == nil {
		return nil
	}
	return directSession{cs}
}

// directSession is a client session as the direct path sees it.
type directSession struct{ s *session }

func (d directSession) State() *direct.State { return &d.s.directState }

func (d directSession) Initialized() bool { return d.s.client.InitializeParams() != nil }

// Ready reports whether every upstream session of the client session is
// ready (a call of it then waits for nothing before its chain): the
// direct path cannot tell which upstream the call is for until it is
// routed, so any one not ready sends the call the SDK's way.
func (d directSession) Ready(ctx context.Context, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for _, l := range d.s.linksNow() {
		if !l.ready(ctx, time.Until(deadline)) {
			return false
		}
	}
	return true
}

func (d directSession) CallTool(ctx context.Context, params *mcp.CallToolParamsRaw, extra *mcp.RequestExtra) (*mcp.CallToolResult, error) {
	return d.s.f.callTool(ctx, &mcp.CallToolRequest{Session: d.s.client, Params: params, Extra: extra})
}

// directLink is a link as the direct path sees it: the peer of its
// upstream calls (direct.Peer).
type directLink struct{ l *link }

func (d directLink) Notify(ctx context.Context, method string, params json.RawMessage) {
	d.l.upstreamNotification(ctx, method, params)
}

func (d directLink) Answer(ctx context.Context, method string, params json.RawMessage) (any, error) {
	return d.l.upstreamRequest(ctx, method, params)
}

// registerHTTP makes l's session reachable by its id for the direct path,
// bound to the user that started it (as the SDK binds it) and to the
// protocol version the gateway answered its initialize with.
func (g *Gateway) registerHTTP(s *session, sessionID, userID, version string) {
	if sessionID == "" {
		return
	}
	s.directState.Register(userID, version)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed && g.links[s.client] == s {
		g.byID[sessionID] = s
	}
}

// directVersion is the protocol version of cs when a call on it may take
// the direct path to the upstream, or "".
func (b *backend) directVersion(cs *mcp.ClientSession) string {
	if b.cfg.sdkOnly {
		return ""
	}
	return b.direct.Version(cs)
}

// directTools are the tools whose calls may take the direct path: those
// whose chain has neither a confirmation nor an approval stage. Those are
// the stages that involve the person through the client: the confirmation
// question, and the URL-mode request that sends the person to the page of
// a call waiting for a decision (mcpgate, axgate.WithDecisionPages), which
// only the SDK's path asks and takes the answer of.
func directTools(names []string, stagesFor func(string) ([]string, bool)) map[string]bool {
	out := map[string]bool{}
	for _, name := range names {
		stages, ok := stagesFor(name)
		if ok && !slices.Contains(stages, middleware.StageConfirmation) && !slices.Contains(stages, middleware.StageApproval) {
			out[name] = true
		}
	}
	return out
}

// statelessDirectTools are the tools whose stateless calls may take the
// direct path: those of tools whose definition has no parameter mirrored
// in an Mcp-Param-* header (x-mcp-header), which the SDK compares with the
// arguments.
func statelessDirectTools(tools map[string]bool, defs map[string]*mcp.Tool) map[string]bool {
	out := map[string]bool{}
	for name := range tools {
		raw, err := json.Marshal(defs[name])
		if err == nil && !strings.Contains(string(raw), "x-mcp-header") {
			out[name] = true
		}
	}
	return out
}

// statelessCall runs a stateless tools/call of the direct path as
// receiveStateless runs one the SDK hands it: the caller's link found or
// started for it, then callTool. The request's session is one of its own,
// never connected, that keys the link for the call's length.
func (g *Gateway) statelessCall(ctx context.Context, params *mcp.CallToolParamsRaw, extra *mcp.RequestExtra) (*mcp.CallToolResult, error) {
	f := g.statelessFront
	ss := new(mcp.ServerSession)
	if err := g.acquireCaller(ctx, f, ss, extra); err != nil {
		return nil, err
	}
	defer g.releaseCaller(ss)
	return f.callTool(ctx, &mcp.CallToolRequest{Session: ss, Params: params, Extra: extra})
}

// unreadBody is the body of r as limitBody read it, when nothing of it has
// been read since.
func unreadBody(r *http.Request) ([]byte, bool) {
	mb, ok := r.Body.(*memBody)
	if !ok || mb.Len() != len(mb.data) {
		return nil, false
	}
	return mb.data, true
}

// boundResponse bounds an upstream HTTP response as boundedTransport does.
func (b *backend) boundResponse(resp *http.Response) {
	mt, _ := direct.MediaType(resp.Header.Get("Content-Type"))
	resp.Body = &boundedBody{ReadCloser: resp.Body, limit: b.cfg.maxMessageBytes, cut: new(atomic.Bool), sse: mt == "text/event-stream"}
}

// upstreamNotification hands a notification the upstream sent on a direct
// call's stream to the handler the SDK's client would have called
// (clientOptions).
func (l *link) upstreamNotification(ctx context.Context, method string, params json.RawMessage) {
	switch method {
	case "notifications/tools/list_changed":
		l.toolsChanged()
		return
	case "notifications/progress":
		notify[mcp.ProgressNotificationParams](ctx, l, method, params)
		return
	}
	if l.client == nil || l.b.cfg.toolsOnly {
		return
	}
	switch method {
	case "notifications/message":
		notify[mcp.LoggingMessageParams](ctx, l, method, params)
	case "notifications/resources/updated":
		var p mcp.ResourceUpdatedNotificationParams
		if decodeParams(params, &p) == nil && l.passesNotification(method, p.URI) {
			toFront(ctx, l, method, &mcp.ResourceUpdatedNotificationParams{URI: p.URI})
		}
	case "notifications/resources/list_changed":
		if l.passesNotification(method, "") {
			notify[mcp.ResourceListChangedParams](ctx, l, method, params)
		}
	case "notifications/prompts/list_changed":
		if l.passesNotification(method, "") {
			notify[mcp.PromptListChangedParams](ctx, l, method, params)
		}
	case "notifications/elicitation/complete":
		var p mcp.ElicitationCompleteParams
		if l.forwards(methodElicit) && decodeParams(params, &p) == nil {
			l.client.NotifyElicitationComplete(ctx, &p)
		}
	}
}

func notify[T any, P interface {
	*T
	mcp.Params
}](ctx context.Context, l *link, method string, params json.RawMessage) {
	p := P(new(T))
	if decodeParams(params, p) == nil {
		toFront(ctx, l, method, p)
	}
}

func decodeParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return json.Unmarshal(raw, v)
}

// upstreamRequest answers a request the upstream sent on a direct call's
// stream as the SDK's client would (clientOptions, receiveAsks): ping;
// elicitation, sampling and the client's roots forwarded to the client
// session when the operator allows it and the client offers it, within
// WithMaxPendingUpstreamRequests, and refused otherwise; the operator's
// roots; anything else is not found.
func (l *link) upstreamRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case "ping":
		return struct{}{}, nil
	case methodElicit:
		if !l.forwards(method) {
			return nil, l.refuseAsk(method)
		}
		var p mcp.ElicitParams
		if err := decodeParams(params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		l.logAsk(method)
		return pending(ctx, l, func(ctx context.Context) (any, error) { return l.client.Elicit(ctx, &p) })
	case methodCreateMessage:
		if !l.forwards(method) {
			return nil, l.refuseAsk(method)
		}
		var p mcp.CreateMessageParams
		if err := decodeParams(params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		l.logAsk(method)
		return pending(ctx, l, func(ctx context.Context) (any, error) { return l.client.CreateMessage(ctx, &p) })
	case methodListRoots:
		if !l.forwards(method) {
			return l.b.operatorRoots(), nil
		}
		var p mcp.ListRootsParams
		if err := decodeParams(params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		l.logAsk(method)
		return pending(ctx, l, func(ctx context.Context) (any, error) { return l.client.ListRoots(ctx, &p) })
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method}
}

// pending runs do within the bound of the upstream's requests to the
// client that may wait at once.
func pending(ctx context.Context, l *link, do func(context.Context) (any, error)) (any, error) {
	if !l.pending.take() {
		return nil, errTooManyPending
	}
	defer l.pending.put()
	ctx, stop := l.whileOpen(ctx)
	defer stop()
	return do(ctx)
}
