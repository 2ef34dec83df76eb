package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/direct"
	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/jsonscan"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// Reasons of the gateway's own refusals, in the details of the AXAG error.
const (
	// reasonTooManySessions: the gateway, or this caller, has as many
	// client sessions as WithMaxSessions allows.
	reasonTooManySessions axerr.Reason = "too_many_sessions"
	// reasonTooManyCalls: the session has as many calls in flight as
	// WithMaxCallsPerSession allows.
	reasonTooManyCalls axerr.Reason = "too_many_calls"
	// reasonResultTooLarge: the upstream answered with a message larger
	// than WithMaxMessageBytes.
	reasonResultTooLarge axerr.Reason = "result_too_large"
	// reasonUpstreamTimeout: the upstream did not answer the call within
	// WithCallTimeout.
	reasonUpstreamTimeout axerr.Reason = "upstream_timeout"
	// reasonToolsUnverified: the upstream said its tools changed and they
	// could not be listed again, so none of them is trusted until they are.
	reasonToolsUnverified axerr.Reason = "tools_unverified"
)

// errMessageTooLarge is why an HTTP upstream's connection was cut: one of
// its messages was larger than WithMaxMessageBytes (a command upstream's:
// childproc.ErrTooLarge).
var errMessageTooLarge = direct.ErrTooLarge

// errTooManyTools is why a tool list was refused.
var errTooManyTools = errors.New("gateway: upstream tool list larger than the bound")

// errTooManyPending answers an upstream request to the client beyond
// WithMaxPendingUpstreamRequests.
var errTooManyPending = errors.New("gateway: too many upstream requests to the client pending")

// errCircuitOpen is why an upstream start was not tried.
var errCircuitOpen = errors.New("gateway: upstream starts failing, backing off")

// sessionKey is whom a client session counts against: the caller's user id
// and tenant.
func sessionKey(p middleware.Principal) string {
	// json.Marshal([2]string{p.Tenant, p.ID}), without reflection: it is
	// made for every call (TestSessionKey). A string always encodes.
	k, _ := jsonscan.AppendString(append(make([]byte, 0, 8+len(p.Tenant)+len(p.ID)), '['), p.Tenant)
	k, _ = jsonscan.AppendString(append(k, ','), p.ID)
	return string(append(k, ']'))
}

// admit counts a new client session of key against the bounds of
// WithMaxSessions, or refuses it. counted reports whether this call counted
// it (not a session counted already): only then may release undo it.
func (g *Gateway) admit(ss *mcp.ServerSession, key string) (counted bool, refused *axerr.Error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admitLocked(ss, key)
}

// admitLocked is admit with g.mu held.
func (g *Gateway) admitLocked(ss *mcp.ServerSession, key string) (counted bool, refused *axerr.Error) {
	if _, ok := g.sessionKeys[ss]; ok {
		return false, nil // already counted
	}
	if g.cfg.maxSessions > 0 && len(g.sessionKeys) >= g.cfg.maxSessions {
		return false, axerr.Newf(axerr.CodeStoreUnavailable, "the gateway serves %d client sessions, its bound; try again when one ends", g.cfg.maxSessions).
			WithReason(reasonTooManySessions)
	}
	if g.cfg.maxSessionsPerPrincipal > 0 && g.perKey[key] >= g.cfg.maxSessionsPerPrincipal {
		return false, axerr.Newf(axerr.CodeRateLimited, "this caller has %d open sessions, its bound; close one (or let it time out) first", g.cfg.maxSessionsPerPrincipal).
			WithReason(reasonTooManySessions)
	}
	g.sessionKeys[ss] = key
	g.perKey[key]++
	return true, nil
}

// admitted reports whether a client session is counted (admit): it was
// initialized and has not ended.
func (g *Gateway) admitted(ss *mcp.ServerSession) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.sessionKeys[ss]
	return ok || g.ephemeral[ss] != nil
}

// release uncounts a client session.
func (g *Gateway) release(ss *mcp.ServerSession) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key, ok := g.sessionKeys[ss]
	if !ok {
		return
	}
	delete(g.sessionKeys, ss)
	if g.perKey[key]--; g.perKey[key] <= 0 {
		delete(g.perKey, key)
	}
}

// takeCall counts a call in flight of the caller of ss against
// WithMaxCallsPerPrincipal; putCall must follow when it took.
func (g *Gateway) takeCall(ss *mcp.ServerSession) (key string, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key = g.sessionKeys[ss]
	if cl := g.ephemeral[ss]; cl != nil {
		key = cl.key
	}
	if g.callsOf[key] >= g.cfg.maxCallsPerPrincipal {
		return key, false
	}
	g.callsOf[key]++
	return key, true
}

func (g *Gateway) putCall(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.callsOf[key]--; g.callsOf[key] <= 0 {
		delete(g.callsOf, key)
	}
}

// breaker is the gateway-wide back-off of upstream starts: once starts
// fail, no session starts the upstream again (no new child process) until
// the back-off has passed, and then one at a time until one succeeds.
type breaker struct {
	min, max time.Duration

	mu       sync.Mutex
	failures int
	until    time.Time
	probing  bool
}

