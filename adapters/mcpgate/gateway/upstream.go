package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/axgate/axgate/middleware"
)

// errNotConnected is why a link that never connected is down.
var errNotConnected = errors.New("not connected yet")

// link is one upstream session, kept connected: the upstream session of
// one client session (front set), or the gateway's own (front nil). A
// session that ends — the child process died, the HTTP session was lost —
// is connected again after a back-off that doubles on each failure in a
// row; for a command upstream that starts a new child. In the meantime
// current is nil and calls are refused as unavailable.
type link struct {
	g       *Gateway
	f       *front
	front   *mcp.ServerSession
	client  *mcp.Client
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{} // run has returned
	first   chan struct{} // the first attempt to connect has ended
	firstMu sync.Once

	// refresh serializes the tool lists of one session; lists counts
	// those that succeeded, under refresh.
	refresh sync.Mutex
	lists   int

	mu     sync.Mutex
	closed bool
	cs     *mcp.ClientSession // nil while down
	err    error              // why it is down
	tools  map[string]*mcp.Tool
	sendUp mcp.MethodHandler // the client's sending method handler

	// stale is set from the upstream's notifications/tools/list_changed
	// until a list that began after it is checked; gen counts those
	// notifications. settled is closed (and replaced) when a list ends;
	// relistErr is why the last one failed.
	stale     bool
	gen       uint64
	settled   chan struct{}
	relistErr error
	wake      chan struct{} // a list is due
	limiter   *rate.Limiter // of the lists after notifications

	// userID is the user the client session was started by, version the
	// protocol version it agreed on, and lastPOST when the SDK last saw a
	// POST of it (direct.go).
	userID   string
	version  string
	lastPOST atomic.Int64

	// inflight are the direct calls of the session in flight, by their
	// JSON-RPC id: to refuse an id already in flight, as the SDK does, and
	// to cancel a call on the client's notifications/cancelled, which goes
	// to the SDK (it cancels only its own calls). inflightN counts them, so
	// that a POST of a session with none is not read for a cancellation.
	inflightMu sync.Mutex
	inflight   map[string]context.CancelFunc // by requestKey
	inflightN  atomic.Int32

	// subscriber is the caller of the session's last resources/subscribe
	// the upstream took: resource updates reach the client only for what
	// it may read (passesNotification).
	subscriber atomic.Pointer[middleware.Principal]

	calls    slots       // tools/call in flight (WithMaxCallsPerSession)
	pending  slots       // upstream requests to the client (WithMaxPendingUpstreamRequests)
	tooLarge atomic.Bool // the session was cut for a message over the bound

	askLogs *rate.Limiter // of the log lines of the upstream's requests to the client (asks.go)
}

func (g *Gateway) newLink(f *front, ss *mcp.ServerSession) *link {
	ctx, cancel := context.WithCancel(context.Background())
	l := &link{g: g, f: f, front: ss, ctx: ctx, cancel: cancel, done: make(chan struct{}), first: make(chan struct{}), err: errNotConnected,
		settled: make(chan struct{}), wake: make(chan struct{}, 1),
		limiter: rate.NewLimiter(rate.Every(g.cfg.relistInterval), 1),
		calls:   newSlots(g.cfg.maxCallsPerSession),
		pending: newSlots(g.cfg.maxPendingUpstream),
		askLogs: rate.NewLimiter(rate.Every(time.Second), askLogBurst),
	}
	l.client = mcp.NewClient(g.cfg.impl, l.clientOptions())
	l.client.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		l.sendUp = next
		return next
	})
	// The SDK's client answers roots/list with these, unless they are
	// the client's (receiveAsks).
	l.client.AddRoots(g.operatorRoots().Roots...)
	l.client.AddReceivingMiddleware(l.receiveAsks)
	return l
}

