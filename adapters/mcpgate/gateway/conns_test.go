package gateway_test

import (
	"context"
	"sync"
	"testing"
)

// TestUpstreamConnectionsReused checks that calls from many sessions at
// once reuse the gateway's connections to an HTTP upstream instead of
// opening one per call: with http.DefaultClient (2 idle connections per
// host) a third of the calls opened a new TCP connection.
func TestUpstreamConnectionsReused(t *testing.T) {
	const sessions, rounds = 16, 25
	tg := newBenchTarget(t, 0, sessions)
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
