package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/axgate/axgate/adapters/mcpgate/gateway/internal/upcreds"
	"github.com/axgate/axgate/adapters/mcpgate/internal/childproc"
	"github.com/axgate/axgate/middleware"
)

// upstreamProtocolVersion is the protocol version the gateway asks its
// upstream sessions for: the newest with sessions, as the front speaks
// (legacyVersions), so that one client session maps to one upstream
// session.
const upstreamProtocolVersion = "2025-11-25"

// own reports whether l is the gateway's own upstream session.
func (l *link) own() bool { return l.client == nil && l.callerKey == "" }

// errNotConnected is why a link that never connected is down.
var errNotConnected = errors.New("gateway: not connected yet")

// link is one upstream session, kept connected: the upstream session of
// one client session (client set), or the gateway's own (client nil). A
// session that ends — the child process died, the HTTP session was lost —
// is connected again after a back-off that doubles on each failure in a
// row; for a command upstream that starts a new child. In the meantime
// there is no current session and calls are refused as unavailable.
type link struct {
	g *Gateway
	// b is the upstream; s the session whose link this is (nil for the
	// gateway's own).
	b *backend
	s *session
	// srv is the front the client session came in through, and client
	// that session; both nil for the gateway's own link.
	srv    *front
	client *mcp.ServerSession
	// callerKey is the caller of a stateless caller's link (client nil
	// too: stateless.go), "" otherwise.
	callerKey string
	// ctx ends when the link closes; cancel ends it.
	ctx    context.Context
	cancel context.CancelFunc

	conn       linkConn  // the upstream session and its reconnection
	tools      linkTools // the upstream's tools and their freshness
	callBounds           // what bounds the session's messages

	// subscriber is the caller of the session's last resources/subscribe
	// the upstream took: resource updates reach the client only for what
	// it may read (passesNotification).
	subscriber atomic.Pointer[middleware.Principal]
	// caller is the client session's caller last seen, whose token the
	// upstream session's requests without a caller of their own carry
	// (TokenExchange; credentials.go).
	caller atomic.Pointer[upcreds.Caller]
}

// linkConn is a link's connection to the upstream: the current session,
// or why there is none.
type linkConn struct {
	sdk       *mcp.Client   // the go-sdk client that connects to the upstream
	stopped   chan struct{} // run has returned
	tried     chan struct{} // the first attempt to connect has ended
	triedOnce sync.Once

	mu      sync.Mutex
	closed  bool
	session *mcp.ClientSession // nil while down
	err     error              // why it is down
	sendUp  mcp.MethodHandler  // the client's sending method handler

	// stateless is the protocol _meta of the current session when it is
	// of MCP 2026-07-28 (statelessup.go).
	stateless atomic.Pointer[statelessUp]
	// headerParams are, by tool name, whether the upstream's definition
	// has an x-mcp-header parameter (toolHeaders): of tools called, which
	// the manifest names, so no more than it has.
	headerParams sync.Map
	// failOf is, by session, the failed flag of the transport it was
	// connected on (failUp), while it is the link's.
	failOf sync.Map
}

// linkTools is what a link knows of the upstream's tools. stale is set
// from the upstream's notifications/tools/list_changed until a list that
// began after it is checked; changes counts those notifications.
type linkTools struct {
	// listing serializes the lists of one session; listed counts those
	// that succeeded, under listing.
	listing sync.Mutex
	listed  int

	mu      sync.Mutex
	offered map[string]*mcp.Tool // the last list, by name
	stale   bool
	changes uint64
	settled chan struct{} // closed (and replaced) when a list ends
	listErr error         // why the last list failed

	due         chan struct{} // a list is due
	relistLimit *rate.Limiter // of the lists after notifications
}

// callBounds bound what one session holds of the gateway.
type callBounds struct {
	pending  slots       // upstream requests to the client (WithMaxPendingUpstreamRequests)
	tooLarge atomic.Bool // the session was cut for a message over the bound

	askLogs *rate.Limiter // of the log lines of the upstream's requests to the client (asks.go)
}

