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
	// Each upstream session holds a connection for its event stream (one
	// per client session and the gateway's own), and each call in flight
	// one more; the connections of the sessions' start may be more. What
	// no reuse looks like: about one new connection per call in flight
	// beyond 2, for each of the 400 calls.
	limit := int64(3*sessions + 4)
	if got := connsOf(tg.upstream); got > limit {
		t.Fatalf("the upstream accepted %d connections for %d calls from %d sessions, want at most %d", got, sessions*rounds, sessions, limit)
	}
}
