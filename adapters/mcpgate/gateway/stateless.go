package gateway

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate"
	axerr "github.com/axgate/axgate/errors"
)

// MCP 2026-07-28 over HTTP (docs/mcp-gateway-internals.md, "MCP 2026-07-28
// at the front"). A request of that version has no session: the go-sdk's
// stateless handler serves it with a session of its own that ends with
// the request. The gateway's upstream sessions are per caller instead: a
// caller (tenant and user) has one link, started by its first request,
// reused by its next ones, and closed once it has seen no request for
// WithSessionTimeout. The link counts as one of the caller's sessions
// (WithMaxSessions, WithMaxSessionsPerPrincipal) and bounds the caller's
// calls as a session's do (WithMaxCallsPerSession); callers never share
// one. Nothing of the upstream reaches a stateless client but the answers
// to its requests: no notifications, and no requests of the upstream to
// the client (a stateless client cannot be asked; the link offers the
// upstream nothing to ask).

// statelessVersions are the protocol versions of the stateless front: the
// go-sdk's from 2026-07-28 on. Requests of older versions never reach it
// (serveHTTP).
func statelessVersions() []string {
	return slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v < standardHeadersVersion })
}

// statelessRequest reports whether an HTTP request is one of MCP 2026-07-28
// or later, which the stateless front serves: a POST whose protocol version
// header says so (the go-sdk's client sends it on every request of those
// versions, server/discover included).
func statelessRequest(r *http.Request) bool {
	return r.Method == http.MethodPost && r.Header.Get(headerProtocolVersion) >= standardHeadersVersion
}

// callerLink is the upstream link of a stateless caller.
type callerLink struct {
	s   *session
	key string
	// slot is what the link counts as among the sessions (admit): a
	// session of its own, never connected, that stands for the caller's.
	slot *mcp.ServerSession
	// inflight counts the caller's requests being served; gen changes at
	// each, so that an idle timer set before one does not close the link.
	inflight int
	gen      uint64
	idle     *time.Timer
}

// receiveStateless is receive for the stateless front: every request on
// its own, the caller's link found (or started) for it from its
// credentials, the same methods answered the same way as on a session.
func (f *front) receiveStateless(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if ss == nil {
			return next(ctx, method, req)
		}
		switch {
		case method == "server/discover":
			res, err := next(ctx, method, req)
			if dr, ok := res.(*mcp.DiscoverResult); ok && err == nil {
				dr.Capabilities = f.g.statelessCaps()
			}
			return res, err
		case method == "ping" || strings.HasPrefix(method, "notifications/"):
			return next(ctx, method, req)
		case method == "subscriptions/listen", method == "logging/setLevel",
			method == "resources/subscribe", method == "resources/unsubscribe", method == "initialize":
			// Nothing of the upstream is sent to a stateless client but
			// its answers: there is nothing to listen to. The level and
			// the subscriptions would be the caller's link's, shared by
			// its requests.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "the gateway does not serve " + method + " to stateless clients"}
		}
		if err := f.g.acquireCaller(ctx, f, ss, req.GetExtra()); err != nil {
			return nil, err
		}
		defer f.g.releaseCaller(ss)
		switch method {
		case "tools/list", "tools/call":
			return f.tool(ctx, method, req, next)
		}
		if res, handled, err := f.entry(ctx, ss, method, req, next); handled {
			return res, err
		}
		return next(ctx, method, req)
	}
}

// statelessCaps are frontCaps without what a stateless client cannot be
// sent: list changes, resource updates, log messages.
func (g *Gateway) statelessCaps() *mcp.ServerCapabilities {
	caps := g.frontCaps()
	out := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Completions: caps.Completions}
	if caps.Resources != nil {
		out.Resources = &mcp.ResourceCapabilities{}
	}
	if caps.Prompts != nil {
		out.Prompts = &mcp.PromptCapabilities{}
	}
	return out
}