func (b *backend) newLink(srv *front, client *mcp.ServerSession, s *session) *link {
	g := b.cfg
	ctx, cancel := context.WithCancel(context.Background())
	l := &link{g: b.g, b: b, s: s, srv: srv, client: client, ctx: ctx, cancel: cancel,
		conn: linkConn{stopped: make(chan struct{}), tried: make(chan struct{}), err: errNotConnected},
		tools: linkTools{settled: make(chan struct{}), due: make(chan struct{}, 1),
			relistLimit: rate.NewLimiter(rate.Every(g.relistInterval), 1)},
		callBounds: callBounds{
			pending: newSlots(g.maxPendingUpstream),
			askLogs: rate.NewLimiter(rate.Every(time.Second), askLogBurst),
		},
	}
	l.conn.sdk = mcp.NewClient(g.impl, l.clientOptions())
	l.conn.sdk.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		l.conn.sendUp = next
		return next
	})
	// Outermost: the direct path reads the _meta the client puts in a
	// stateless session's requests (statelessup.go).
	l.conn.sdk.AddSendingMiddleware(captureMeta)
	// The SDK's client answers roots/list with these, unless they are
	// the client's (receiveAsks).
	l.conn.sdk.AddRoots(b.operatorRoots().Roots...)
	l.conn.sdk.AddReceivingMiddleware(l.receiveAsks)
	return l
}

// clientOptions offer the upstream the operator's roots (WithRoots), and
// what the client session offers the gateway that the operator allows
// (elicitation, sampling, the client's roots), each forwarded to that
// client; and forward the upstream's notifications to it.
func (l *link) clientOptions() *mcp.ClientOptions {
	opts := &mcp.ClientOptions{
		Logger:                 l.b.cfg.logger,
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { l.toolsChanged() },
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			toFront(ctx, l, "notifications/progress", req.Params)
		},
	}
	if len(l.b.cfg.roots) > 0 {
		// Fixed for as long as the gateway runs: no list_changed.
		opts.Capabilities.RootsV2 = &mcp.RootCapabilities{}
	}
	if l.client == nil || l.b.cfg.toolsOnly {
		return opts
	}
	opts.PromptListChangedHandler = func(ctx context.Context, req *mcp.PromptListChangedRequest) {
		if l.passesNotification("notifications/prompts/list_changed", "") {
			toFront(ctx, l, "notifications/prompts/list_changed", req.Params)
		}
	}
	opts.ResourceListChangedHandler = func(ctx context.Context, req *mcp.ResourceListChangedRequest) {
		if l.passesNotification("notifications/resources/list_changed", "") {
			toFront(ctx, l, "notifications/resources/list_changed", req.Params)
		}
	}
	opts.ResourceUpdatedHandler = func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		if req.Params != nil && l.passesNotification("notifications/resources/updated", req.Params.URI) {
			toFront(ctx, l, "notifications/resources/updated", &mcp.ResourceUpdatedNotificationParams{URI: req.Params.URI})
		}
	}
	opts.LoggingMessageHandler = func(ctx context.Context, req *mcp.LoggingMessageRequest) {
		toFront(ctx, l, "notifications/message", req.Params)
	}
	caps := l.clientCaps()
	if caps == nil {
		return opts
	}
	if l.forwards(methodElicit) {
		e := *caps.Elicitation
		opts.Capabilities.Elicitation = &e
		opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return askClient(ctx, l, func(ctx context.Context) (*mcp.ElicitResult, error) { return l.client.Elicit(ctx, req.Params) })
		}
		opts.ElicitationCompleteHandler = func(ctx context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			l.client.NotifyElicitationComplete(ctx, req.Params)
		}
	}
	if l.forwards(methodCreateMessage) {
		opts.CreateMessageHandler = func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return askClient(ctx, l, func(ctx context.Context) (*mcp.CreateMessageResult, error) {
				return l.client.CreateMessage(ctx, req.Params)
			})
		}
	}
	if l.forwards(methodListRoots) {
		r := *caps.RootsV2
		opts.Capabilities.RootsV2 = &r
	}
	return opts
}

