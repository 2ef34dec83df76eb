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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestUpstreamCancelNotificationsBounded: the notifications/cancelled sent
// upstream for ended direct calls are bounded in number.
//
// The fault: every direct call whose context ends before the answer
// (WithCallTimeout, or the client's cancellation) starts a goroutine that
// POSTs notifications/cancelled upstream and waits up to 5 s for its answer
// (cancelUpstream); none of them counts anywhere, and the call's slot is
// free once the call returned. An upstream that answers its calls late and
// holds those POSTs open has the gateway keep a goroutine and an upstream
// connection per cancelled call, beyond the 256 the drains are bounded to.
func TestUpstreamCancelNotificationsBounded(t *testing.T) {
	t.Parallel()
	_, sdk := notesHandler()
	var held, maxHeld atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			switch methodOf(body) {
			case "notifications/cancelled":
				now := held.Add(1)
				for old := maxHeld.Load(); now > old && !maxHeld.CompareAndSwap(old, now); old = maxHeld.Load() {
				}
				<-r.Context().Done()
				held.Add(-1)
				return
			case "tools/call":
				if bytes.Contains(body, []byte(`"stall"`)) {
					<-r.Context().Done()
					return
				}
			}
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	g := newGateway(t, gateway.Upstream{URL: hs.URL}, "", gateway.WithCallTimeout(100*time.Millisecond),
		gateway.WithMaxCallsPerSession(100), gateway.WithMaxCallsPerPrincipal(100))
	cs := connect(t, serve(t, g), "alice-token", nil)
	const calls = 400
	sem := make(chan struct{}, 50)
	done := make(chan struct{}, calls)
	start := time.Now()
	for range calls {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; done <- struct{}{} }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"name": "stall"}})
		}()
	}
	for range calls {
		<-done
	}
	t.Logf("%d timed-out calls in %s; notifications/cancelled held open at once: %d (max %d)", calls, time.Since(start).Round(time.Millisecond), held.Load(), maxHeld.Load())
	if n := maxHeld.Load(); n > 256 {
		t.Errorf("the gateway held %d upstream POSTs (goroutines, connections) of cancellations open at once, past the 256 of its drains", n)
	}
}

// holdReads makes the upstream hold each resources/read until release is
// closed, and report it on held.
func holdReads(t *testing.T, up *notes) (held chan struct{}, unhold func()) {
	held, release := make(chan struct{}, 100), make(chan struct{})
	var once sync.Once
	unhold = func() { once.Do(func() { close(release) }) }
	t.Cleanup(unhold) // before the upstream's server is closed
	up.setHook(func(ctx context.Context, method string, next func() (mcp.Result, error)) (mcp.Result, error) {
		if method == "resources/read" {
			held <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return next()
	})
	return held, unhold
}

// TestPassthroughRequestsBoundedPerCaller: requests that are not tool calls
// count against the caller's bound of calls in flight.
//
// The fault: requests that are not tool calls (resources/read here) also
// reach the upstream and hold a connection to it while it answers; one
// caller cannot keep more of them in flight than its bound of calls,
// whatever the upstream's pace.
func TestPassthroughRequestsBoundedPerCaller(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	held, unhold := holdReads(t, up)
	const perSession = 2
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithMaxCallsPerSession(perSession), gateway.WithMaxCallsPerPrincipal(3))
	cs := connect(t, serve(t, g), "alice-token", nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer unhold()
	inFlight, refused := 0, 0
	for range 3 * perSession {
		returned := make(chan error, 1)
		wg.Go(func() {
			_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "notes://readme"})
			returned <- err
		})
		select {
		case <-held:
			inFlight++
			if inFlight > perSession {
				t.Fatalf("one session keeps %d resources/read in flight upstream, over its bound of %d calls", inFlight, perSession)
			}
		case err := <-returned:
			if err == nil {
				t.Fatal("a read answered while the upstream holds every read")
			}
			if r := axagData(t, err); r.Details["reason"] != "too_many_calls" {
				t.Fatalf("refused with %+v, want reason too_many_calls", r)
			}
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("no read was refused")
	}
	unhold()
	wg.Wait()
	// Once they ended, reads pass again.
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "notes://readme"}); err != nil {
		t.Errorf("a read after the held ones ended: %v", err)
	}
}