// acquireCaller finds the link of the caller of a stateless request, or
// starts it (counted against the session bounds), and makes it the link of
// the request's session until releaseCaller.
func (g *Gateway) acquireCaller(ctx context.Context, f *front, ss *mcp.ServerSession, extra *mcp.RequestExtra) error {
	p, err := f.principalOf(ctx, ss, extra)
	if err != nil {
		e, ok := axerr.As(err)
		if !ok {
			e = axerr.New(axerr.CodeUnauthenticated, "the request is not authenticated").WithCause(err)
		}
		return mcpgate.JSONRPCError(e)
	}
	key := sessionKey(p)
	if g.useCaller(ss, key) {
		return nil
	}
	// A new link: with TokenExchange the upstream session is the
	// caller's, and a caller whose token cannot be exchanged is refused
	// before it exists, as at a session's initialize.
	caller, err := g.exchangeAtStart(ctx, f, ss, extra)
	if err != nil {
		return err
	}
	// Another request of the caller may have started the link meanwhile:
	// looking for it and counting a new one are one step, so that the
	// caller's requests arriving together start one link, never count as
	// two sessions (refused past the caller's bound, or taking another
	// caller's place under the gateway's).
	slot := new(mcp.ServerSession)
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return mcpgate.JSONRPCError(unavailable(""))
	}
	if g.useCallerLocked(ss, key) {
		g.mu.Unlock()
		return nil
	}
	if _, e := g.admitLocked(slot, key); e != nil {
		g.mu.Unlock()
		return sessionRefusal(e)
	}
	s := g.newSession(f, nil, key, caller)
	cl := &callerLink{s: s, key: key, slot: slot, inflight: 1, gen: 1}
	g.callers[key] = cl
	g.ephemeral[ss] = cl
	g.mu.Unlock()
	s.startAll()
	return nil
}

// useCaller makes the caller's open link that of ss, and reports whether
// there was one.
func (g *Gateway) useCaller(ss *mcp.ServerSession, key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.useCallerLocked(ss, key)
}

// useCallerLocked is useCaller with g.mu held.
func (g *Gateway) useCallerLocked(ss *mcp.ServerSession, key string) bool {
	cl := g.callers[key]
	if cl == nil || g.closed {
		return false
	}
	cl.inflight++
	cl.gen++
	if cl.idle != nil {
		cl.idle.Stop()
		cl.idle = nil
	}
	g.ephemeral[ss] = cl
	return true
}

// releaseCaller ends a stateless request's use of its caller's link; the
// last one in flight sets the link's idle timer.
func (g *Gateway) releaseCaller(ss *mcp.ServerSession) {
	g.mu.Lock()
	defer g.mu.Unlock()
	cl := g.ephemeral[ss]
	if cl == nil {
		return
	}
	delete(g.ephemeral, ss)
	if cl.inflight--; cl.inflight > 0 || g.closed {
		return
	}
	gen := cl.gen
	cl.idle = time.AfterFunc(g.cfg.sessionTimeout, func() { g.expireCaller(cl, gen) })
}

// expireCaller closes a caller's link that has been idle since gen.
func (g *Gateway) expireCaller(cl *callerLink, gen uint64) {
	g.mu.Lock()
	if g.callers[cl.key] != cl || cl.inflight > 0 || cl.gen != gen {
		g.mu.Unlock()
		return
	}
	delete(g.callers, cl.key)
	links := cl.s.detachAllLocked()
	g.mu.Unlock()
	g.release(cl.slot)
	for _, l := range links {
		l.close()
	}
}

// closeCallersLocked forgets every stateless caller's link and returns
// them, for Close to close. g.mu is held.
func (g *Gateway) closeCallersLocked() []*link {
	out := make([]*link, 0, len(g.callers))
	for key, cl := range g.callers {
		if cl.idle != nil {
			cl.idle.Stop()
		}
		delete(g.callers, key)
		delete(g.sessionKeys, cl.slot)
		if g.perKey[key]--; g.perKey[key] <= 0 {
			delete(g.perKey, key)
		}
		out = append(out, cl.s.detachAllLocked()...)
	}
	return out
}