// toFront sends an upstream notification to the link's client session.
func toFront[P mcp.Params](ctx context.Context, l *link, method string, p P) {
	if l.client == nil || l.srv == nil || l.srv.send == nil {
		return
	}
	if _, err := l.srv.send(ctx, method, &mcp.ServerRequest[P]{Session: l.client, Params: p}); err != nil {
		l.b.cfg.logger.Debug("forwarding a notification to the client failed", "method", method, "error", err)
	}
}

// notifyToolsChanged tells the client session that its tool list changed.
func (l *link) notifyToolsChanged() {
	if l.s != nil {
		l.s.notifyToolsChanged()
	}
}

// notifyRootsChanged tells the upstream that the client's roots changed.
func (l *link) notifyRootsChanged(ctx context.Context) {
	cs := l.current()
	l.conn.mu.Lock()
	send := l.conn.sendUp
	l.conn.mu.Unlock()
	if cs == nil || send == nil {
		return
	}
	// Bounded as a call is: an upstream that does not take it does not
	// hold the client's notification (and what the session handles after
	// it) for longer.
	ctx, cancel := context.WithTimeout(ctx, l.b.cfg.callTimeout)
	defer cancel()
	send(ctx, "notifications/roots/list_changed", &mcp.ClientRequest[*mcp.RootsListChangedParams]{Session: cs, Params: &mcp.RootsListChangedParams{}})
}

// upstreamIdleConns is how many idle connections to an HTTP upstream the
// gateway's default client keeps. Every client session has an upstream
// session, and their calls go out concurrently: with http.DefaultClient,
// which keeps 2 idle connections per host, a third call in flight opened a
// new TCP connection and closed it afterwards (a third of the calls did
// with 8 agents in BenchmarkGatewayRead).
const upstreamIdleConns = 256

// newUpstreamClient is the default HTTP client to an HTTP upstream:
// http.DefaultTransport's settings (proxy from the environment, timeouts),
// with upstreamIdleConns idle connections kept.
func newUpstreamClient() *http.Client {
	var t *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t = dt.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true, IdleConnTimeout: 90 * time.Second}
	}
	t.MaxIdleConns = upstreamIdleConns
	t.MaxIdleConnsPerHost = upstreamIdleConns
	return &http.Client{Transport: t}
}

// transport is a new connection to the upstream, its messages bounded
// (WithMaxMessageBytes): for a command, a new child.
func (l *link) transport() mcp.Transport {
	b := l.b
	limit := b.cfg.maxMessageBytes
	if b.up.URL != "" {
		hc := b.up.HTTPClient
		if hc == nil {
			hc = http.DefaultClient
		}
		next := hc.Transport
		if next == nil {
			next = http.DefaultTransport
		}
		if b.creds.PerCaller() {
			next = linkCaller{l: l, next: next}
		}
		bounded := *hc
		bounded.Transport = replayTransport{next: boundedTransport{next: next, limit: limit, cut: &l.tooLarge}, failed: new(atomic.Bool)}
		return &mcp.StreamableClientTransport{Endpoint: b.up.URL, HTTPClient: &bounded, MaxEventSize: int(limit) + 1}
	}
	return childproc.NewTransport(childproc.Command{
		Path:    b.up.Command,
		Args:    b.up.Args,
		Env:     childproc.Env(b.up.InheritEnv, append(slices.Clone(b.up.Env), b.creds.Env()...)),
		Dir:     b.up.Dir,
		Stderr:  b.up.Stderr,
		Sandbox: b.cfg.contained,
		Grace:   b.cfg.childGrace,
	}, limit, &l.tooLarge)
}

