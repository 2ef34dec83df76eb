package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// TestReady: the gateway is ready while the upstream starts sessions, not
// while it refuses them (here it answers 503 to everything, while its host
// still takes TCP connections), with the upstream's answer in the reason;
// ready again once the upstream is back, with no client session to start
// one; and not ready once closed.
func TestReady(t *testing.T) {
	upURL, down := downableUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	ctx := context.Background()
	if err := g.Ready(ctx); err != nil {
		t.Fatalf("a new gateway: %v", err)
	}
	// until polls Ready until ok says its outcome is the one wanted (it
	// keeps an outcome for a while).
	until := func(ok func(error) bool) error {
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if err := g.Ready(ctx); ok(err) || time.Now().After(end) {
				return err
			}
		}
	}

	down.Store(true)
	if err := until(func(err error) bool { return err != nil }); err == nil || !strings.Contains(err.Error(), "Service Unavailable") {
		t.Fatalf("with an upstream that answers 503: Ready() = %v, want the upstream's answer", err)
	}
	down.Store(false)
	if err := until(func(err error) bool { return err == nil }); err != nil {
		t.Fatalf("the upstream is back: Ready() = %v", err)
	}

	g.Close()
	if err := g.Ready(ctx); err == nil {
		t.Error("a closed gateway is ready")
	}
}

// downableUpstream serves a notes upstream that answers every request with
// 503 while down is set (its host still takes TCP connections).
func downableUpstream(t *testing.T) (url string, down *atomic.Bool) {
	t.Helper()
	_, sdk := notesHandler()
	down = new(atomic.Bool)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, down
}
