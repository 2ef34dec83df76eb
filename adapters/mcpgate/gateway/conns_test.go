package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestUpstreamConnectionsReused checks that calls from many sessions at
// once reuse the gateway's connections to an HTTP upstream instead of
// opening one per call: with http.DefaultClient (2 idle connections per
// host) a third of the calls opened a new TCP connection.
func TestUpstreamConnectionsReused(t *testing.T) {
	t.Parallel()
	const sessions, rounds = 16, 25
	tg := newGatewayTarget(t, 0, sessions)
	ctx := context.Background()
	concurrently := func(rounds int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, sessions)
		for _, cs := range tg.gateway {
			wg.Go(func() {
				for range rounds {
					if err := readOnce(ctx, cs); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	concurrently(2) // the sessions' connections are open
	before := connsOf(tg.upstream)
	concurrently(rounds)
	// Kept connections serve the calls; a call in flight beyond the peak
	// of the warm-up, or a dial that lost the race to a connection freed
	// meanwhile, may open one more. Without reuse: about one new
	// connection per call beyond 2 in flight, hundreds for 400 calls.
	limit := int64(2 * sessions)
	if got := connsOf(tg.upstream) - before; got > limit {
		t.Fatalf("the upstream accepted %d new connections for %d calls from %d sessions, want at most %d", got, sessions*rounds, sessions, limit)
	}
}

// TestUpstreamConnectionKeptAfterCall checks that one agent's calls, one
// after the other, reuse one connection to the upstream: the end of an
// upstream's event-stream response is read after its answer, and when the
// client's request context reached the upstream call, the end of the
// front's handler cancelled that read and closed the connection (15 to 45
// of 100 calls opened a new one).
func TestUpstreamConnectionKeptAfterCall(t *testing.T) {
	t.Parallel()
	const calls = 100
	tg := newGatewayTarget(t, time.Millisecond, 1) // a tool that takes a while loses the race more often
	ctx := context.Background()
	cs := tg.gateway[0]
	for range 2 {
		if err := readOnce(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	before := connsOf(tg.upstream)
	for range calls {
		if err := readOnce(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	// One connection serves the calls in turn; a few may still be opened
	// when the previous response's end has not been read yet.
	if got := connsOf(tg.upstream) - before; got > 5 {
		t.Fatalf("the upstream accepted %d new connections for %d calls of one agent, want at most 5", got, calls)
	}
}

// TestUpstreamCallCancelled checks that a client that cancels its call
// still cancels the upstream's: the upstream tool sees its context end, on
// a session (notifications/cancelled) and on MCP 2026-07-28 (the client
// ends its POST).
func TestUpstreamCallCancelled(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			upstreamCallCancelled(t, version)
		})
	}
}

func upstreamCallCancelled(t *testing.T, version string) {
	started, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "read"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ readArgs) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- struct{}{}
		return nil, nil, ctx.Err()
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(up.Close)
	enf, g := benchGateway(t, up.URL)
	t.Cleanup(func() { g.Close(); enf.Close() })
	front := httptest.NewServer(g.Handler())
	t.Cleanup(front.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: front.URL + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated %s, want %s", got, version)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-started
		cancel()
	}()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": "a"}}); err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream tool's context did not end when the client cancelled its call")
	}
}
