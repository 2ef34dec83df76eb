package gateway

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

	// refresh serializes the tool lists of one session.
	refresh sync.Mutex

	mu     sync.Mutex
	closed bool
	cs     *mcp.ClientSession // nil while down
	err    error              // why it is down
	tools  map[string]*mcp.Tool
	sendUp mcp.MethodHandler // the client's sending method handler
}

func (g *Gateway) newLink(f *front, ss *mcp.ServerSession) *link {
	ctx, cancel := context.WithCancel(context.Background())
	l := &link{g: g, f: f, front: ss, ctx: ctx, cancel: cancel, done: make(chan struct{}), first: make(chan struct{}), err: errNotConnected}
	l.client = mcp.NewClient(g.cfg.impl, l.clientOptions())
	l.client.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		l.sendUp = next
		return next
	})
	if ss != nil && !g.cfg.toolsOnly {
		l.client.AddReceivingMiddleware(l.receiveRoots)
	}
	return l
}

// clientOptions offer the upstream what the client session offers the
// gateway (elicitation, sampling, roots), each forwarded to that client, and
// forward the upstream's notifications to it.
func (l *link) clientOptions() *mcp.ClientOptions {
	opts := &mcp.ClientOptions{
		Logger:                 l.g.cfg.logger,
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) { go l.toolsChanged(req.Session) },
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			toFront(ctx, l, "notifications/progress", req.Params)
		},
	}
	if l.front == nil || l.g.cfg.toolsOnly {
		return opts
	}
	opts.PromptListChangedHandler = func(ctx context.Context, req *mcp.PromptListChangedRequest) {
		toFront(ctx, l, "notifications/prompts/list_changed", req.Params)
	}
	opts.ResourceListChangedHandler = func(ctx context.Context, req *mcp.ResourceListChangedRequest) {
		toFront(ctx, l, "notifications/resources/list_changed", req.Params)
	}
	opts.ResourceUpdatedHandler = func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		toFront(ctx, l, "notifications/resources/updated", req.Params)
	}
	opts.LoggingMessageHandler = func(ctx context.Context, req *mcp.LoggingMessageRequest) {
		toFront(ctx, l, "notifications/message", req.Params)
	}
	opts.ElicitationCompleteHandler = func(ctx context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
		l.front.NotifyElicitationComplete(ctx, req.Params)
	}
	var caps *mcp.ClientCapabilities
	if ip := l.front.InitializeParams(); ip != nil {
		caps = ip.Capabilities
	}
	if caps == nil {
		return opts
	}
	if caps.Elicitation != nil {
		e := *caps.Elicitation
		opts.Capabilities.Elicitation = &e
		opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return l.front.Elicit(ctx, req.Params)
		}
	}
	if caps.Sampling != nil {
		opts.CreateMessageHandler = func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return l.front.CreateMessage(ctx, req.Params)
		}
	}
	if caps.RootsV2 != nil {
		r := *caps.RootsV2
		opts.Capabilities.RootsV2 = &r
	}
	return opts
}

// receiveRoots answers the upstream's roots/list with the client's roots.
func (l *link) receiveRoots(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "roots/list" {
			if ip := l.front.InitializeParams(); ip != nil && ip.Capabilities != nil && ip.Capabilities.RootsV2 != nil {
				p, _ := req.GetParams().(*mcp.ListRootsParams)
				return l.front.ListRoots(ctx, p)
			}
		}
		return next(ctx, method, req)
	}
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

// transport is a new connection to the upstream: for a command, a new child.
func (g *Gateway) transport() mcp.Transport {
	if g.up.URL != "" {
		return &mcp.StreamableClientTransport{Endpoint: g.up.URL, HTTPClient: g.up.HTTPClient}
	}
	cmd := exec.Command(g.up.Command, g.up.Args...)
	cmd.Env = g.up.Env
	cmd.Dir = g.up.Dir
	cmd.Stderr = g.up.Stderr
	return &mcp.CommandTransport{Command: cmd}
}

func (l *link) start() { go l.run() }

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
		cs, err := l.connect()
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
	cs, err := l.client.Connect(ctx, l.g.transport(), nil)
	if err != nil {
		return nil, err
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

// listTools lists the session's tools, checks the pins, and keeps the list.
func (l *link) listTools(ctx context.Context, cs *mcp.ClientSession) error {
	l.refresh.Lock()
	defer l.refresh.Unlock()
	tools := map[string]*mcp.Tool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		tools[t.Name] = t
	}
	l.g.checkPins(tools)
	l.mu.Lock()
	l.tools = tools
	l.mu.Unlock()
	return nil
}

// toolsChanged lists the tools again when the upstream says they changed,
// and tells the client.
func (l *link) toolsChanged(cs *mcp.ClientSession) {
	ctx, cancel := context.WithTimeout(l.ctx, l.g.cfg.connectTimeout)
	defer cancel()
	if err := l.listTools(ctx, cs); err != nil {
		l.g.cfg.logger.Warn("listing the upstream's tools again failed", "error", err)
		return
	}
	l.notifyToolsChanged()
}

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