// TestPassthroughRequestTimesOut: a request that is not a tool call is
// refused after WithCallTimeout when the upstream never answers.
//
// The fault: an upstream that never answers a resources/read does not hold
// the caller's request (and its slot) for ever: it is refused after
// WithCallTimeout, as a tool call is.
func TestPassthroughRequestTimesOut(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	holdReads(t, up)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithCallTimeout(300*time.Millisecond))
	cs := connect(t, serve(t, g), "alice-token", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "notes://readme"})
	if err == nil || ctx.Err() != nil {
		t.Fatalf("a read the upstream never answers: %v (the test's own deadline: %v)", err, ctx.Err())
	}
	if r := axagData(t, err); r.Details["reason"] != "upstream_timeout" {
		t.Fatalf("refused with %+v, want reason upstream_timeout", r)
	}
}

// TestMaxSessions: beyond the bounds, in total and per caller, a new
// session is refused with a clear error; open sessions go on, and a place
// is freed when one ends.
func TestMaxSessions(t *testing.T) {
	t.Parallel()
	_, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithMaxSessions(3, 2))
	url := serve(t, g)
	a1 := connect(t, url, "alice-token", nil)
	connect(t, url, "alice-token", nil)
	_, err := tryConnect(t, url, "alice-token", nil)
	if err == nil {
		t.Fatal("a third session of alice was opened")
	}
	if !strings.Contains(err.Error(), "AXAG_RATE_LIMITED") && !strings.Contains(err.Error(), "too_many_sessions") && !strings.Contains(err.Error(), "open sessions") {
		t.Errorf("the refusal does not say why: %v", err)
	}
	connect(t, url, "bob-token", nil)
	if _, err := tryConnect(t, url, "bob-token", nil); err == nil {
		t.Fatal("a fourth session was opened")
	} else if !strings.Contains(err.Error(), "client sessions") {
		t.Errorf("the refusal does not say why: %v", err)
	}
	// The open sessions are not affected.
	if res := callWithin(t, a1, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("read on an open session: %s", text(res))
	}
	// A session that ends frees its place.
	a1.Close()
	var cerr error
	if !eventually(20*time.Second, func() bool {
		var cs *mcp.ClientSession
		if cs, cerr = tryConnect(t, url, "bob-token", nil); cerr != nil {
			return false
		}
		cs.Close()
		return true
	}) {
		t.Fatalf("no place after a session ended: %v", cerr)
	}
}

// TestMaxSessionsBoundsChildren: a command upstream runs one child per
// session, so the session bound bounds the children.
func TestMaxSessionsBoundsChildren(t *testing.T) {
	t.Parallel()
	g := newGateway(t, stdioUpstream(), "", gateway.WithMaxSessions(2, 2))
	url := serve(t, g)
	a, b := connect(t, url, "alice-token", nil), connect(t, url, "bob-token", nil)
	if pidOf(t, a) == pidOf(t, b) {
		t.Error("two sessions share a child")
	}
	if _, err := tryConnect(t, url, "alice-token", nil); err == nil {
		t.Fatal("a third session (a third child) was started")
	}
}

// switchable is a bearer whose token can change between requests.
type switchable struct {
	token atomic.Value
}

func (s *switchable) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+s.token.Load().(string))
	return http.DefaultTransport.RoundTrip(r)
}