// exitedFirst words the error of a session that did not start on t: for a
// command upstream whose child has exited, its exit status (its standard
// error went to the Upstream's Stderr); else err.
func exitedFirst(t mcp.Transport, err error) error {
	if ct, ok := t.(*childproc.Transport); ok {
		if ps := ct.Exited(); ps != nil {
			return fmt.Errorf("the upstream command exited (%v) before it answered initialize: %w", ps, err)
		}
	}
	return err
}

func (l *link) start() {
	go l.run()
	go l.relists()
}

// stopUnstarted leaves a link that will never connect (the gateway is
// closed) in its final state.
func (l *link) stopUnstarted() {
	l.conn.mu.Lock()
	l.conn.closed = true
	l.conn.mu.Unlock()
	l.cancel()
	l.markFirst()
	close(l.conn.stopped)
}

func (l *link) markFirst() { l.conn.triedOnce.Do(func() { close(l.conn.tried) }) }

// run keeps the session connected until the link is closed.
func (l *link) run() {
	defer close(l.conn.stopped)
	defer l.markFirst()
	delay := l.b.cfg.backoffMin
	for attempt := 0; ; attempt++ {
		started := time.Now()
		var cs *mcp.ClientSession
		var err error
		if l.b.starts.allow() {
			cs, err = l.connect()
			l.b.starts.done(err == nil)
		} else {
			err = errCircuitOpen
		}
		if err == nil && l.up(cs) {
			l.markFirst()
			if attempt > 0 {
				l.g.restartCount.Add(context.Background(), 1)
				l.b.cfg.logger.Info("upstream session connected again", "attempt", attempt)
				// A new session (for a command, a new child) may offer other
				// tools than the one that died.
				go l.notifyToolsChanged()
			}
			err = cs.Wait()
			cs.Close() // reaps the child of a command upstream
			l.down(cs, err)
			if time.Since(started) >= l.b.cfg.backoffMax {
				delay = l.b.cfg.backoffMin // it ran a good while: not a failure in a row
			} else if l.ctx.Err() == nil {
				// It died soon after it started: a failure for the gateway's
				// back-off too, so that N sessions do not restart N children
				// in a storm.
				l.b.starts.done(false)
			}
		} else if err != nil {
			l.down(nil, err)
			l.markFirst()
		}
		if l.ctx.Err() != nil {
			return
		}
		l.b.cfg.logger.Warn("upstream session ended; connecting again", "error", err, "in", delay)
		t := time.NewTimer(delay)
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, l.b.cfg.backoffMax)
	}
}

// connect starts a session and lists its tools.
func (l *link) connect() (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(l.ctx, l.b.cfg.connectTimeout)
	defer cancel()
	l.tooLarge.Store(false)
	// A session, as the front's, for an HTTP upstream and a command alike:
	// the stateless protocol would make each call carry the client's
	// description, have no session to map, and keep the upstream from
	// asking the person anything while it serves a call.
	opts := &mcp.ClientSessionOptions{ProtocolVersion: upstreamProtocolVersion}
	t := l.transport()
	cs, err := l.conn.sdk.Connect(ctx, t, opts)
	var rpcErr *jsonrpc.Error
	if err != nil && errors.As(err, &rpcErr) && ctx.Err() == nil {
		// An upstream that refuses the version with sessions (one that
		// speaks only the stateless protocol): the SDK's own choice.
		t = l.transport()
		cs, err = l.conn.sdk.Connect(ctx, t, nil)
	}
	if err != nil {
		return nil, exitedFirst(t, err)
	}
	if f := connFailure(t); f != nil {
		l.conn.failOf.Store(cs, f) // until down(cs)
	}
	if err := l.listTools(ctx, cs); err != nil {
		l.conn.failOf.Delete(cs)
		cs.Close()
		return nil, err
	}
	return cs, nil
}