// clientOptions offer the upstream the operator's roots (WithRoots), and
// what the client session offers the gateway that the operator allows
// (elicitation, sampling, the client's roots), each forwarded to that
// client; and forward the upstream's notifications to it.
func (l *link) clientOptions() *mcp.ClientOptions {
	opts := &mcp.ClientOptions{
		Logger:                 l.g.cfg.logger,
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { l.toolsChanged() },
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			toFront(ctx, l, "notifications/progress", req.Params)
		},
	}
	if len(l.g.cfg.roots) > 0 {
		// Fixed for as long as the gateway runs: no list_changed.
		opts.Capabilities.RootsV2 = &mcp.RootCapabilities{}
	}
	if l.front == nil || l.g.cfg.toolsOnly {
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
			return askClient(ctx, l, func(ctx context.Context) (*mcp.ElicitResult, error) { return l.front.Elicit(ctx, req.Params) })
		}
		opts.ElicitationCompleteHandler = func(ctx context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			l.front.NotifyElicitationComplete(ctx, req.Params)
		}
	}
	if l.forwards(methodCreateMessage) {
		opts.CreateMessageHandler = func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return askClient(ctx, l, func(ctx context.Context) (*mcp.CreateMessageResult, error) {
				return l.front.CreateMessage(ctx, req.Params)
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
	if l.front == nil || l.f == nil || l.f.send == nil {
		return
	}
	if _, err := l.f.send(ctx, method, &mcp.ServerRequest[P]{Session: l.front, Params: p}); err != nil {
		l.g.cfg.logger.Debug("forwarding a notification to the client failed", "method", method, "error", err)
	}
}

// notifyToolsChanged tells the client session that its tool list changed.
func (l *link) notifyToolsChanged() {
	ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
	defer cancel()
	toFront(ctx, l, "notifications/tools/list_changed", &mcp.ToolListChangedParams{})
}

// notifyRootsChanged tells the upstream that the client's roots changed.
func (l *link) notifyRootsChanged(ctx context.Context) {
	cs := l.current()
	l.mu.Lock()
	send := l.sendUp
	l.mu.Unlock()
	if cs == nil || send == nil {
		return
	}
	// Bounded as a call is: an upstream that does not take it does not
	// hold the client's notification (and what the session handles after
	// it) for longer.
	ctx, cancel := context.WithTimeout(ctx, l.g.cfg.callTimeout)
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
	g := l.g
	limit := g.cfg.maxMessageBytes
	if g.up.URL != "" {
		hc := g.up.HTTPClient
		if hc == nil {
			hc = http.DefaultClient
		}
		next := hc.Transport
		if next == nil {
			next = http.DefaultTransport
		}
		bounded := *hc
		bounded.Transport = boundedTransport{next: next, limit: limit, cut: &l.tooLarge}
		return &mcp.StreamableClientTransport{Endpoint: g.up.URL, HTTPClient: &bounded, MaxEventSize: int(limit) + 1}
	}
	cmd := exec.Command(g.up.Command, g.up.Args...)
	cmd.Env = childEnv(g.up)
	cmd.Dir = g.up.Dir
	cmd.Stderr = g.up.Stderr
	// A child may leave a helper running (a daemon, a browser) that keeps
	// its standard error open: Wait, which copies that stream to Stderr,
	// would wait for the helper to exit, and with it the child's stop, New
	// and Close. Once the child has exited, its stream gets this long.
	cmd.WaitDelay = childWaitDelay
	ownGroup(cmd)
	return &commandTransport{cmd: cmd, limit: limit, cut: &l.tooLarge}
}

func (l *link) start() {
	go l.run()
	go l.relists()
}

// stopUnstarted leaves a link that will never connect (the gateway is
// closed) in its final state.
func (l *link) stopUnstarted() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.markFirst()
	close(l.done)
}

func (l *link) markFirst() { l.firstMu.Do(func() { close(l.first) }) }

// run keeps the session connected until the link is closed.
func (l *link) run() {
	defer close(l.done)
	defer l.markFirst()
	delay := l.g.cfg.backoffMin
	for attempt := 0; ; attempt++ {
		started := time.Now()
		var cs *mcp.ClientSession
		var err error
		if l.g.starts.allow() {
			cs, err = l.connect()
			l.g.starts.done(err == nil)
		} else {
			err = errCircuitOpen
		}
		if err == nil && l.up(cs) {
			l.markFirst()
			if attempt > 0 {
				l.g.restartCount.Add(context.Background(), 1)
				l.g.cfg.logger.Info("upstream session connected again", "attempt", attempt)
				// A new session (for a command, a new child) may offer other
				// tools than the one that died.
				go l.notifyToolsChanged()
			}
			err = cs.Wait()
			cs.Close() // reaps the child of a command upstream
			l.down(cs, err)
			if time.Since(started) >= l.g.cfg.backoffMax {
				delay = l.g.cfg.backoffMin // it ran a good while: not a failure in a row
			} else if l.ctx.Err() == nil {
				// It died soon after it started: a failure for the gateway's
				// back-off too, so that N sessions do not restart N children
				// in a storm.
				l.g.starts.done(false)
			}
		} else if err != nil {
			l.down(nil, err)
			l.markFirst()
		}
		if l.ctx.Err() != nil {
			return
		}
		l.g.cfg.logger.Warn("upstream session ended; connecting again", "error", err, "in", delay)
		t := time.NewTimer(delay)
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, l.g.cfg.backoffMax)
	}
}

