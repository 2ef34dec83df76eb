package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
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
)

// statelessVersion is the protocol version without sessions.
const statelessVersion = "2026-07-28"

// connectStateless is an agent of the caller with token speaking MCP
// 2026-07-28 with the go-sdk's client; it fails the test unless that is
// the version negotiated (no fallback to a session). Its multi round-trip
// middleware is off: the test answers input_required itself.
func connectStateless(t *testing.T, url, token string, caps *mcp.ClientCapabilities) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, &mcp.ClientOptions{
		Capabilities:   caps,
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}, MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: statelessVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != statelessVersion {
		t.Fatalf("negotiated %q, want %q", v, statelessVersion)
	}
	if cs.ID() != "" {
		t.Fatalf("a stateless client got session %q", cs.ID())
	}
	return cs
}

// upstreamSessions serves a notes upstream and records, for each tools/call
// of read_note, the upstream session it came on, by the note's name.
func upstreamSessions(t *testing.T) (url string, sessionsOf func(name string) []string) {
	t.Helper()
	_, sdk := notesHandler()
	var (
		mu   sync.Mutex
		seen = map[string][]string{}
	)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Name      string `json:"name"`
					Arguments struct {
						Name string `json:"name"`
					} `json:"arguments"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" && msg.Params.Name == "read_note" {
				mu.Lock()
				seen[msg.Params.Arguments.Name] = append(seen[msg.Params.Arguments.Name], r.Header.Get("Mcp-Session-Id"))
				mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, func(name string) []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen[name])
	}
}

// TestStatelessClientListsAndCalls: a go-sdk client of MCP 2026-07-28 is
// served without a session (no fallback): it is listed the tools its
// caller may call, calls one, and a tool the manifest does not declare is
// refused as on a session. Each caller's requests share one upstream
// session of their own: alice's two calls one, bob's another.
func TestStatelessClientListsAndCalls(t *testing.T) {
	t.Parallel()
	up, sessionsOf := upstreamSessions(t)
	g := newGateway(t, gateway.Upstream{URL: up}, "")
	url := serve(t, g)
	alice := connectStateless(t, url, "alice-token", nil)
	bob := connectStateless(t, url, "bob-token", nil)

	names := listNames(t, alice)
	if !slices.Contains(names, "read_note") || slices.Contains(names, "delete_note") || slices.Contains(names, "secret_dump") {
		t.Errorf("alice is listed %v", names)
	}
	if names := listNames(t, bob); !slices.Contains(names, "delete_note") {
		t.Errorf("bob (an admin) is listed %v", names)
	}
	if got := text(call(t, alice, "read_note", map[string]any{"name": "hello"})); !strings.Contains(got, "world") {
		t.Errorf("read_note: %s", got)
	}
	call(t, alice, "read_note", map[string]any{"name": "hello"})
	call(t, bob, "read_note", map[string]any{"name": "bob"})
	wantRefusal(t, call(t, alice, "secret_dump", map[string]any{}), "AXAG_INTENT_NOT_FOUND", "")
	wantRefusal(t, call(t, alice, "delete_note", map[string]any{"name": "hello"}), "AXAG_ROLE_INSUFFICIENT", "")

	a, b := sessionsOf("hello"), sessionsOf("bob")
	if len(a) != 2 || a[0] == "" || a[0] != a[1] {
		t.Errorf("alice's calls came on upstream sessions %q, want one", a)
	}
	if len(b) != 1 || b[0] == "" || b[0] == a[0] {
		t.Errorf("bob's call came on upstream session %q, alice's on %q", b, a)
	}
}

// TestStatelessRequestsKeepTheHeaderChecks: a request of 2026-07-28 whose
// Mcp-Method header does not match its body is refused before the
// stateless handler reads it.
func TestStatelessRequestsKeepTheHeaderChecks(t *testing.T) {
	t.Parallel()
	_, up := httpUpstream(t)
	url := serve(t, newGateway(t, gateway.Upstream{URL: up}, ""))
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_note","arguments":{"name":"hello"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer bob-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", statelessVersion)
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), "-32020") {
		t.Errorf("a mismatched Mcp-Method: %d %s", resp.StatusCode, raw)
	}
}

// decisionGateway is the notes gateway whose enforcer has decision pages,
// with the elicitation options opts; it returns the enforcer too.
func decisionGateway(t *testing.T, up string, enfOpts []axgate.Option, opts ...gateway.Option) (*axgate.Enforcer, string) {
	t.Helper()
	m, err := manifest.Parse(manifestFor(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m, append([]axgate.Option{axgate.WithDecisionPages(pagesBase)}, enfOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	base := []gateway.Option{
		gateway.WithBearer(authenticate, &oauthex.ProtectedResourceMetadata{Resource: "https://gw.example.com/mcp"}),
		gateway.WithConnectTimeout(20 * time.Second),
	}
	g, err := gateway.New(enf, gateway.Upstream{URL: up}, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return enf, serve(t, g)
}

// urlElicitation declares URL-mode elicitation only.
var urlElicitation = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}

// sentToPage checks that res is input_required with the URL-mode request
// for the page of the call, and returns the decision's id and the state.
func sentToPage(t *testing.T, res *mcp.CallToolResult) (id, state string) {
	t.Helper()
	page, ok := res.InputRequests[mcpgate.DecisionInputID].(*mcp.ElicitParams)
	if !res.NeedsInput() || !ok || page.Mode != "url" || page.URL != pagesBase+"requests/"+page.ElicitationID || res.RequestState == "" {
		t.Fatalf("want input_required with the page of the call, got %+v (%s)", res, text(res))
	}
	return page.ElicitationID, res.RequestState
}

// retry is the client's retry of write_note after the person went to the
// page, with the request state it was given.
func retry(t *testing.T, cs *mcp.ClientSession, args map[string]any, state string) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_note", Arguments: args, RequestState: state,
		InputResponses: mcp.InputResponseMap{mcpgate.DecisionInputID: &mcp.ElicitResult{Action: "accept"}}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestStatelessDecisionPage: a write that needs the person's confirmation,
// with decision pages, answers a 2026-07-28 client input_required with the
// URL of the call's page; once the person confirmed there, the retry runs
// the write once, and a second retry with the same state is refused.
func TestStatelessDecisionPage(t *testing.T) {
	t.Parallel()
	n, up := httpUpstream(t)
	enf, url := decisionGateway(t, up, nil)
	cs := connectStateless(t, url, "alice-token", urlElicitation)
	args := map[string]any{"name": "todo", "text": "buy milk"}
	id, state := sentToPage(t, call(t, cs, "write_note", args))
	if len(n.seenTool("write_note")) != 0 {
		t.Fatal("the write ran before the person decided")
	}
	if _, _, _, err := enf.Approvals().Decide(context.Background(), principals["alice-token"], id, true, ""); err != nil {
		t.Fatal(err)
	}
	if res := retry(t, cs, args, state); res.IsError || res.NeedsInput() {
		t.Fatalf("the retry after the confirmation: %s", text(res))
	}
	if res := retry(t, cs, args, state); !res.IsError {
		t.Errorf("a second retry ran: %s", text(res))
	}
	if got := len(n.seenTool("write_note")); got != 1 {
		t.Errorf("the write ran %d times, want 1", got)
	}
}

// TestStatelessResourcesPromptsUnderPolicy: resources, prompts and
// completions of a 2026-07-28 client pass as on a session: only what the
// manifest declares, to a caller the chain allows; nothing else reaches
// the upstream. Subscriptions are not served statelessly.
func TestStatelessResourcesPromptsUnderPolicy(t *testing.T) {
	t.Parallel()
	up, upURL := payrollUpstream(t)
	url := serve(t, newGatewayFor(t, payrollManifest, gateway.Upstream{URL: upURL}))
	ctx := context.Background()
	eve, hana := connectStateless(t, url, "eve-token", nil), connectStateless(t, url, "hana-token", nil)
	for what, do := range entryRequests {
		if strings.HasPrefix(what, "resources/subscribe") {
			continue // subscriptions/listen on 2026-07-28: TestStatelessListenRefused
		}
		if got, err := do(ctx, eve); err == nil {
			t.Errorf("%s: eve got %q", what, got)
		} else if r := axagData(t, err); r.Code != "AXAG_ROLE_INSUFFICIENT" {
			t.Errorf("%s: eve refused with %+v; want AXAG_ROLE_INSUFFICIENT", what, r)
		}
		if got, err := do(ctx, hana); err != nil || got != salaries {
			t.Errorf("%s: hana got %q, %v", what, got, err)
		}
	}
	for what, do := range undeclaredRequests {
		if strings.HasPrefix(what, "resources/subscribe") || strings.HasPrefix(what, "resources/unsubscribe") {
			continue // subscriptions/listen on 2026-07-28: TestStatelessListenRefused
		}
		err := do(ctx, hana)
		if err == nil {
			t.Errorf("%s: not refused", what)
			continue
		}
		if r := axagData(t, err); r.Code != "AXAG_INTENT_NOT_FOUND" {
			t.Errorf("%s: refused with %+v; want AXAG_INTENT_NOT_FOUND", what, r)
		}
	}
	if n := len(up.saw("resources/read")); n != 2 {
		t.Errorf("the upstream saw %d reads; want hana's 2", n)
	}
	for _, m := range []string{"resources/subscribe", "resources/unsubscribe"} {
		if got := up.saw(m); len(got) != 0 {
			t.Errorf("the upstream saw %v", got)
		}
	}
	for _, r := range append(up.saw("resources/read"), up.saw("prompts/get")...) {
		if strings.Contains(r, "secret") || strings.Contains(r, "exfiltrate") || strings.Contains(r, "..") {
			t.Errorf("the upstream saw %s", r)
		}
	}
}

// TestStatelessListenRefused: a 2026-07-28 subscriptions/listen (what
// resources/subscribe became) is refused: nothing of the upstream is sent
// to a stateless client but its answers, and the discover result announces
// no list changes or subscriptions.
func TestStatelessListenRefused(t *testing.T) {
	t.Parallel()
	up, upURL := payrollUpstream(t)
	url := serve(t, newGatewayFor(t, payrollManifest, gateway.Upstream{URL: upURL}))
	hana := connectStateless(t, url, "hana-token", nil)
	caps := hana.InitializeResult().Capabilities
	if caps.Tools == nil || caps.Tools.ListChanged || caps.Resources == nil || caps.Resources.Subscribe || caps.Resources.ListChanged || caps.Logging != nil {
		t.Errorf("discover announces %+v", caps)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["payroll://all"]},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer hana-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", statelessVersion)
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(raw), "-32601") {
		t.Errorf("subscriptions/listen: %d %s", resp.StatusCode, raw)
	}
	if got := up.saw("resources/subscribe"); len(got) != 0 {
		t.Errorf("the upstream saw %v", got)
	}
}

// TestStatelessCallerLinkCountsAndExpires: a stateless caller's upstream
// session counts as one of its sessions (WithMaxSessions): with one per
// caller, alice's stateless requests hold hers, and her session is refused
// until the link has been idle for WithSessionTimeout; then her session
// holds it, and a stateless request of hers is refused. Bob's are his own.
func TestStatelessCallerLinkCountsAndExpires(t *testing.T) {
	t.Parallel()
	_, up := httpUpstream(t)
	url := serve(t, newGateway(t, gateway.Upstream{URL: up}, "", gateway.WithMaxSessions(10, 1), gateway.WithSessionTimeout(time.Second)))
	alice := connectStateless(t, url, "alice-token", nil)
	if res := call(t, alice, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("read_note: %s", text(res))
	}
	if _, err := tryConnect(t, url, "alice-token", nil); err == nil {
		t.Fatal("alice opened a session beside her stateless one, past her bound of 1")
	}
	if res := call(t, connectStateless(t, url, "bob-token", nil), "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("bob's read_note: %s", text(res))
	}
	var session *mcp.ClientSession
	if !eventually(20*time.Second, func() bool {
		cs, err := tryConnect(t, url, "alice-token", nil)
		session = cs
		return err == nil
	}) {
		t.Fatal("alice's idle stateless link never gave her session back")
	}
	if res := call(t, session, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("read_note on the session: %s", text(res))
	}
	_, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"name": "hello"}})
	if err == nil || !strings.Contains(err.Error(), "open sessions") {
		t.Errorf("a stateless request past alice's bound: %v", err)
	}
}