// TestSessionBoundToTenant: a session opened as carol of tenant t1 cannot
// be continued with the token of carol of t2; and each counts apart.
func TestSessionBoundToTenant(t *testing.T) {
	t.Parallel()
	_, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithMaxSessions(10, 1))
	url := serve(t, g)
	var tok switchable
	tok.token.Store("t1-carol-token")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: &tok}, MaxRetries: -1}, onSession)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res := callWithin(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("read as t1: %s", text(res))
	}
	// Carol of t2 has her own place, carol of t1 has none left.
	connect(t, url, "t2-carol-token", nil)
	if _, err := tryConnect(t, url, "t1-carol-token", nil); err == nil {
		t.Error("a second session of carol in t1 was opened")
	}
	tok.token.Store("t2-carol-token")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"name": "hello"}}); err == nil {
		t.Fatalf("t1's session was continued with t2's token: %s", text(res))
	}
}

// TestResultTooLarge: an upstream answer over the bound is refused, over
// HTTP and over stdio, and the gateway connects again.
func TestResultTooLarge(t *testing.T) {
	t.Parallel()
	_, upURL := httpUpstream(t)
	for name, up := range map[string]gateway.Upstream{"http": {URL: upURL}, "stdio": stdioUpstream()} {
		t.Run(name, func(t *testing.T) {
			g := newGateway(t, up, "", gateway.WithMaxMessageBytes(64<<10))
			cs := connect(t, serve(t, g), "alice-token", nil)
			wantRefusal(t, callWithin(t, cs, "read_note", map[string]any{"name": "huge"}), "AXGATE_TOOL_FAILED", "result_too_large")
			var res *mcp.CallToolResult
			if !eventually(20*time.Second, func() bool {
				res = callWithin(t, cs, "read_note", map[string]any{"name": "hello"})
				return !res.IsError
			}) {
				t.Fatalf("no read after the large answer: %s", text(res))
			}
		})
	}
}

// TestRequestBodyBounded: a client's request body over the bound is
// refused with 413 before the SDK reads it.
func TestRequestBodyBounded(t *testing.T) {
	t.Parallel()
	_, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithMaxMessageBytes(64<<10))
	url := serve(t, g)
	body := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":"` + strings.Repeat("x", 100<<10) + `"}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer alice-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a %d byte body: %d, want 413", len(body), resp.StatusCode)
	}
}

// TestCallTimeout: a call to an upstream that does not answer is refused
// after the call timeout.
func TestCallTimeout(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	t.Cleanup(up.unstall) // before the upstream's server is closed
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithCallTimeout(300*time.Millisecond))
	cs := connect(t, serve(t, g), "alice-token", nil)
	wantRefusal(t, callWithin(t, cs, "read_note", map[string]any{"name": "stall"}), "AXGATE_TOOL_FAILED", "upstream_timeout")
}

// TestMaxCallsPerSession: a session cannot have more calls in flight than
// its bound; another session is not affected.
func TestMaxCallsPerSession(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	t.Cleanup(up.unstall) // a failing test does not hang on the stalled calls
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithMaxCallsPerSession(2))
	url := serve(t, g)
	cs := connect(t, url, "alice-token", nil)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"name": "stall"}})
		})
	}
	for range 2 {
		<-up.stalled
	}
	wantRefusal(t, callWithin(t, cs, "read_note", map[string]any{"name": "hello"}), "AXAG_RATE_LIMITED", "too_many_calls")
	other := connect(t, url, "alice-token", nil)
	if res := callWithin(t, other, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Errorf("another session: %s", text(res))
	}
	up.unstall()
	wg.Wait()
	if res := callWithin(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Errorf("after the calls ended: %s", text(res))
	}
}

