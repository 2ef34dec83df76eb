package gateway_test

// Attacks on the gateway's bounds and checks (issue 16): each test is one
// attempt of a hostile caller or upstream, and asserts that it is held.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// TestAttackPinChangedDuringConfirmation: the upstream changes a pinned
// tool (and says so) while the person is being asked to confirm a call of
// it. The call passed the gateway's pin check before the question; it must
// not reach the changed tool after the answer.
func TestAttackPinChangedDuringConfirmation(t *testing.T) {
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, pinOf(t, upURL, "write_note"))
	url := serve(t, g)
	asked, answer := make(chan struct{}, 1), make(chan struct{})
	cs := connect(t, url, "alice-token", &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- struct{}{}
		select {
		case <-answer:
		case <-ctx.Done():
		}
		return &mcp.ElicitResult{Action: "accept"}, nil
	}})
	watcher := connect(t, url, "bob-token", nil)
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- callWithin(t, cs, "write_note", map[string]any{"name": "a", "text": "during"}) }()
	<-asked
	up.rugPull()
	// Wait until the gateway has seen the change and disabled the tool.
	for end := time.Now().Add(20 * time.Second); slices.Contains(listNames(t, watcher), "write_note"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			close(answer)
			t.Fatal("the gateway did not disable the changed tool")
		}
	}
	close(answer)
	res := <-done
	if !res.IsError {
		t.Fatalf("a call confirmed before the rug pull reached the changed tool: %s", text(res))
	}
	wantRefusal(t, res, "AXGATE_TOOL_CHANGED", "upstream_changed")
	if n := len(up.seenTool("write_note")); n != 0 {
		t.Fatalf("the changed upstream tool was called %d times", n)
	}
}

// TestAttackArgumentSmuggling: arguments the gate could read one way and
// the upstream another (duplicate keys, case-folded keys, arguments hidden
// in _meta) are refused, or reach the upstream exactly as checked.
func TestAttackArgumentSmuggling(t *testing.T) {
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", nil)
	long := strings.Repeat("x", 41) // over read_note's maxLength of 40
	for _, tc := range []struct {
		name string
		args json.RawMessage
		meta mcp.Meta
	}{
		{"duplicate key, long last", json.RawMessage(`{"name":"hello","name":"` + long + `"}`), nil},
		{"duplicate key, long first", json.RawMessage(`{"name":"` + long + `","name":"hello"}`), nil},
		{"case-folded key", json.RawMessage(`{"name":"hello","NAME":"` + long + `"}`), nil},
		{"escaped duplicate key", json.RawMessage(`{"name":"hello","n\u0061me":"` + long + `"}`), nil},
		{"arguments in _meta", json.RawMessage(`{"name":"hello"}`), mcp.Meta{"arguments": map[string]any{"name": long}, "name": long}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(up.seenTool("read_note"))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: tc.args, Meta: tc.meta})
			seen := up.seenTool("read_note")
			if err != nil || res.IsError {
				if len(seen) != before {
					t.Fatal("a refused call reached the upstream")
				}
				return
			}
			if len(seen) != before+1 {
				t.Fatalf("the upstream saw %d calls, want 1", len(seen)-before)
			}
			last := seen[len(seen)-1]
			if last.Args != `{"name":"hello"}` {
				t.Errorf("the upstream got arguments %s, not the checked ones", last.Args)
			}
			for k := range last.Meta {
				if k != "progressToken" && k != "traceparent" && k != "tracestate" {
					t.Errorf("the upstream got the client's _meta key %q", k)
				}
			}
		})
	}
}

// TestAttackCredentialsNotForwarded: the client's bearer token, its
// credentials in _meta and anything that looks like one never reach the
// upstream.
func TestAttackCredentialsNotForwarded(t *testing.T) {
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{ElicitationHandler: accept})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"name": "a", "text": "b"},
		Meta: mcp.Meta{"axag/idempotency_key": "k-1", "authorization": "Bearer alice-token", "x-api-key": "s3cret"}})
	if err != nil || res.IsError {
		t.Fatalf("write: %v %v", err, res)
	}
	seen := up.seenTool("write_note")
	if len(seen) != 1 {
		t.Fatalf("the upstream saw %d writes", len(seen))
	}
	if seen[0].Authorization != "" {
		t.Errorf("the upstream got the Authorization header %q", seen[0].Authorization)
	}
	raw, _ := json.Marshal(seen[0].Meta)
	for _, secret := range []string{"alice-token", "s3cret", "k-1"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the upstream's _meta %s carries %q", raw, secret)
		}
	}
}

// TestAttackUndeclaredTool: a tool the upstream offers and the manifest
// does not name is neither listed nor callable, under its own name, one
// that folds to it, or the intent's name; nor is a tool the caller's roles
// do not allow.
func TestAttackUndeclaredTool(t *testing.T) {
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", nil)
	names := listNames(t, cs)
	if slices.Contains(names, "secret_dump") {
		t.Error("tools/list shows secret_dump")
	}
	if slices.Contains(names, "delete_note") {
		t.Error("tools/list shows alice delete_note, which needs the admin role")
	}
	for _, name := range []string{"secret_dump", "SECRET_DUMP", "note.read", "Read_Note", "delete_note"} {
		if res := callWithin(t, cs, name, map[string]any{"name": "hello"}); !res.IsError {
			t.Errorf("%s was called: %s", name, text(res))
		}
	}
	for _, c := range up.seen() {
		t.Errorf("the upstream saw a call of %s", c.Tool)
	}
}

