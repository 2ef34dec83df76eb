package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// readyWithin polls Ready until it reports want (ready: nil) or d passes,
// and returns its last answer.
func readyWithin(g *gateway.Gateway, d time.Duration, ready bool) error {
	var err error
	eventually(d, func() bool {
		err = g.Ready(context.Background())
		return (err == nil) == ready
	})
	return err
}

// TestReadyAfterClientHangsUpDuringConnect: a client that hangs up while its
// upstream session connects leaves the gateway ready.
//
// The fault: a client that closed its session while the gateway was still
// connecting that session's upstream session made the gateway unready, and
// it stayed unready although the upstream never failed (Ready read the
// gateway-wide breaker of session starts, before it started a session of its
// own): link.run counts the cancelled connect (context canceled) as a failed
// start, and once the session is gone nothing tries a start again (the
// control session of an HTTP upstream is up and never reconnects), so the
// breaker's failures never go back to 0. Any caller who may open a session
// can take the gateway out of its load balancer (readiness probe) with one
// initialize and one DELETE; behind a probe no new session arrives to reset
// it.
func TestReadyAfterClientHangsUpDuringConnect(t *testing.T) {
	t.Parallel()
	_, sdk := notesHandler()
	var slow atomic.Bool
	// connecting and hungUp receive the slow initialize's arrival and its
	// cancellation.
	connecting, hungUp := make(chan struct{}, 10), make(chan struct{}, 10)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && slow.Load() {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if methodOf(body) == "initialize" {
				connecting <- struct{}{}
				select { // a slow (not failing) upstream
				case <-time.After(1500 * time.Millisecond):
				case <-r.Context().Done():
					hungUp <- struct{}{}
					return
				}
			}
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	g := newGateway(t, gateway.Upstream{URL: hs.URL}, "", gateway.WithRestartBackoff(20*time.Millisecond, 100*time.Millisecond))
	url := serve(t, g)
	if err := g.Ready(context.Background()); err != nil {
		t.Fatalf("a new gateway: %v", err)
	}

	slow.Store(true)
	// A raw initialize (the SDK's client would wait: its
	// notifications/initialized waits for the upstream session), then the
	// session's DELETE while its upstream session is connecting.
	send := func(method, session, body string) *http.Response {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer alice-token")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := send(http.MethodPost, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: HTTP %d", resp.StatusCode)
	}
	<-connecting // its upstream session is connecting
	if resp := send(http.MethodDelete, session, ""); resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE: HTTP %d", resp.StatusCode)
	}
	select { // the connect is cancelled (or the slow initialize ends)
	case <-hungUp:
	case <-time.After(1500 * time.Millisecond):
	}
	t.Logf("after the hang-up: Ready() = %v", g.Ready(context.Background()))
	slow.Store(false)

	// The upstream is up and fast; another client's session connects fine.
	if err := readyWithin(g, 3*time.Second, true); err != nil {
		t.Errorf("the upstream never failed and is up, yet Ready() = %v (3 s after the client hung up)", err)
	}
	if err := g.Ready(context.Background()); err != nil {
		other := connect(t, url, "bob-token", nil)
		if res := callWithin(t, other, "read_note", map[string]any{"name": "hello"}); res.IsError {
			t.Errorf("a call: %s", text(res))
		} else {
			t.Logf("meanwhile a call of another session succeeds; Ready() = %v", readyWithin(g, 2*time.Second, true))
		}
	}
}