// newEnforcer is the enforcer of the notes manifest.
func newEnforcer(t *testing.T) *axgate.Enforcer {
	t.Helper()
	m, err := manifest.Parse(manifestFor(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	return enf
}

// TestToolListBounded: an upstream whose tools/list never ends, or lists
// too many tools, is refused.
func TestToolListBounded(t *testing.T) {
	// Not parallel: listing pages up to the bound is CPU work that other
	// tests would slow past the connect timeout.
	up, upURL := httpUpstream(t)
	up.setHook(func(_ context.Context, method string, next func() (mcp.Result, error)) (mcp.Result, error) {
		if method != "tools/list" {
			return next()
		}
		return &mcp.ListToolsResult{Tools: []*mcp.Tool{readNoteTool}, NextCursor: "more"}, nil
	})
	_, err := gateway.New(newEnforcer(t), gateway.Upstream{URL: upURL}, gateway.WithConnectTimeout(10*time.Second))
	if err == nil || !strings.Contains(err.Error(), "pages") {
		t.Errorf("endless pages: %v", err)
	}
	up.setHook(func(_ context.Context, method string, next func() (mcp.Result, error)) (mcp.Result, error) {
		if method != "tools/list" {
			return next()
		}
		res := &mcp.ListToolsResult{}
		for i := range 20 {
			tl := *readNoteTool
			tl.Name = "tool_" + string(rune('a'+i))
			res.Tools = append(res.Tools, &tl)
		}
		return res, nil
	})
	_, err = gateway.New(newEnforcer(t), gateway.Upstream{URL: upURL}, gateway.WithMaxUpstreamTools(0, 10), gateway.WithConnectTimeout(10*time.Second))
	if err == nil || !strings.Contains(err.Error(), "tools") {
		t.Errorf("too many tools: %v", err)
	}
}

// TestPendingUpstreamRequests: the upstream cannot have more of its
// questions to one client pending than the bound.
func TestPendingUpstreamRequests(t *testing.T) {
	t.Parallel()
	_, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithMaxPendingUpstreamRequests(1), gateway.AllowUpstreamElicitation())
	var n atomic.Int32
	asked, hold := make(chan struct{}), make(chan struct{})
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		if n.Add(1) == 1 {
			close(asked)
			<-hold
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "hello"}}, nil
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	}})
	first := make(chan *mcp.CallToolResult, 1)
	go func() { first <- callWithin(t, cs, "ask_note", map[string]any{}) }()
	<-asked
	if res := callWithin(t, cs, "ask_note", map[string]any{}); !strings.Contains(text(res), "cannot ask") {
		t.Errorf("a second pending question reached the client: %s", text(res))
	}
	close(hold)
	if res := <-first; res.IsError || text(res) != "accept hello" {
		t.Errorf("the first question: %s", text(res))
	}
}

// gateListing holds the upstream's tools/list until open is closed, and
// reports each one held on seen.
func gateListing(up *notes) (seen chan struct{}, open chan struct{}) {
	seen, open = make(chan struct{}, 100), make(chan struct{})
	up.setHook(func(_ context.Context, method string, next func() (mcp.Result, error)) (mcp.Result, error) {
		if method == "tools/list" {
			seen <- struct{}{}
			<-open
		}
		return next()
	})
	return seen, open
}

// TestChangedToolRefusedBeforeRelist: between the upstream's list_changed
// and the new list, a call of the changed tool waits, and is refused once
// the list shows the change; it never reaches the upstream.
func TestChangedToolRefusedBeforeRelist(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, pinOf(t, upURL, "write_note"))
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{ElicitationHandler: accept})
	if res := callWithin(t, cs, "write_note", map[string]any{"name": "a", "text": "b"}); res.IsError {
		t.Fatalf("write before the change: %s", text(res))
	}
	before := len(up.seenTool("write_note"))
	seen, open := gateListing(up)
	up.rugPull()
	// The gateway's own session and alice's both list again: both are held.
	<-seen
	<-seen
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- callWithin(t, cs, "write_note", map[string]any{"name": "a", "text": "c"}) }()
	var res *mcp.CallToolResult
	select {
	case res = <-done:
		// Answered before the list: it may only be a refusal.
	case <-time.After(2 * time.Second):
		close(open)
		res = <-done
		open = nil
	}
	if open != nil {
		close(open)
	}
	if !res.IsError {
		t.Fatalf("the changed tool was called before the new list: %s", text(res))
	}
	wantRefusal(t, res, "AXGATE_TOOL_CHANGED", "upstream_changed")
	if n := len(up.seenTool("write_note")); n != before {
		t.Errorf("a call of the changed tool reached the upstream")
	}
}