// up makes cs the current session, unless the link was closed meanwhile.
func (l *link) up(cs *mcp.ClientSession) bool {
	l.conn.mu.Lock()
	if l.conn.closed {
		l.conn.mu.Unlock()
		l.conn.failOf.Delete(cs)
		cs.Close()
		return false
	}
	l.conn.session, l.conn.err = cs, nil
	l.conn.mu.Unlock()
	return true
}

func (l *link) down(cs *mcp.ClientSession, err error) {
	if cs != nil {
		l.conn.failOf.Delete(cs)
	}
	if err == nil {
		err = errors.New("gateway: upstream closed the session")
	}
	l.conn.mu.Lock()
	if l.conn.session == cs {
		l.conn.session = nil
	}
	l.conn.err = err
	l.conn.mu.Unlock()
}

// listTools lists the session's tools, at most WithMaxUpstreamTools of
// them, checks the pins, and keeps the list. A tool listed twice is
// disabled as changed: which of its definitions the upstream runs is not
// known.
func (l *link) listTools(ctx context.Context, cs *mcp.ClientSession) error {
	l.tools.listing.Lock()
	defer l.tools.listing.Unlock()
	l.tools.mu.Lock()
	gen := l.tools.changes
	l.tools.mu.Unlock()
	err := l.list(ctx, cs)
	if err == nil {
		// At start (the gateway's own session), and at every list after
		// the first of a session: a re-list.
		l.b.reportMissing("tool", l.b.pol().order, func(name string) bool { _, ok := l.offered()[name]; return ok }, l.own() || l.tools.listed > 0)
		if l.own() || (l.b.probeless && l.tools.listed == 0) {
			// At start: the gateway's own session, or a local client's
			// first (New starts no child of its own then).
			l.reportMissingEntries(ctx, cs, l.own())
		}
		l.tools.listed++
	}
	l.tools.mu.Lock()
	if err == nil {
		l.tools.listErr = nil
		l.tools.stale = l.tools.changes != gen // a change came in while listing
	} else {
		l.tools.listErr = err
	}
	close(l.tools.settled)
	l.tools.settled = make(chan struct{})
	l.tools.mu.Unlock()
	return err
}

func (l *link) list(ctx context.Context, cs *mcp.ClientSession) error {
	tools := map[string]*mcp.Tool{}
	var twice []string
	params := &mcp.ListToolsParams{}
	for pages := 1; ; pages++ {
		if pages > l.b.cfg.maxToolPages {
			return fmt.Errorf("%w: more than %d pages", errTooManyTools, l.b.cfg.maxToolPages)
		}
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return err
		}
		for _, t := range res.Tools {
			if t == nil {
				continue
			}
			if _, ok := tools[t.Name]; ok {
				twice = append(twice, t.Name)
			}
			tools[t.Name] = t
			if len(tools) > l.b.cfg.maxTools {
				return fmt.Errorf("%w: more than %d tools", errTooManyTools, l.b.cfg.maxTools)
			}
		}
		if res.NextCursor == "" {
			break
		}
		params.Cursor = res.NextCursor
	}
	p := l.b.pol()
	for _, name := range twice {
		if a := p.m.Tool(name); a != nil {
			l.b.disable(p, name, a, "(listed more than once)")
		}
	}
	l.b.checkPins(tools)
	l.tools.mu.Lock()
	l.tools.offered = tools
	l.tools.mu.Unlock()
	return nil
}

// toolsChanged marks the session's tools stale when the upstream says they
// changed, and asks relists for a new list: calls wait for it.
func (l *link) toolsChanged() {
	l.tools.mu.Lock()
	l.tools.stale = true
	l.tools.changes++
	l.tools.mu.Unlock()
	select {
	case l.tools.due <- struct{}{}:
	default: // a list is due already: notifications coalesce
	}
}