// allow reports whether a start may be tried now; done must then be called
// with its outcome.
func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures == 0 {
		return true
	}
	if b.probing || time.Now().Before(b.until) {
		return false
	}
	b.probing = true
	return true
}

func (b *breaker) done(ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	if ok {
		b.failures = 0
		return
	}
	b.failures++
	d := b.max
	if b.failures < 32 {
		d = min(time.Duration(float64(b.min)*math.Pow(2, float64(b.failures-1))), b.max)
	}
	b.until = time.Now().Add(d)
}

// boundedBody cuts an upstream HTTP response whose message is larger than
// limit: a JSON body as a whole, a server-sent event stream event by event
// (the bytes since the last blank line).
type boundedBody struct {
	io.ReadCloser
	limit int64
	cut   *atomic.Bool
	sse   bool
	n     int64
	nl    bool // the last byte was a line feed (ignoring CR)
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	for _, c := range p[:n] {
		b.n++
		if b.sse {
			switch c {
			case '\n':
				if b.nl {
					b.n = 0 // a blank line ends an event
				}
				b.nl = true
				continue
			case '\r':
				continue
			}
			b.nl = false
		}
		if b.n > b.limit {
			b.cut.Store(true)
			return 0, errMessageTooLarge
		}
	}
	return n, err
}

// boundedTransport bounds the size of the upstream's HTTP messages.
type boundedTransport struct {
	next  http.RoundTripper
	limit int64
	cut   *atomic.Bool
}

func (t boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mt, _ := direct.MediaType(resp.Header.Get("Content-Type"))
	resp.Body = &boundedBody{ReadCloser: resp.Body, limit: t.limit, cut: t.cut, sse: mt == "text/event-stream"}
	return resp, nil
}

// maxProgressToken bounds the length of a progress token forwarded upstream.
const maxProgressToken = 256

// progressToken is the client's progress token as the upstream may get it:
// a string of at most maxProgressToken bytes or an integer; anything else is
// not forwarded.
func progressToken(v any) any {
	switch t := v.(type) {
	case string:
		if len(t) <= maxProgressToken {
			return t
		}
	case int, int32, int64:
		return t
	case float64:
		if t == math.Trunc(t) && math.Abs(t) <= 1<<53 {
			return int64(t)
		}
	case json.Number:
		if n, err := t.Int64(); err == nil {
			return n
		}
	}
	return nil
}

// slots bounds how many of something run at once; take never waits.
type slots chan struct{}

func newSlots(n int) slots {
	if n <= 0 {
		return nil
	}
	return make(slots, n)
}

func (s slots) take() bool {
	if s == nil {
		return true
	}
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s slots) put() {
	if s != nil {
		<-s
	}
}

func tooManyCalls(intent, whose string, n int) *axerr.Error {
	return axerr.Newf(axerr.CodeRateLimited, "%s has %d calls in flight, its bound; wait for one to end", whose, n).
		WithIntent(intent).
		WithReason(reasonTooManyCalls)
}

func resultTooLarge(intent string, limit int64) *axerr.Error {
	return axerr.Newf(axerr.CodeToolFailed, "the upstream's answer is larger than the gateway relays (%d bytes)", limit).
		WithIntent(intent).
		WithReason(reasonResultTooLarge)
}

func callTimedOut(intent string, d time.Duration) *axerr.Error {
	return axerr.Newf(axerr.CodeToolFailed, "the upstream did not answer within %s", d).
		WithIntent(intent).
		WithReason(reasonUpstreamTimeout)
}

func unverified(intent string) *axerr.Error {
	return axerr.New(axerr.CodeStoreUnavailable, "the upstream said its tools changed and they could not be listed again; its tools are refused until they are").
		WithIntent(intent).
		WithReason(reasonToolsUnverified)
}

// sessionRefusal is the JSON-RPC error of a refused initialize.
func sessionRefusal(e *axerr.Error) error { return mcpgate.JSONRPCError(e) }

// tooLargeBody answers a client request body over the bound.
func tooLargeBody(w http.ResponseWriter, limit int64) {
	e := axerr.Newf(axerr.CodeInvalidArguments, "the request body is larger than the gateway accepts (%d bytes)", limit)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	raw, _ := json.Marshal(e.Envelope())
	w.Write(raw)
}

// limitBody bounds the body of a client's request to /mcp.
func limitBody(next http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > limit {
			tooLargeBody(w, limit)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
		if err != nil {
			http.Error(w, "reading the request failed", http.StatusBadRequest)
			return
		}
		if int64(len(body)) > limit {
			tooLargeBody(w, limit)
			return
		}
		r.Body = &memBody{Reader: bytes.NewReader(body), data: body}
		next.ServeHTTP(w, r)
	})
}

// memBody is a request body limitBody has read: the direct path takes its
// bytes without copying them (directCall).
type memBody struct {
	*bytes.Reader
	data []byte
}

func (*memBody) Close() error { return nil }