// TestReadyRecoversWithUpstream: Ready reports ready again once a failed
// upstream is back, with no client session to start one.
//
// The fault: an upstream that fails while a session connects makes the
// gateway unready (as TestReady wants); when that session ended before the
// upstream came back, the gateway stayed unready for good (with the
// breaker-based Ready): nothing starts an upstream session any more, so no
// start succeeds to reset the breaker. Behind a readiness probe no client
// arrives to start one: the gateway is unready forever after the upstream
// recovered.
func TestReadyRecoversWithUpstream(t *testing.T) {
	t.Parallel()
	upURL, down := downableUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithRestartBackoff(20*time.Millisecond, 100*time.Millisecond))
	url := serve(t, g)

	down.Store(true)
	cs := connect(t, url, "alice-token", nil)
	if err := readyWithin(g, 10*time.Second, false); err == nil {
		t.Fatal("the upstream is down and a session cannot connect, yet Ready() = nil: the test shows nothing")
	}
	cs.Close()
	if !eventually(10*time.Second, func() bool { return gateway.Sessions(g) == 0 }) {
		t.Fatal("the closed session is still linked")
	}
	down.Store(false)
	if err := readyWithin(g, 3*time.Second, true); err != nil {
		t.Errorf("the upstream is back (the healthz says %q), yet Ready() = %v", health(t, url), err)
	}
}

// health is the gateway's GET /healthz body.
func health(t *testing.T, mcpURL string) string {
	resp, err := http.Get(strings.TrimSuffix(mcpURL, "/mcp") + "/healthz")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(raw))
}

// TestReadyReportsUpstreamRefusingCalls: Ready reports not ready while the
// upstream refuses every request of its connected sessions.
//
// The fault: an upstream that refuses every request (HTTP 503) once the
// sessions are connected: every call is refused as AXGATE_STORE_UNAVAILABLE,
// reason upstream_unavailable, and Ready() (and /healthz) still reported
// ready (with the breaker-based Ready), since no session is started or
// connected again (only a 404 makes the direct path drop its session).
func TestReadyReportsUpstreamRefusingCalls(t *testing.T) {
	t.Parallel()
	upURL, down := downableUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithRestartBackoff(20*time.Millisecond, 100*time.Millisecond))
	url := serve(t, g)
	cs := connect(t, url, "alice-token", nil)
	if res := callWithin(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("a call: %s", text(res))
	}
	down.Store(true)
	for range 3 {
		wantRefusal(t, callWithin(t, cs, "read_note", map[string]any{"name": "hello"}), "AXGATE_STORE_UNAVAILABLE", "upstream_unavailable")
	}
	if err := readyWithin(g, 2*time.Second, false); err == nil {
		t.Errorf("every call is refused as upstream_unavailable, yet Ready() = nil (healthz: %s)", health(t, url))
	}
}

