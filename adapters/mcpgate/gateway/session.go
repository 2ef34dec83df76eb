package gateway

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/direct"
	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/upcreds"
)

// session is what the gateway keeps of one client session (or stateless
// caller): its upstream session with each upstream, started with it or on
// first use, and what bounds it whichever upstream it calls.
type session struct {
	g *Gateway
	// f is the front the session came in through, client the session
	// (nil for a stateless caller, whose key is callerKey).
	f         *front
	client    *mcp.ServerSession
	callerKey string

	calls       slots        // tools/call in flight (WithMaxCallsPerSession)
	directState direct.State // the direct path's record of the client session

	// caller is the caller its links start as (TokenExchange), and links
	// its upstream sessions, by upstream; both under g.mu.
	caller *upcreds.Caller
	links  map[*backend]*link
	ended  bool
}

func (g *Gateway) newSession(f *front, client *mcp.ServerSession, callerKey string, caller *upcreds.Caller) *session {
	return &session{g: g, f: f, client: client, callerKey: callerKey, caller: caller,
		calls: newSlots(g.cfg.maxCallsPerSession), links: map[*backend]*link{}}
}

// link returns the session's upstream session with b, starting it on
// first use (an upstream Reload added since the session began).
func (s *session) link(b *backend) *link {
	g := s.g
	g.mu.Lock()
	if l := s.links[b]; l != nil {
		g.mu.Unlock()
		return l
	}
	l := b.newLink(s.f, s.client, s)
	l.callerKey = s.callerKey
	if s.caller != nil {
		l.caller.Store(s.caller)
	}
	if g.closed || s.ended || !g.current(b) {
		g.mu.Unlock()
		l.stopUnstarted()
		return l
	}
	s.links[b] = l
	g.mu.Unlock()
	l.start()
	return l
}

// current reports whether b is one of the gateway's upstreams now. g.mu
// is held.
func (g *Gateway) current(b *backend) bool {
	for _, x := range g.set().list {
		if x == b {
			return true
		}
	}
	return false
}

// startAll starts the session's upstream sessions with every upstream.
func (s *session) startAll() {
	for _, b := range s.g.set().list {
		s.link(b)
	}
}

// detachAllLocked ends the session for the gateway and returns its links
// to close. g.mu is held.
func (s *session) detachAllLocked() []*link {
	s.ended = true
	out := make([]*link, 0, len(s.links))
	for b, l := range s.links {
		out = append(out, l)
		delete(s.links, b)
	}
	return out
}

// linksNow are the session's upstream sessions started so far.
func (s *session) linksNow() []*link {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	out := make([]*link, 0, len(s.links))
	for _, l := range s.links {
		out = append(out, l)
	}
	return out
}

// notifyToolsChanged tells the client session that its tool list changed.
func (s *session) notifyToolsChanged() {
	if s.client == nil || s.f == nil || s.f.send == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.f.send(ctx, "notifications/tools/list_changed", &mcp.ServerRequest[*mcp.ToolListChangedParams]{Session: s.client, Params: &mcp.ToolListChangedParams{}}); err != nil {
		s.g.cfg.logger.Debug("forwarding a notification to the client failed", "method", "notifications/tools/list_changed", "error", err)
	}
}

// sessionFor returns the session of a client session (or of the stateless
// request's caller), starting it on first use. It ends when the client
// session ends.
func (g *Gateway) sessionFor(f *front, ss *mcp.ServerSession) *session {
	return g.sessionWith(f, ss, nil)
}

// sessionWith is sessionFor, its upstream sessions started as caller's
// (TokenExchange) when it starts now.
func (g *Gateway) sessionWith(f *front, ss *mcp.ServerSession, caller *upcreds.Caller) *session {
	g.mu.Lock()
	if s := g.links[ss]; s != nil {
		g.mu.Unlock()
		return s
	}
	if cl := g.ephemeral[ss]; cl != nil {
		g.mu.Unlock()
		return cl.s
	}
	s := g.newSession(f, ss, "", caller)
	if g.closed {
		s.ended = true
		g.mu.Unlock()
		return s
	}
	g.links[ss] = s
	g.mu.Unlock()
	s.startAll()
	go func() {
		ss.Wait()
		g.mu.Lock()
		if g.links[ss] == s {
			delete(g.links, ss)
		}
		if id := ss.ID(); id != "" && g.byID[id] == s {
			delete(g.byID, id)
		}
		links := s.detachAllLocked()
		g.mu.Unlock()
		g.release(ss)
		for _, l := range links {
			l.close()
		}
	}()
	return s
}

// linkFor returns the upstream session of a client session with b,
// starting it on first use.
func (g *Gateway) linkFor(f *front, ss *mcp.ServerSession, b *backend) *link {
	return g.sessionFor(f, ss).link(b)
}

// dropSession ends the session of a client session whose initialize
// failed: its upstreams are not connected again for a session that was
// never admitted.
func (g *Gateway) dropSession(ss *mcp.ServerSession, s *session) {
	g.mu.Lock()
	if g.links[ss] == s {
		delete(g.links, ss)
	}
	links := s.detachAllLocked()
	g.mu.Unlock()
	for _, l := range links {
		go l.close()
	}
}

// sessions returns the client sessions.
func (g *Gateway) sessions() []*session {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*session, 0, len(g.links))
	for _, s := range g.links {
		out = append(out, s)
	}
	return out
}

// exchangeAtStart is the caller of a new session whose upstream sessions
// carry its token (TokenExchange), refused now when its token cannot be
// exchanged: before any link, whose failing starts would hold back the
// others'. With several upstreams, none is refused at the start: each
// upstream refuses its own calls (upstreamCredential).
func (g *Gateway) exchangeAtStart(ctx context.Context, f *front, ss *mcp.ServerSession, extra *mcp.RequestExtra) (*upcreds.Caller, error) {
	list := g.set().list
	per := false
	for _, b := range list {
		per = per || b.perCaller()
	}
	if !per {
		return nil, nil
	}
	caller := callerOf(f, ctx, ss, extra)
	if caller == nil || len(list) > 1 {
		return caller, nil
	}
	if _, err := list[0].creds.Authorization(upcreds.WithCaller(ctx, caller)); err != nil {
		return nil, sessionRefusal(credentialsRefused("", err))
	}
	return caller, nil
}