// TestChangedToolRefusedWhenRelistFails: when the new list fails, the
// session's tools stay refused (fail closed) until a list succeeds; then
// the change is seen.
func TestChangedToolRefusedWhenRelistFails(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, pinOf(t, upURL, "write_note"))
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{ElicitationHandler: accept})
	if res := callWithin(t, cs, "write_note", map[string]any{"name": "a", "text": "b"}); res.IsError {
		t.Fatalf("write before the change: %s", text(res))
	}
	before := len(up.seenTool("write_note"))
	failed := make(chan struct{}, 100)
	up.setHook(func(_ context.Context, method string, next func() (mcp.Result, error)) (mcp.Result, error) {
		if method == "tools/list" {
			failed <- struct{}{}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "listing is broken"}
		}
		return next()
	})
	up.rugPull()
	<-failed
	<-failed
	wantRefusal(t, callWithin(t, cs, "write_note", map[string]any{"name": "a", "text": "c"}), "AXGATE_STORE_UNAVAILABLE", "tools_unverified")
	if n := len(up.seenTool("write_note")); n != before {
		t.Fatal("a call of the changed tool reached the upstream after the list failed")
	}
	up.setHook(nil)
	if !eventually(20*time.Second, func() bool {
		res := callWithin(t, cs, "write_note", map[string]any{"name": "a", "text": "c"})
		if refusalOf(t, res).Code == "AXGATE_TOOL_CHANGED" {
			return true
		}
		wantRefusal(t, res, "AXGATE_STORE_UNAVAILABLE", "tools_unverified")
		return false
	}) {
		t.Fatal("the change was not seen once the list worked again")
	}
	if n := len(up.seenTool("write_note")); n != before {
		t.Fatal("a call of the changed tool reached the upstream")
	}
}

// TestDuplicateToolListing: a tool listed twice, the changed definition
// first, is refused as changed.
func TestDuplicateToolListing(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	pin := pinOf(t, upURL, "write_note")
	up.setHook(func(_ context.Context, method string, next func() (mcp.Result, error)) (mcp.Result, error) {
		res, err := next()
		if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
			return &mcp.ListToolsResult{Tools: append([]*mcp.Tool{writeNoteChanged}, lr.Tools...)}, nil
		}
		return res, err
	})
	g := newGateway(t, gateway.Upstream{URL: upURL}, pin)
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{ElicitationHandler: accept})
	if slices.Contains(listNames(t, cs), "write_note") {
		t.Error("a tool listed twice is listed")
	}
	wantRefusal(t, callWithin(t, cs, "write_note", map[string]any{"name": "a", "text": "b"}), "AXGATE_TOOL_CHANGED", "upstream_changed")
	if len(up.seenTool("write_note")) != 0 {
		t.Error("the upstream was called")
	}
}

// TestProgressToken: only a string of bounded length or an integer is
// forwarded as the progress token.
func TestProgressToken(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", nil)
	for _, tc := range []struct {
		token any
		want  bool
	}{{"p-1", true}, {7, true}, {strings.Repeat("p", 10000), false}, {map[string]any{"a": 1}, false}, {1.5, false}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"name": "hello"}, Meta: mcp.Meta{"progressToken": tc.token}})
		cancel()
		if err != nil || res.IsError {
			t.Fatalf("%v: %v %v", tc.token, err, res)
		}
		seen := up.seenTool("read_note")
		_, got := seen[len(seen)-1].Meta["progressToken"]
		if got != tc.want {
			raw, _ := json.Marshal(tc.token)
			if len(raw) > 40 {
				raw = raw[:40]
			}
			t.Errorf("progress token %s forwarded: %v, want %v", raw, got, tc.want)
		}
	}
}