// TestAttackUnauthenticated: a client without a valid token gets no
// session and reaches nothing.
func TestAttackUnauthenticated(t *testing.T) {
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	if _, err := tryConnect(t, serve(t, g), "mallory-token", nil); err == nil {
		t.Fatal("a client with an unknown token got a session")
	}
	if len(up.seen()) != 0 {
		t.Fatal("the upstream saw a call")
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

// TestAttackPassthroughInFlight: requests that are not tool calls
// (resources/read here) also reach the upstream and hold a connection to it
// while it answers; one caller cannot keep more of them in flight than its
// bound of calls, whatever the upstream's pace.
func TestAttackPassthroughInFlight(t *testing.T) {
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

// TestAttackPassthroughStalls: an upstream that never answers a
// resources/read does not hold the caller's request (and its slot) for
// ever: it is refused after WithCallTimeout, as a tool call is.
func TestAttackPassthroughStalls(t *testing.T) {
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

// TestAttackForgedConfirmation: a client that answers the confirmation
// question it was never asked (an "accept" with no, or a forged, request
// state) does not reach the upstream.
func TestAttackForgedConfirmation(t *testing.T) {
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{ElicitationHandler: decline})
	for _, state := range []string{"", "forged", "eyJhbGciOiJub25lIn0.e30."} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"name": "a", "text": "forged"},
			InputResponses: mcp.InputResponseMap{mcpgate.ConfirmationInputID: &mcp.ElicitResult{Action: "accept"}}, RequestState: state})
		cancel()
		if err == nil && !res.IsError {
			t.Errorf("state %q: the write passed: %s", state, text(res))
		}
	}
	if n := len(up.seenTool("write_note")); n != 0 {
		t.Fatalf("the upstream saw %d writes", n)
	}
}

// TestAttackRequestsBeforeInitialize: requests without an initialized
// session (no Mcp-Session-Id) are refused before they can start an upstream
// session, so that they do not escape WithMaxSessions.
func TestAttackRequestsBeforeInitialize(t *testing.T) {
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.WithMaxSessions(1, 1))
	url := serve(t, g)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"notes://readme"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"hello"}}}`,
	} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer alice-token")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && !strings.Contains(string(raw), `"error"`) {
			t.Errorf("%s without a session: %d %s", body, resp.StatusCode, raw)
		}
	}
	if len(up.seen()) != 0 {
		t.Fatal("the upstream saw a call")
	}
	// The one session the bound allows is still there for alice.
	cs := connect(t, url, "alice-token", nil)
	if res := callWithin(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("alice's session: %s", text(res))
	}
}

// TestAttackPinChangedDuringChain: the upstream changes a pinned tool (and
// says so) while the chain is still deciding a call of it, after the
// gateway's checks before the chain have passed. The call must not reach
// the changed tool: the gateway looks again right before it forwards.
func TestAttackPinChangedDuringChain(t *testing.T) {
	up, upURL := httpUpstream(t)
	m, err := manifest.Parse(manifestFor(t, pinOf(t, upURL, "write_note")))
	if err != nil {
		t.Fatal(err)
	}
	// A stage at the end of the chain's checks stands for a slow gate: it
	// lets the upstream change the tool and waits until the gateway knows.
	pulled, changed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	slowGate := middleware.Stage{Name: "slow", Interceptor: func(ctx context.Context, c *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if c.Tool == "write_note" {
			once.Do(func() {
				up.rugPull()
				close(pulled)
				select {
				case <-changed:
				case <-time.After(20 * time.Second):
				}
			})
		}
		return next.Invoke(ctx, c)
	}}
	enf, err := axgate.New(m, axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		return append(std, slowGate)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	g, err := gateway.New(enf, gateway.Upstream{URL: upURL},
		gateway.WithBearer(authenticate, &oauthex.ProtectedResourceMetadata{
			Resource: "https://gw.example.com/mcp", AuthorizationServers: []string{"https://id.example.com"},
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	url := serve(t, g)
	cs := connect(t, url, "alice-token", &mcp.ClientOptions{ElicitationHandler: accept})
	watcher := connect(t, url, "bob-token", nil)
	go func() {
		defer close(changed)
		<-pulled
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			res, err := watcher.ListTools(context.Background(), nil)
			if err != nil {
				return
			}
			if !slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "write_note" }) {
				return
			}
		}
	}()
	res := callWithin(t, cs, "write_note", map[string]any{"name": "a", "text": "during"})
	if !res.IsError {
		t.Fatalf("a call decided while the tool changed reached the changed tool: %s", text(res))
	}
	wantRefusal(t, res, "AXGATE_TOOL_CHANGED", "upstream_changed")
	if n := len(up.seenTool("write_note")); n != 0 {
		t.Fatalf("the changed upstream tool was called %d times", n)
	}
}
