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
	for _, b := range g.set().list {
		b.ready.mu.Lock()
		b.ready.at = time.Now().Add(-readyFor)
		b.ready.mu.Unlock()
	}
}

// Sessions returns the number of client sessions linked to the upstream.
func Sessions(g *Gateway) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.links)
}

// ReadyChecking reports whether a readiness check runs.
func ReadyChecking(g *Gateway) bool {
	for _, b := range g.set().list {
		b.ready.mu.Lock()
		busy := b.ready.busy
		b.ready.mu.Unlock()
		if busy {
			return true
		}
	}
	return false
}

// WithChildGrace sets the wait between the steps of a child's stop (its
// standard input closed, SIGTERM, SIGKILL), childproc.Grace otherwise: for
// the tests of a stubborn child's end, not of how long it takes.
func WithChildGrace(d time.Duration) Option { return func(c *config) { c.childGrace = d } }
