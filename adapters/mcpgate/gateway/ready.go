package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readyFor is how long Ready keeps the outcome of its check.
const readyFor = 2 * time.Second

// readiness is Ready's check: at most one runs at a time, in the
// background, and its outcome is kept for readyFor.
type readiness struct {
	mu     sync.Mutex
	err    error         // the last outcome
	at     time.Time     // when it was known
	done   chan struct{} // closed when the last check has its outcome
	busy   bool          // a check runs (or still closes its session)
	closed bool
	cancel context.CancelFunc // of the running check
	wg     sync.WaitGroup
}

// Ready reports whether the gateway can serve calls, for a readiness probe.
//
// It returns an error when the gateway is closed, or when a new session
// with the upstream cannot be started now, with the reason: a session
// started (over HTTP, or with a child process for a command) and the
// upstream's tools listed, within WithConnectTimeout. The check runs a
// session of its own in the background; ctx bounds only the wait for it.
// Its outcome is kept for two seconds; while the last check still closes
// its session, Ready reports that. Close stops a check in flight.
//
// With several upstreams (NewMulti) each is checked so, and Ready fails
// only when none is ready, naming each one's reason. Upstreams reports
// each. docs/mcp-gateway.md (Readiness) says why.
func (g *Gateway) Ready(ctx context.Context) error {
	list := g.set().list
	if len(list) == 1 {
		return list[0].Ready(ctx)
	}
	// One upstream that serves keeps the replica in its Service: the
	// calls of a down upstream are refused, the others' answered.
	errs := g.Upstreams(ctx)
	var all []error
	for _, b := range list {
		if errs[b.name] == nil {
			return nil
		}
		all = append(all, fmt.Errorf("%s: %w", b.name, errs[b.name]))
	}
	return fmt.Errorf("gateway: no upstream is ready: %w", errors.Join(all...))
}

// Ready is the readiness of one upstream (Gateway.Ready).
func (b *backend) Ready(ctx context.Context) error {
	r := &b.ready
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return errors.New("gateway: the gateway is closed")
	}
	expired := r.done != nil && time.Since(r.at) >= readyFor
	switch {
	case r.busy && expired:
		// The last check still closes its session (a child that does
		// not exit, an upstream that does not answer the DELETE): no
		// second one starts meanwhile, so that Ready never runs two
		// upstream sessions (or children) at once, and its outcome is too
		// old to stand.
		select {
		case <-r.done:
			r.mu.Unlock()
			return errors.New("gateway: the last readiness check has not closed its upstream session yet")
		default: // its outcome is not known yet: wait for it
		}
	case !r.busy && (r.done == nil || expired):
		checkCtx, cancel := context.WithTimeout(context.Background(), b.cfg.connectTimeout)
		r.done, r.busy, r.cancel = make(chan struct{}), true, cancel
		r.wg.Add(1)
		go b.check(checkCtx, cancel, r.done)
	}
	done := r.done
	r.mu.Unlock()
	select {
	case <-done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("gateway: the readiness check did not finish in time: %w", ctx.Err())
	}
}

// check runs one readiness check. Its outcome is published once the
// probe has it, or once WithConnectTimeout has passed: the SDK closes a
// session whose initialize failed before it returns, and the stop of a
// child that does not exit takes it seconds. The session is closed after,
// and the check is not done (no other starts) until it is.
func (b *backend) check(ctx context.Context, cancel context.CancelFunc, done chan struct{}) {
	r := &b.ready
	defer r.wg.Done()
	defer cancel()
	type outcome struct {
		cs  *mcp.ClientSession
		err error
	}
	got := make(chan outcome, 1)
	go func() {
		cs, err := b.probe(ctx)
		got <- outcome{cs, err}
	}()
	var o outcome
	waited := false
	select {
	case o = <-got:
		waited = true
	case <-ctx.Done():
		o.err = fmt.Errorf("gateway: the upstream did not start a session within %s: %w", b.cfg.connectTimeout, ctx.Err())
	}
	r.mu.Lock()
	r.err, r.at = o.err, time.Now()
	close(done)
	r.mu.Unlock()
	if !waited {
		o = <-got
	}
	if o.cs != nil {
		o.cs.Close()
	}
	r.mu.Lock()
	r.busy = false
	r.mu.Unlock()
}

// probe starts a session with the upstream and lists its tools, as a
// client session's link does. It returns the session to close, also with
// an error.
func (b *backend) probe(ctx context.Context) (*mcp.ClientSession, error) {
	l := &link{g: b.g, b: b}
	client := mcp.NewClient(b.cfg.impl, nil)
	opts := &mcp.ClientSessionOptions{ProtocolVersion: upstreamProtocolVersion}
	cs, err := client.Connect(ctx, l.transport(), opts)
	var rpcErr *jsonrpc.Error
	if err != nil && errors.As(err, &rpcErr) && ctx.Err() == nil {
		cs, err = client.Connect(ctx, l.transport(), nil) // as connect falls back
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: the upstream does not start a session: %w", err)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		return cs, fmt.Errorf("gateway: the upstream does not list its tools: %w", err)
	}
	return cs, nil
}

// stop ends a check in flight and waits for it (Close).
func (r *readiness) stop() {
	r.mu.Lock()
	r.closed = true
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
	r.wg.Wait()
}
