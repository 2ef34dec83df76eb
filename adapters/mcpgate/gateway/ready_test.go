package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// TestReady: the gateway is ready while it can start upstream sessions; a
// session that cannot connect to its upstream makes it unready (with the
// upstream's answer in the reason) until a connection succeeds again, and a
// closed gateway is not ready.
func TestReady(t *testing.T) {
	_, sdk := notesHandler()
	var down atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	g := newGateway(t, gateway.Upstream{URL: hs.URL}, "", gateway.WithRestartBackoff(20*time.Millisecond, 100*time.Millisecond))
	url := serve(t, g)
	if err := g.Ready(); err != nil {
		t.Fatalf("a new gateway: %v", err)
	}

	down.Store(true)
	cs := connect(t, url, "alice-token", nil) // its upstream session cannot connect
	wantRefusal(t, call(t, cs, "read_note", map[string]any{"name": "hello"}), "AXGATE_STORE_UNAVAILABLE", "upstream_unavailable")
	var err error
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err = g.Ready(); err != nil || time.Now().After(end) {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "Service Unavailable") {
		t.Fatalf("with an upstream that answers 503: Ready() = %v, want the upstream's failure", err)
	}

	down.Store(false)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err = g.Ready(); err == nil || time.Now().After(end) {
			break
		}
	}
	if err != nil {
		t.Fatalf("the upstream is back: Ready() = %v", err)
	}
	if res := call(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Errorf("the upstream is back: %s", text(res))
	}

	g.Close()
	if err := g.Ready(); err == nil {
		t.Error("a closed gateway is ready")
	}
}
