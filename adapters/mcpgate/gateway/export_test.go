package gateway

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeLocal serves one local client over t, as ServeStdio does over stdio.
func ServeLocal(g *Gateway, ctx context.Context, t mcp.Transport) error { return g.serveLocal(ctx, t) }

// ExpireReady ages Ready's last outcome past readyFor, as if that time had
// passed: the next Ready starts a new check (unless the last one still
// closes its session).
func ExpireReady(g *Gateway) {
	g.ready.mu.Lock()
	defer g.ready.mu.Unlock()
	g.ready.at = time.Now().Add(-readyFor)
}

// Sessions returns the number of client sessions linked to the upstream.
func Sessions(g *Gateway) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.links)
}

// ReadyChecking reports whether a readiness check runs.
func ReadyChecking(g *Gateway) bool {
	g.ready.mu.Lock()
	defer g.ready.mu.Unlock()
	return g.ready.busy
}

// WithChildGrace sets the wait between the steps of a child's stop (its
// standard input closed, SIGTERM, SIGKILL), childproc.Grace otherwise: for
// the tests of a stubborn child's end, not of how long it takes.
func WithChildGrace(d time.Duration) Option { return func(c *config) { c.childGrace = d } }