// controlled is a notes upstream over HTTP whose behaviour the test
// changes: mode picks what it does to a request (see its uses).
func controlled(t *testing.T, mode *atomic.Value) string {
	t.Helper()
	_, sdk := notesHandler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, _ := mode.Load().(string)
		var body []byte
		if r.Method == http.MethodPost {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		switch {
		case m == "nolist" && methodOf(body) == "tools/list":
			w.Header().Set("Content-Type", "application/json")
			var req struct {
				ID json.RawMessage `json:"id"`
			}
			json.Unmarshal(body, &req)
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"error":{"code":-32603,"message":"tools are down"}}`)
			return
		case m == "slowinit" && methodOf(body) == "initialize":
			select {
			case <-time.After(400 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		case m == "hangdelete" && r.Method == http.MethodDelete:
			<-r.Context().Done()
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestReadyListsUpstreamTools: Ready fails when the upstream initializes but
// cannot list its tools, as a client session's start does.
//
// The fault: Ready's probe initializes a session and closes it, where a
// session's link also lists the upstream's tools (link.connect: a failed
// list fails the start). An upstream that initializes but whose tools/list
// fails has every new client session refused as AXGATE_STORE_UNAVAILABLE
// (upstream_unavailable), while Ready (and /readyz) report ready: the load
// balancer keeps sending clients to a gateway that serves none.
func TestReadyListsUpstreamTools(t *testing.T) {
	t.Parallel()
	var mode atomic.Value
	url := controlled(t, &mode)
	g := newGateway(t, gateway.Upstream{URL: url}, "", gateway.WithRestartBackoff(20*time.Millisecond, 100*time.Millisecond))
	front := serve(t, g)
	mode.Store("nolist")
	cs := connect(t, front, "alice-token", nil)
	res := callWithin(t, cs, "read_note", map[string]any{"name": "hello"})
	wantRefusal(t, res, "AXGATE_STORE_UNAVAILABLE", "upstream_unavailable")
	gateway.ExpireReady(g) // past Ready's cache
	if err := g.Ready(context.Background()); err == nil {
		t.Errorf("every new session's upstream start fails (tools/list refused), yet Ready() = nil")
	}
}

// TestReadyOutcomeIgnoresCallerContext: a caller of Ready that gives up does
// not decide the outcome the next callers get.
//
// The fault: the probe runs under the caller's ctx, and its outcome is kept
// for 2 s for every caller. A caller whose ctx ends first (a /readyz client
// that hangs up: the admin handler passes r.Context(); a probe with a short
// timeout against an upstream that takes a little longer to initialize than
// that) caches "context canceled" / "deadline exceeded", and the next
// caller, with all the time it wants and an upstream that starts sessions
// fine, is told the gateway is not ready. Anyone who can reach /readyz keeps
// the gateway out of its load balancer with one hung-up request every 2 s.
func TestReadyOutcomeIgnoresCallerContext(t *testing.T) {
	t.Parallel()
	var mode atomic.Value
	url := controlled(t, &mode)
	g := newGateway(t, gateway.Upstream{URL: url}, "")
	mode.Store("slowinit") // 400 ms to initialize: well within WithConnectTimeout
	gateway.ExpireReady(g) // past Ready's cache
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel) // the /readyz client hangs up
	t.Logf("the hung-up caller: %v", g.Ready(ctx))
	// A session starts fine meanwhile.
	cs := connect(t, serve(t, g), "alice-token", nil)
	if res := callWithin(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("a call: %s", text(res))
	}
	if err := g.Ready(context.Background()); err != nil {
		t.Errorf("the upstream starts sessions, yet a patient caller is told Ready() = %v (another caller's context)", err)
	}
}

// TestReadyNotHeldBySlowDelete: Ready answers while its probe's DELETE
// hangs: neither a patient caller nor one whose ctx ends after 200 ms waits
// for the DELETE to end.
//
// The fault: the probe closes its session with the SDK's Close, which sends
// a DELETE bounded by the SDK's own 5 s, not by ctx nor WithConnectTimeout;
// Ready holds readyMu meanwhile, so every other caller waits too, whatever
// its own ctx says.
//
// The upstream answers the DELETE only once its client gives up on it, so
// the test needs no clock: a Ready that waits for the DELETE returns after
// the gateway's HTTP client saw it end, one that does not returns before.
func TestReadyNotHeldBySlowDelete(t *testing.T) {
	t.Parallel()
	var mode atomic.Value
	url := controlled(t, &mode)
	var deletesEnded atomic.Int32
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if r.Method == http.MethodDelete {
			deletesEnded.Add(1)
		}
		return resp, err
	})}
	// WithConnectTimeout only bounds how long Ready may wait for a probe
	// that the machine's load slows down: the test does not time it.
	g := newGateway(t, gateway.Upstream{URL: url, HTTPClient: hc}, "", gateway.WithConnectTimeout(10*time.Second))
	mode.Store("hangdelete")
	before := deletesEnded.Load() // New's own session is open, none of its DELETEs yet
	gateway.ExpireReady(g)        // past Ready's cache
	readyNotHeld(t, g, func() bool { return deletesEnded.Load() > before })
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// readyNotHeld calls Ready as two callers at once: a patient one, and once
// its check runs, one whose ctx ends after 200 ms. ended reports whether
// the probe's slow close has ended; neither caller may wait for it.
func readyNotHeld(t *testing.T, g *gateway.Gateway, ended func() bool) {
	t.Helper()
	done := make(chan bool, 1)
	go func() {
		g.Ready(context.Background())
		done <- ended()
	}()
	if !eventually(30*time.Second, func() bool { return gateway.ReadyChecking(g) }) {
		t.Fatal("the first caller started no readiness check")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := g.Ready(ctx)
	if ended() {
		t.Errorf("a caller with a 200 ms ctx returned (Ready = %v) only once the probe's session was closed", err)
	}
	if <-done {
		t.Errorf("Ready returned only once the probe's session was closed")
	}
}

// readyBounded calls Ready as two callers at once: a patient one, and once
// its check runs, one whose ctx ends after 200 ms. Neither may wait longer
// than limit.
func readyBounded(t *testing.T, g *gateway.Gateway, limit time.Duration) {
	t.Helper()
	done := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		g.Ready(context.Background())
		done <- time.Since(start)
	}()
	// The second caller comes once the first one's check runs.
	if !eventually(10*time.Second, func() bool { return gateway.ReadyChecking(g) }) {
		t.Fatal("the first caller started no readiness check")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := g.Ready(ctx)
	if d := time.Since(start); d > limit {
		t.Errorf("a caller with a 200 ms ctx waited %s for Ready (= %v), want at most %s", d.Round(time.Millisecond), err, limit)
	}
	if d := <-done; d > limit {
		t.Errorf("Ready took %s, want at most %s", d.Round(time.Millisecond), limit)
	}
}

// TestReadyNotHeldByStubbornChild: Ready answers within its bound while its
// probe's child neither answers nor exits.
//
// The fault: the probe of a command upstream closes its session with the
// child's stop: stdin closed, 5 s, SIGTERM, 5 s, SIGKILL; not bounded by ctx
// nor WithConnectTimeout. A child that never answers initialize (or writes
// garbage) and does not exit on EOF and SIGTERM held Ready — and, through
// its mutex, every other caller of Ready, whatever its ctx — for
// WithConnectTimeout + 10 s.
func TestReadyNotHeldByStubbornChild(t *testing.T) {
	t.Parallel()
	for name, behaviour := range map[string]string{
		"silent":  `trap "" TERM; exec sleep 60`,
		"garbage": `trap "" TERM; while :; do echo 'garbage {'; done`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			up, ok, pids := badChild(t, behaviour)
			// Long enough for New to start the serving child under -race
			// on a busy machine; the fault took 10 s more than it.
			g := newGateway(t, up, "", gateway.WithConnectTimeout(2*time.Second))
			os.Remove(ok)
			gateway.ExpireReady(g)            // past Ready's cache
			readyBounded(t, g, 4*time.Second) // WithConnectTimeout is 2 s
			// The probe's child is stopped after Ready answered, as the SDK
			// stops one (stdin closed, SIGTERM, SIGKILL: ~10 s for this
			// one), and Close waits for that.
			g.Close()
			for _, pid := range childPIDs(pids) {
				if alive(pid) {
					t.Errorf("the probe's child %d runs after Close returned", pid)
				}
			}
		})
	}
}

// TestCloseStopsReadyProbeChild: Close stops the child of a readiness probe
// in flight before it returns.
//
// The fault: Close stops the links' children, not the probe's: a Ready in
// flight keeps its child running after Close has returned, for the rest of
// WithConnectTimeout and the child's stop (in axgate mcp, a /readyz during
// shutdown: the process exits after Close and the child, which does not exit
// on EOF, is orphaned).
func TestCloseStopsReadyProbeChild(t *testing.T) {
	t.Parallel()
	up, ok, pids := badChild(t, `exec sleep 60`)
	g := newGateway(t, up, "", gateway.WithConnectTimeout(3*time.Second), gateway.WithChildGrace(time.Second))
	os.Remove(ok)
	gateway.ExpireReady(g) // past Ready's cache
	ready := make(chan error, 1)
	go func() { ready <- g.Ready(context.Background()) }()
	var pid int
	eventually(5*time.Second, func() bool {
		if p := childPIDs(pids); len(p) > 0 {
			pid = p[0]
		}
		return pid != 0
	})
	if pid == 0 {
		t.Fatal("the probe started no child")
	}
	g.Close()
	if alive(pid) {
		t.Errorf("the probe's child %d still runs after Close returned", pid)
	}
	t.Logf("Ready: %v", <-ready)
	eventually(10*time.Second, func() bool { return !alive(pid) })
}

// pollReady polls Ready until it reports an error, and returns how long
// after since that took (or the whole budget).
func pollReady(g *gateway.Gateway, since time.Time, budget time.Duration) (time.Duration, error) {
	var err error
	eventually(budget, func() bool {
		err = g.Ready(context.Background())
		return err != nil
	})
	return time.Since(since), err
}

// TestReadyNotStaleWhileCommandProbeStops: Ready stops reporting a cached
// "ready" within its cache time and the connect timeout, while the last
// probe's child still stops.
//
// The fault: Ready keeps its outcome "two seconds", and a new check
// publishes within WithConnectTimeout; but no new check starts while the
// last one still closes its probe session. A command child that served the
// probe and then does not exit on EOF nor SIGTERM takes ~10 s to stop, and
// for all that time Ready reported the cached "ready", while every new child
// of the upstream exits at once (the upstream starts no session): stale for
// ~10 s instead of at most 2 s + WithConnectTimeout.
func TestReadyNotStaleWhileCommandProbeStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ok, stubborn := filepath.Join(dir, "ok"), filepath.Join(dir, "stubborn")
	if err := os.WriteFile(ok, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `if [ -e "$OK_FILE" ]; then exec "$TEST_BIN"; fi
if [ -e "$STUBBORN_FILE" ]; then trap "" TERM; "$TEST_BIN"; exec sleep 30 </dev/null >/dev/null 2>&1; fi
exit 1`
	up := gateway.Upstream{Command: "sh", Args: []string{"-c", script}, Stderr: io.Discard,
		Env: []string{quickExit, upstreamEnv + "=stdio", "OK_FILE=" + ok, "STUBBORN_FILE=" + stubborn, "TEST_BIN=" + os.Args[0]}}
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

// TestReadyNotStaleWhileHTTPProbeCloses: likewise over HTTP, while the last
// probe's DELETE hangs.
//
// The fault: the same over HTTP. The upstream hangs right after it answered
// the probe's tools/list (every request from then on waits); the probe's
// DELETE waits for the SDK's closeDeleteTimeout (5 s), and during it Ready
// reports the cached "ready", 3 s past its cache.
func TestReadyNotStaleWhileHTTPProbeCloses(t *testing.T) {
	t.Parallel()
	_, sdk := notesHandler()
	var armed, hang atomic.Bool
	var listed atomic.Int32 // tools/list requests seen before arming
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
		if !armed.Load() && bytes.Contains(body, []byte(`"tools/list"`)) {
			listed.Add(1)
		}
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

	// New's own session has listed the tools: the next list is the probe's.
	if !eventually(10*time.Second, func() bool { return listed.Load() > 0 }) {
		t.Fatal("the gateway's own session listed no tools")
	}
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

// TestReady: the gateway is ready while the upstream starts sessions, not
// while it refuses them (here it answers 503 to everything, while its host
// still takes TCP connections), with the upstream's answer in the reason;
// ready again once the upstream is back, with no client session to start
// one; and not ready once closed.
func TestReady(t *testing.T) {
	t.Parallel()
	upURL, down := downableUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	ctx := context.Background()
	if err := g.Ready(ctx); err != nil {
		t.Fatalf("a new gateway: %v", err)
	}
	// until polls Ready until ok says its outcome is the one wanted (it
	// keeps an outcome for a while).
	until := func(ok func(error) bool) error {
		var err error
		eventually(10*time.Second, func() bool {
			err = g.Ready(ctx)
			return ok(err)
		})
		return err
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