// connect starts a session and lists its tools.
func (l *link) connect() (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(l.ctx, l.g.cfg.connectTimeout)
	defer cancel()
	l.tooLarge.Store(false)
	// A session, as the front's, for an HTTP upstream and a command alike:
	// the stateless protocol would make each call carry the client's
	// description, have no session to map, and keep the upstream from
	// asking the person anything while it serves a call.
	opts := &mcp.ClientSessionOptions{ProtocolVersion: upstreamProtocolVersion}
	t := l.transport()
	cs, err := l.client.Connect(ctx, t, opts)
	var rpcErr *jsonrpc.Error
	if err != nil && errors.As(err, &rpcErr) && ctx.Err() == nil {
		// An upstream that refuses the version with sessions (one that
		// speaks only the stateless protocol): the SDK's own choice.
		t = l.transport()
		cs, err = l.client.Connect(ctx, t, nil)
	}
	if err != nil {
		return nil, exitedFirst(t, err)
	}
	if err := l.listTools(ctx, cs); err != nil {
		cs.Close()
		return nil, err
	}
	return cs, nil
}

// up makes cs the current session, unless the link was closed meanwhile.
func (l *link) up(cs *mcp.ClientSession) bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		cs.Close()
		return false
	}
	l.cs, l.err = cs, nil
	l.mu.Unlock()
	return true
}

func (l *link) down(cs *mcp.ClientSession, err error) {
	if err == nil {
		err = errors.New("the upstream closed the session")
	}
	l.mu.Lock()
	if l.cs == cs {
		l.cs = nil
	}
	l.err = err
	l.mu.Unlock()
}

// listTools lists the session's tools, at most WithMaxUpstreamTools of
// them, checks the pins, and keeps the list. A tool listed twice is
// disabled as changed: which of its definitions the upstream runs is not
// known.
func (l *link) listTools(ctx context.Context, cs *mcp.ClientSession) error {
	l.refresh.Lock()
	defer l.refresh.Unlock()
	l.mu.Lock()
	gen := l.gen
	l.mu.Unlock()
	err := l.list(ctx, cs)
	if err == nil {
		// At start (the gateway's own session), and at every list after
		// the first of a session: a re-list.
		l.g.reportMissing("tool", l.g.order, func(name string) bool { _, ok := l.offered()[name]; return ok }, l.front == nil || l.lists > 0)
		if l.front == nil || (l.g.probeless && l.lists == 0) {
			// At start: the gateway's own session, or a local client's
			// first (New starts no child of its own then).
			l.reportMissingEntries(ctx, cs, l.front == nil)
		}
		l.lists++
	}
	l.mu.Lock()
	if err == nil {
		l.relistErr = nil
		l.stale = l.gen != gen // a change came in while listing
	} else {
		l.relistErr = err
	}
	close(l.settled)
	l.settled = make(chan struct{})
	l.mu.Unlock()
	return err
}

