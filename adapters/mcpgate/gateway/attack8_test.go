package gateway_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// pollReady polls Ready until it reports an error, and returns how long
// after since that took (or the whole budget).
func pollReady(g *gateway.Gateway, since time.Time, budget time.Duration) (time.Duration, error) {
	for end := time.Now().Add(budget); ; time.Sleep(100 * time.Millisecond) {
		err := g.Ready(context.Background())
		if err != nil || time.Now().After(end) {
			return time.Since(since), err
		}
	}
}

// TestAttack8StaleReadyCommand: Ready keeps its outcome "two seconds", and
// a new check publishes within WithConnectTimeout; but no new check starts
// while the last one still closes its probe session. A command child that
// served the probe and then does not exit on EOF nor SIGTERM takes ~10 s
// to stop, and for all that time Ready reported the cached "ready", while
// every new child of the upstream exits at once (the upstream starts no
// session): stale for ~10 s instead of at most 2 s + WithConnectTimeout.
func TestAttack8StaleReadyCommand(t *testing.T) {
	dir := t.TempDir()
	ok, stubborn := filepath.Join(dir, "ok"), filepath.Join(dir, "stubborn")
	if err := os.WriteFile(ok, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `if [ -e "$AX8_OK" ]; then exec "$AX8_BIN"; fi
if [ -e "$AX8_STUBBORN" ]; then trap "" TERM; "$AX8_BIN"; exec sleep 30 </dev/null >/dev/null 2>&1; fi
exit 1`
	up := gateway.Upstream{Command: "sh", Args: []string{"-c", script}, Stderr: io.Discard,
		Env: []string{upstreamEnv + "=stdio", "AX8_OK=" + ok, "AX8_STUBBORN=" + stubborn, "AX8_BIN=" + os.Args[0]}}
	const timeout = 2 * time.Second // New starts the serving child under -race on a busy machine
	g := newGateway(t, up, "", gateway.WithConnectTimeout(timeout))

	os.Remove(ok)
	if err := os.WriteFile(stubborn, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.Ready(context.Background()); err != nil {
		t.Fatalf("Ready with a child that serves: %v", err)
	}
	t0 := time.Now()
	os.Remove(stubborn) // from now on every child exits 1 at once

	// Within 2 s (cache) + WithConnectTimeout + slack, Ready must say so.
	bound := 2*time.Second + timeout + time.Second
	d, err := pollReady(g, t0, 15*time.Second)
	if err == nil || d > bound {
		t.Errorf("the upstream starts no session since %s ago; Ready reported ready until then (err %v); want an error within %s", d.Round(100*time.Millisecond), err, bound)
	}
}

// TestAttack8StaleReadyHTTP: the same over HTTP. The upstream hangs right
// after it answered the probe's tools/list (every request from then on
// waits); the probe's DELETE waits for the SDK's closeDeleteTimeout (5 s),
// and during it Ready reports the cached "ready", 3 s past its cache.
func TestAttack8StaleReadyHTTP(t *testing.T) {
	_, sdk := notesHandler()
	var armed, hang atomic.Bool
	stop := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if armed.Load() && bytes.Contains(body, []byte(`"tools/list"`)) {
			// This one is answered; every request after it waits. (Set
			// before the answer: after it, the probe could have its
			// outcome before the test sees the hang.)
			hang.Store(true)
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(stop) })
	const timeout = time.Second
	g := newGateway(t, gateway.Upstream{URL: hs.URL}, "", gateway.WithConnectTimeout(timeout))

	time.Sleep(200 * time.Millisecond)
	armed.Store(true)
	if err := g.Ready(context.Background()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	t0 := time.Now()
	if !hang.Load() {
		t.Fatal("the probe's tools/list was not seen")
	}
	bound := 2*time.Second + timeout + time.Second
	d, err := pollReady(g, t0, 10*time.Second)
	if err == nil || d > bound {
		t.Errorf("the upstream hangs since %s ago; Ready reported ready until then (err %v); want an error within %s", d.Round(100*time.Millisecond), err, bound)
	}
}