// TestCommandEnv: a command upstream's child gets PATH, HOME and the
// Upstream's Env, not the gateway's other variables.
func TestCommandEnv(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv("AXGATE_GATEWAY_TEST_SECRET", "s3cret")
	g := newGateway(t, stdioUpstream(), "")
	cs := connect(t, serve(t, g), "alice-token", nil)
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "notes://env"})
	if err != nil {
		t.Fatal(err)
	}
	env := rr.Contents[0].Text
	if strings.Contains(env, "s3cret") {
		t.Error("the child got the gateway's secret")
	}
	if !strings.Contains(env, "PATH=") || !strings.Contains(env, upstreamEnv+"=stdio") {
		t.Errorf("the child lacks PATH or the Upstream's Env:\n%s", env)
	}
}

// TestListChangedFloodCoalesced: a flood of list_changed notifications
// causes one new list, not one per notification.
func TestListChangedFloodCoalesced(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	var lists atomic.Int32
	up.setHook(func(_ context.Context, method string, next func() (mcp.Result, error)) (mcp.Result, error) {
		if method == "tools/list" {
			lists.Add(1)
		}
		return next()
	})
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithRelistInterval(time.Hour))
	cs := connect(t, serve(t, g), "alice-token", nil)
	if res := callWithin(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("read: %s", text(res))
	}
	before := lists.Load()
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "notes://flood"}); err != nil {
		t.Fatal(err)
	}
	if !eventually(20*time.Second, func() bool { return lists.Load() != before }) {
		t.Fatal("the flood caused no new list")
	}
	// More round trips to the upstream, for any further lists to arrive.
	for range 5 {
		if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "notes://readme"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := lists.Load() - before; n > 2 {
		t.Errorf("%d notifications caused %d lists", floodSize, n)
	}
}

// TestRestartStormBounded: when the upstream's child keeps failing, new
// sessions do not each start a child: the gateway-wide back-off holds them.
func TestRestartStormBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	okFile, startsFile := filepath.Join(dir, "ok"), filepath.Join(dir, "starts")
	if err := os.WriteFile(okFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	up := stdioUpstream()
	up.Env = append(up.Env, okFileEnv+"="+okFile, startsFileEnv+"="+startsFile)
	g := newGateway(t, up, "", gateway.WithRestartBackoff(time.Hour, time.Hour))
	url := serve(t, g)
	starts := func() int {
		raw, _ := os.ReadFile(startsFile)
		return bytes.Count(raw, []byte("\n"))
	}
	os.Remove(okFile)
	before := starts()
	for i := range 5 {
		cs := connect(t, url, "alice-token", nil)
		wantRefusal(t, callWithin(t, cs, "read_note", map[string]any{"name": "hello"}), "AXGATE_STORE_UNAVAILABLE", "upstream_unavailable")
		cs.Close()
		if n := starts() - before; n > 1 {
			t.Fatalf("%d sessions started %d failing children", i+1, n)
		}
	}
}

// TestMaxCallsPerPrincipal: a caller cannot have more calls in flight over
// all its sessions than its bound; another caller is not affected.
func TestMaxCallsPerPrincipal(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	t.Cleanup(up.unstall) // a failing test does not hang on the stalled calls
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithMaxCallsPerPrincipal(2))
	url := serve(t, g)
	var wg sync.WaitGroup
	for range 2 {
		cs := connect(t, url, "alice-token", nil)
		wg.Go(func() {
			cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"name": "stall"}})
		})
	}
	for range 2 {
		<-up.stalled
	}
	third := connect(t, url, "alice-token", nil)
	wantRefusal(t, callWithin(t, third, "read_note", map[string]any{"name": "hello"}), "AXAG_RATE_LIMITED", "too_many_calls")
	bob := connect(t, url, "bob-token", nil)
	if res := callWithin(t, bob, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Errorf("another caller: %s", text(res))
	}
	up.unstall()
	wg.Wait()
	if res := callWithin(t, third, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Errorf("after the calls ended: %s", text(res))
	}
}