// relists lists the tools again after notifications, at most once per
// WithRelistInterval, and again with a back-off after a list that failed;
// it tells the client each time.
func (l *link) relists() {
	delay := l.b.cfg.backoffMin
	var retry <-chan time.Time
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.tools.due:
		case <-retry:
		}
		retry = nil
		if l.tools.relistLimit.Wait(l.ctx) != nil {
			return
		}
		cs := l.current()
		if cs == nil {
			continue // the next session lists its tools when it connects
		}
		ctx, cancel := context.WithTimeout(l.ctx, l.b.cfg.connectTimeout)
		err := l.listTools(ctx, cs)
		cancel()
		if err != nil {
			if l.ctx.Err() != nil {
				return
			}
			l.b.cfg.logger.Warn("listing the upstream's tools again failed; its tools are refused until a list succeeds", "error", err, "retry_in", delay)
			retry = time.After(delay)
			delay = min(2*delay, l.b.cfg.backoffMax)
			continue
		}
		delay = l.b.cfg.backoffMin
		l.notifyToolsChanged()
	}
}

// awaitFresh waits, at most timeout, until the session's tools are not
// stale; it fails when the last list failed.
func (l *link) awaitFresh(ctx context.Context, timeout time.Duration) error {
	l.tools.mu.Lock()
	stale, err := l.tools.stale, l.tools.listErr
	l.tools.mu.Unlock()
	if err != nil || !stale {
		return err // the common case: no timer to set
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		l.tools.mu.Lock()
		stale, err, settled := l.tools.stale, l.tools.listErr, l.tools.settled
		l.tools.mu.Unlock()
		if err != nil {
			return err
		}
		if !stale {
			return nil
		}
		select {
		case <-settled:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// cutTooLarge reports whether the session was cut for a message over the
// bound of WithMaxMessageBytes.
func (l *link) cutTooLarge() bool { return l.tooLarge.Load() }

// session waits for the first attempt to connect, and returns the current
// session, or why there is none.
func (l *link) session(ctx context.Context) (*mcp.ClientSession, error) {
	select {
	case <-l.conn.tried:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l.conn.mu.Lock()
	defer l.conn.mu.Unlock()
	if l.conn.session == nil {
		return nil, l.conn.err
	}
	return l.conn.session, nil
}

// ready reports whether a call on the link waits for nothing before its
// chain: the first connection is done, the session is up, and its tools
// are not being listed again.
// It waits for the first connection at most wait.
func (l *link) ready(ctx context.Context, wait time.Duration) bool {
	select {
	case <-l.conn.tried:
	default:
		if wait <= 0 {
			return false
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-l.conn.tried:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	if l.current() == nil {
		return false
	}
	l.tools.mu.Lock()
	defer l.tools.mu.Unlock()
	return !l.tools.stale && l.tools.listErr == nil
}

// current is the session, nil while down.
func (l *link) current() *mcp.ClientSession {
	l.conn.mu.Lock()
	defer l.conn.mu.Unlock()
	return l.conn.session
}

// offered is the tools the session listed last, by name.
func (l *link) offered() map[string]*mcp.Tool {
	l.tools.mu.Lock()
	defer l.tools.mu.Unlock()
	return l.tools.offered
}

// lastError is why the link is down, or fallback.
func (l *link) lastError(fallback error) error {
	l.conn.mu.Lock()
	defer l.conn.mu.Unlock()
	if l.conn.err != nil && l.conn.err != errNotConnected {
		return l.conn.err
	}
	return fallback
}

// close ends the session (for a command upstream, stops the child) and
// waits for run to return.
// whileOpen is ctx, ended also when the link closes. A question the
// gateway asks the client for the upstream (elicitation, sampling, roots)
// that the client never answers must not hold the link's close, and with
// it the session's end and Close: the person's form is abandoned, and the
// upstream is told so.
func (l *link) whileOpen(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

func (l *link) close() {
	l.conn.mu.Lock()
	l.conn.closed = true
	cs := l.conn.session
	l.conn.session = nil
	l.conn.mu.Unlock()
	l.cancel()
	if cs != nil {
		cs.Close()
	}
	<-l.conn.stopped
}