func (l *link) list(ctx context.Context, cs *mcp.ClientSession) error {
	tools := map[string]*mcp.Tool{}
	var twice []string
	params := &mcp.ListToolsParams{}
	for pages := 1; ; pages++ {
		if pages > l.g.cfg.maxToolPages {
			return fmt.Errorf("%w: more than %d pages", errTooManyTools, l.g.cfg.maxToolPages)
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
			if len(tools) > l.g.cfg.maxTools {
				return fmt.Errorf("%w: more than %d tools", errTooManyTools, l.g.cfg.maxTools)
			}
		}
		if res.NextCursor == "" {
			break
		}
		params.Cursor = res.NextCursor
	}
	for _, name := range twice {
		if a := l.g.m.Tool(name); a != nil {
			l.g.disable(name, a, "(listed more than once)")
		}
	}
	l.g.checkPins(tools)
	l.mu.Lock()
	l.tools = tools
	l.mu.Unlock()
	return nil
}

// toolsChanged marks the session's tools stale when the upstream says they
// changed, and asks relists for a new list: calls wait for it.
func (l *link) toolsChanged() {
	l.mu.Lock()
	l.stale = true
	l.gen++
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // a list is due already: notifications coalesce
	}
}

// relists lists the tools again after notifications, at most once per
// WithRelistInterval, and again with a back-off after a list that failed;
// it tells the client each time.
func (l *link) relists() {
	delay := l.g.cfg.backoffMin
	var retry <-chan time.Time
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.wake:
		case <-retry:
		}
		retry = nil
		if l.limiter.Wait(l.ctx) != nil {
			return
		}
		cs := l.current()
		if cs == nil {
			continue // the next session lists its tools when it connects
		}
		ctx, cancel := context.WithTimeout(l.ctx, l.g.cfg.connectTimeout)
		err := l.listTools(ctx, cs)
		cancel()
		if err != nil {
			if l.ctx.Err() != nil {
				return
			}
			l.g.cfg.logger.Warn("listing the upstream's tools again failed; its tools are refused until a list succeeds", "error", err, "retry_in", delay)
			retry = time.After(delay)
			delay = min(2*delay, l.g.cfg.backoffMax)
			continue
		}
		delay = l.g.cfg.backoffMin
		l.notifyToolsChanged()
	}
}

// awaitFresh waits, at most timeout, until the session's tools are not
// stale; it fails when the last list failed.
func (l *link) awaitFresh(ctx context.Context, timeout time.Duration) error {
	l.mu.Lock()
	stale, err := l.stale, l.relistErr
	l.mu.Unlock()
	if err != nil || !stale {
		return err // the common case: no timer to set
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		l.mu.Lock()
		stale, err, settled := l.stale, l.relistErr, l.settled
		l.mu.Unlock()
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
	case <-l.first:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cs == nil {
		return nil, l.err
	}
	return l.cs, nil
}

// ready reports whether a call on the link waits for nothing before its
// chain: the first connection is done, the session is up, and its tools
// are not being listed again.
// It waits for the first connection at most wait.
func (l *link) ready(ctx context.Context, wait time.Duration) bool {
	select {
	case <-l.first:
	default:
		if wait <= 0 {
			return false
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-l.first:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cs != nil && !l.stale && l.relistErr == nil
}

// current is the session, nil while down.
func (l *link) current() *mcp.ClientSession {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cs
}

// offered is the tools the session listed last, by name.
func (l *link) offered() map[string]*mcp.Tool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tools
}

// lastError is why the link is down, or fallback.
func (l *link) lastError(fallback error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil && l.err != errNotConnected {
		return l.err
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
	l.mu.Lock()
	l.closed = true
	cs := l.cs
	l.cs = nil
	l.mu.Unlock()
	l.cancel()
	if cs != nil {
		cs.Close()
	}
	<-l.done
}
