package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"go.opentelemetry.io/otel/attribute"
)

// toolsOnlyManifest is manifestFor without its resources and prompts, for
// an upstream beside another that declares them (a resource declared by
// two upstreams is refused).
func toolsOnlyManifest(t testing.TB, pin string) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(manifestFor(t, pin), &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "resources")
	delete(doc, "prompts")
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// withResource is toolsOnlyManifest with the one resource entry (JSON).
func withResource(t testing.TB, entry string) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(toolsOnlyManifest(t, ""), &doc); err != nil {
		t.Fatal(err)
	}
	var r any
	if err := json.Unmarshal([]byte(entry), &r); err != nil {
		t.Fatal(err)
	}
	doc["resources"] = []any{r}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// enforcerOf is the enforcer of the manifest doc, closed with the test.
func enforcerOf(t testing.TB, doc []byte) *axgate.Enforcer {
	t.Helper()
	m, err := manifest.Parse(doc)
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

// multiOptions are newGatewayFor's options.
func multiOptions(opts ...gateway.Option) []gateway.Option {
	return append([]gateway.Option{
		gateway.WithBearer(authenticate, &oauthex.ProtectedResourceMetadata{
			Resource: "https://gw.example.com/mcp", AuthorizationServers: []string{"https://id.example.com"},
		}),
		gateway.WithRestartBackoff(300*time.Millisecond, time.Second),
		gateway.WithConnectTimeout(20 * time.Second),
	}, opts...)
}

// newMulti is NewMulti with newGatewayFor's options, closed with the test.
func newMulti(t *testing.T, upstreams []gateway.Named, opts ...gateway.Option) *gateway.Gateway {
	t.Helper()
	g, err := gateway.NewMulti(upstreams, multiOptions(opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// downable serves a notes upstream over HTTP that answers 503 to every
// request while down is set.
func downable(t *testing.T) (*notes, string, *atomic.Bool) {
	t.Helper()
	n, sdk := notesHandler()
	down := new(atomic.Bool)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return n, hs.URL, down
}

// threeUpstreams is a gateway in front of two HTTP notes upstreams (a, b)
// and a command one (c, which alone declares the resources and prompts).
func threeUpstreams(t *testing.T) (g *gateway.Gateway, na, nb *notes, downA *atomic.Bool) {
	t.Helper()
	na, urlA, downA := downable(t)
	nb, urlB := httpUpstream(t)
	g = newMulti(t, []gateway.Named{
		{Name: "a", Enforcer: enforcerOf(t, toolsOnlyManifest(t, "")), Upstream: gateway.Upstream{URL: urlA}},
		{Name: "b", Enforcer: enforcerOf(t, toolsOnlyManifest(t, "")), Upstream: gateway.Upstream{URL: urlB}},
		{Name: "c", Prefix: "c.", Enforcer: enforcerOf(t, manifestFor(t, "")), Upstream: stdioUpstream()},
	})
	return g, na, nb, downA
}

// TestMultiListsTheUnionPerCaller: tools/list is every upstream's tools
// under its prefix, filtered per caller as one upstream's are (alice, no
// admin, sees no delete_note of any).
func TestMultiListsTheUnionPerCaller(t *testing.T) {
	t.Parallel()
	g, _, _, _ := threeUpstreams(t)
	url := serve(t, g)
	bob := listNames(t, connect(t, url, "bob-token", nil))
	for _, want := range []string{"a_read_note", "a_delete_note", "b_read_note", "b_write_note", "b_delete_note", "c.read_note", "c.delete_note"} {
		if !slices.Contains(bob, want) {
			t.Errorf("bob's list %v lacks %s", bob, want)
		}
	}
	for _, name := range bob {
		if name == "read_note" || strings.Contains(name, "archive_note") || strings.Contains(name, "secret_dump") {
			t.Errorf("bob's list shows %s", name)
		}
	}
	alice := listNames(t, connect(t, url, "alice-token", nil))
	if len(alice) != len(bob)-3 {
		t.Errorf("alice sees %v; want bob's %v without the three delete_note", alice, bob)
	}
	for _, name := range alice {
		if strings.HasSuffix(name, "delete_note") {
			t.Errorf("alice, no admin, is listed %s", name)
		}
	}
}

// TestMultiRoutesCallsByPrefix: a call goes to the upstream its prefix
// names, which gets its own name of the tool and the checked arguments;
// no other upstream sees it. A name under no prefix is not found, and the
// chain of the upstream still refuses what its manifest does not allow.
func TestMultiRoutesCallsByPrefix(t *testing.T) {
	t.Parallel()
	g, na, nb, _ := threeUpstreams(t)
	cs := connect(t, serve(t, g), "alice-token", nil)
	res := call(t, cs, "b_read_note", map[string]any{"name": "hello"})
	if res.IsError || !strings.Contains(text(res), "world") {
		t.Fatalf("b_read_note: %s", text(res))
	}
	if got := nb.seenTool("read_note"); len(got) != 1 || got[0].Args != `{"name":"hello"}` {
		t.Errorf("upstream b saw %+v; want one read_note with the checked arguments", got)
	}
	if got := na.seen(); len(got) != 0 {
		t.Errorf("upstream a saw another's call: %+v", got)
	}
	if got := nb.seenTool("b_read_note"); len(got) != 0 {
		t.Error("the upstream got the prefixed name")
	}
	wantRefusal(t, call(t, cs, "zz_read_note", map[string]any{"name": "hello"}), "AXAG_INTENT_NOT_FOUND", "")
	wantRefusal(t, call(t, cs, "read_note", map[string]any{"name": "hello"}), "AXAG_INTENT_NOT_FOUND", "")
	// Refused by a's chain, named as the client named it, the tools it
	// may call suggested under their prefix.
	res = call(t, cs, "a_secret_dump", map[string]any{})
	if r := wantRefusal(t, res, "AXAG_INTENT_NOT_FOUND", ""); !strings.Contains(r.Message, `"a_secret_dump"`) ||
		!strings.Contains(text(res), "a_read_note") || strings.Contains(text(res), " read_note") {
		t.Errorf("the refusal does not name the tools as the client does: %s", text(res))
	}
	if r := wantRefusal(t, call(t, cs, "a_archive_note", map[string]any{"name": "x"}), "AXAG_INTENT_NOT_FOUND", ""); !strings.Contains(r.Message, "a_archive_note") {
		t.Errorf("a tool a does not offer is refused as %q, not by its name at the front", r.Message)
	}
	// The parameter gate of a's manifest: maxLength 40.
	res = call(t, cs, "a_read_note", map[string]any{"name": strings.Repeat("x", 41)})
	if !res.IsError {
		t.Fatalf("a_read_note past the manifest's maxLength passed: %s", text(res))
	}
	if len(na.seen()) != 0 || len(nb.seen()) != 1 {
		t.Errorf("a refused call reached an upstream: a %+v, b %+v", na.seen(), nb.seen())
	}
	// The command upstream: its tools and its resources.
	if res := call(t, cs, "c.read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("c.read_note: %s", text(res))
	}
	if pid := pidOf(t, cs); pid <= 0 {
		t.Fatal("no pid from c's resource")
	}
	if _, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "c.summarize", Arguments: map[string]string{"name": "hello"}}); err != nil {
		t.Errorf("c's prompt under its prefix: %v", err)
	}
	if _, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "summarize", Arguments: map[string]string{"name": "hello"}}); err == nil {
		t.Error("a prompt without its prefix was served")
	}
}

// TestMultiDirectPathRoutes: a session's call that takes the direct path
// (one POST to the upstream, answered as JSON) reaches the upstream its
// prefix names, and only it.
func TestMultiDirectPathRoutes(t *testing.T) {
	t.Parallel()
	g, na, nb, _ := threeUpstreams(t)
	w := &wire{}
	cs := connectVia(t, serve(t, g), "alice-token", w, nil)
	for range 2 {
		if res := call(t, cs, "a_read_note", map[string]any{"name": "hello"}); res.IsError {
			t.Fatalf("a_read_note: %s", text(res))
		}
	}
	if res := call(t, cs, "b_read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("b_read_note: %s", text(res))
	}
	if got := w.answers("a_read_note"); len(got) == 0 || got[len(got)-1] != "application/json" {
		t.Errorf("a_read_note's answers %v: not the direct path", got)
	}
	if a, b := len(na.seenTool("read_note")), len(nb.seenTool("read_note")); a != 2 || b != 1 {
		t.Errorf("upstream a saw %d calls, b %d; want 2 and 1", a, b)
	}
}

// TestMultiCollisionRefused: two upstreams whose tools share a name at
// the front are refused at NewMulti, naming both; so is a tool under
// another upstream's longer prefix, a front-level option among an
// upstream's own, and a resource declared by two upstreams.
func TestMultiCollisionRefused(t *testing.T) {
	t.Parallel()
	_, url := httpUpstream(t)
	up := gateway.Upstream{URL: url}
	tools := func() *axgate.Enforcer { return enforcerOf(t, toolsOnlyManifest(t, "")) }
	for name, c := range map[string]struct {
		ups  []gateway.Named
		want []string
	}{
		"same prefix": {[]gateway.Named{{Name: "one", Prefix: "x_", Enforcer: tools(), Upstream: up}, {Name: "two", Prefix: "x_", Enforcer: tools(), Upstream: up}},
			[]string{"one", "two", "x_read_note"}},
		"longer prefix": {[]gateway.Named{{Name: "one", Prefix: "x_", Enforcer: tools(), Upstream: up}, {Name: "two", Prefix: "x_read", Enforcer: tools(), Upstream: up}},
			[]string{"one", "two", "x_read_note"}},
		"front option": {[]gateway.Named{{Name: "one", Enforcer: tools(), Upstream: up, Options: []gateway.Option{gateway.WithMaxSessions(1, 1)}}},
			[]string{"WithMaxSessions"}},
		"resource twice": {[]gateway.Named{{Name: "one", Enforcer: enforcerOf(t, manifestFor(t, "")), Upstream: up}, {Name: "two", Enforcer: enforcerOf(t, manifestFor(t, "")), Upstream: up}},
			[]string{"one", "two", "notes://"}},
		"resource under a prefix": {[]gateway.Named{{Name: "one", Enforcer: enforcerOf(t, manifestFor(t, "")), Upstream: up}, {Name: "two", Enforcer: enforcerOf(t, withResource(t, `{"intent": "readme.read", "entity": "readme", "description": "d", "uri": "notes://readme"}`)), Upstream: up}},
			[]string{"one", "two", "notes://readme"}},
		"prefix under a prefix": {[]gateway.Named{{Name: "one", Enforcer: enforcerOf(t, manifestFor(t, "")), Upstream: up}, {Name: "two", Enforcer: enforcerOf(t, withResource(t, `{"intent": "readme.read", "entity": "readme", "description": "d", "uri_prefix": "notes://docs/"}`)), Upstream: up}},
			[]string{"one", "two", "notes://docs/"}},
		"template under a prefix": {[]gateway.Named{{Name: "one", Enforcer: enforcerOf(t, manifestFor(t, "")), Upstream: up}, {Name: "two", Enforcer: enforcerOf(t, withResource(t, `{"intent": "readme.read", "entity": "readme", "description": "d", "uri_template": "notes://{name}"}`)), Upstream: up}},
			[]string{"one", "two", "notes://{name}"}},
		"templates matching one URI": {[]gateway.Named{{Name: "one", Enforcer: enforcerOf(t, withResource(t, `{"intent": "doc.read", "entity": "doc", "description": "d", "uri_template": "docs://{id}"}`)), Upstream: up}, {Name: "two", Enforcer: enforcerOf(t, withResource(t, `{"intent": "doc.md", "entity": "doc", "description": "d", "uri_template": "docs://{id}.md"}`)), Upstream: up}},
			[]string{"one", "two", "docs://{id}.md"}},
		"bad prefix": {[]gateway.Named{{Name: "one", Prefix: "x/", Enforcer: tools(), Upstream: up}},
			[]string{"x/"}},
		"no name": {[]gateway.Named{{Enforcer: tools(), Upstream: up}, {Name: "two", Enforcer: tools(), Upstream: up}},
			[]string{"without a Name"}},
	} {
		g, err := gateway.NewMulti(c.ups, multiOptions()...)
		if err == nil {
			g.Close()
			t.Errorf("%s: NewMulti accepted it", name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", name, err, w)
			}
		}
	}
}

// TestMultiOneUpstreamDown: while one upstream is down its calls are
// refused upstream_unavailable and the others answer; Upstreams reports
// each, and Ready stays nil while one serves.
func TestMultiOneUpstreamDown(t *testing.T) {
	t.Parallel()
	g, _, _, downA := threeUpstreams(t)
	cs := connect(t, serve(t, g), "alice-token", nil)
	ctx := context.Background()
	for name, err := range g.Upstreams(ctx) {
		if err != nil {
			t.Fatalf("upstream %s not ready at start: %v", name, err)
		}
	}
	downA.Store(true)
	r := wantRefusal(t, call(t, cs, "a_read_note", map[string]any{"name": "hello"}), "AXGATE_STORE_UNAVAILABLE", "upstream_unavailable")
	if r.Details["upstream"] != "a" {
		t.Errorf("the refusal names upstream %v, want a", r.Details["upstream"])
	}
	if res := call(t, cs, "b_read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("b_read_note while a is down: %s", text(res))
	}
	if res := call(t, cs, "c.read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("c.read_note while a is down: %s", text(res))
	}
	// The checks at start have closed their sessions (a child's stop):
	// the next ones run anew.
	if !eventually(20*time.Second, func() bool { return !gateway.ReadyChecking(g) }) {
		t.Fatal("the readiness checks did not end")
	}
	gateway.ExpireReady(g)
	got := g.Upstreams(ctx)
	if len(got) != 3 || got["a"] == nil || got["b"] != nil || got["c"] != nil {
		t.Errorf("Upstreams: %v; want a's error and b, c ready", got)
	}
	if err := g.Ready(ctx); err != nil {
		t.Errorf("Ready with b and c up: %v", err)
	}
}

// TestMultiPinsPerUpstream: a pin that does not match disables the tool of
// its upstream only; the upstream's list_changed re-lists that upstream,
// the client is told, and the other's same tool still serves.
func TestMultiPinsPerUpstream(t *testing.T) {
	t.Parallel()
	na, urlA := httpUpstream(t)
	nb, urlB := httpUpstream(t)
	pin := pinOf(t, urlB, "write_note")
	g := newMulti(t, []gateway.Named{
		{Name: "a", Enforcer: enforcerOf(t, toolsOnlyManifest(t, strings.Repeat("0", 64))), Upstream: gateway.Upstream{URL: urlA}},
		{Name: "b", Enforcer: enforcerOf(t, toolsOnlyManifest(t, pin)), Upstream: gateway.Upstream{URL: urlB}},
	}, gateway.WithTrustClientElicitation())
	changed := make(chan struct{}, 10)
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{
		ElicitationHandler: accept,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	names := listNames(t, cs)
	if slices.Contains(names, "a_write_note") || !slices.Contains(names, "b_write_note") {
		t.Fatalf("list %v: want a_write_note disabled by its pin, b_write_note served", names)
	}
	wantRefusal(t, call(t, cs, "a_write_note", map[string]any{"name": "n", "text": "x"}), "AXGATE_TOOL_CHANGED", "")
	if res := call(t, cs, "b_write_note", map[string]any{"name": "n", "text": "x"}); res.IsError {
		t.Fatalf("b_write_note: %s", text(res))
	}
	for len(changed) > 0 {
		<-changed
	}
	var listsOfA atomic.Int32
	na.setHook(func(ctx context.Context, method string, next func() (mcp.Result, error)) (mcp.Result, error) {
		if method == "tools/list" {
			listsOfA.Add(1)
		}
		return next()
	})
	nb.rugPull()
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("the client was not told its tools changed")
	}
	wantRefusal(t, call(t, cs, "b_write_note", map[string]any{"name": "n", "text": "y"}), "AXGATE_TOOL_CHANGED", "")
	if res := call(t, cs, "a_read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("a_read_note after b's change: %s", text(res))
	}
	if len(na.seenTool("write_note")) != 0 {
		t.Error("a's disabled write_note reached a")
	}
	if n := listsOfA.Load(); n != 0 {
		t.Errorf("b's list_changed re-listed a %d times", n)
	}
}

// TestMultiStatelessCaller: a client of MCP 2026-07-28 lists the union and
// its calls route by prefix too.
func TestMultiStatelessCaller(t *testing.T) {
	t.Parallel()
	g, na, nb, _ := threeUpstreams(t)
	cs := connectStateless(t, serve(t, g), "alice-token", nil)
	names := listNames(t, cs)
	if !slices.Contains(names, "a_read_note") || !slices.Contains(names, "c.read_note") {
		t.Fatalf("stateless list %v", names)
	}
	if res := call(t, cs, "a_read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("a_read_note: %s", text(res))
	}
	if a, b := len(na.seenTool("read_note")), len(nb.seenTool("read_note")); a != 1 || b != 0 {
		t.Errorf("upstream a saw %d calls, b %d; want 1 and 0", a, b)
	}
}

// TestMultiReloadKeepsUnchanged: Reload keeps the session (the same child)
// of an upstream that did not change, swaps the manifest of one whose
// manifest alone changed, closes the sessions of one that changed (its
// child stopped), and a broken Reload changes nothing.
func TestMultiReloadKeepsUnchanged(t *testing.T) {
	t.Parallel()
	_, urlA := httpUpstream(t)
	urlB, sessionsOf := upstreamSessions(t)
	a := gateway.Named{Name: "a", Enforcer: enforcerOf(t, toolsOnlyManifest(t, "")), Upstream: gateway.Upstream{URL: urlA}}
	b := gateway.Named{Name: "b", Enforcer: enforcerOf(t, toolsOnlyManifest(t, "")), Upstream: gateway.Upstream{URL: urlB}}
	c := gateway.Named{Name: "c", Enforcer: enforcerOf(t, manifestFor(t, "")), Upstream: stdioUpstream()}
	g := newMulti(t, []gateway.Named{a, b, c})
	cs := connect(t, serve(t, g), "bob-token", nil)
	ctx := context.Background()
	pid := pidOf(t, cs)
	before := listNames(t, cs)
	if res := call(t, cs, "b_read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("b_read_note: %s", text(res))
	}

	// Broken: a collision. Nothing changes.
	bad := b
	bad.Prefix = "a_"
	if err := g.Reload(ctx, []gateway.Named{a, bad, c}); err == nil {
		t.Fatal("a Reload with a collision was accepted")
	}
	if got := listNames(t, cs); !slices.Equal(got, before) {
		t.Errorf("a broken Reload changed the list: %v, was %v", got, before)
	}

	// b's manifest alone changes: no delete_note any more; a is removed.
	var doc map[string]any
	json.Unmarshal(toolsOnlyManifest(t, ""), &doc)
	actions := doc["actions"].([]any)
	doc["actions"] = slices.DeleteFunc(actions, func(x any) bool { return x.(map[string]any)["operation_id"] == "delete_note" })
	raw, _ := json.Marshal(doc)
	b2 := b
	b2.Enforcer = enforcerOf(t, raw)
	if err := g.Reload(ctx, []gateway.Named{b2, c}); err != nil {
		t.Fatal(err)
	}
	if got := pidOf(t, cs); got != pid {
		t.Errorf("c's child changed across a Reload that kept c: %d, was %d", got, pid)
	}
	if res := call(t, cs, "b_read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("b_read_note after Reload: %s", text(res))
	}
	if got := sessionsOf("hello"); len(got) != 2 || got[0] == "" || got[0] != got[1] {
		t.Errorf("b's upstream sessions across a Reload of its manifest alone: %v; want one kept", got)
	}
	names := listNames(t, cs)
	if slices.Contains(names, "b_delete_note") || !slices.Contains(names, "b_read_note") || slices.Contains(names, "a_read_note") {
		t.Errorf("after Reload: %v; want b without delete_note, no a", names)
	}
	wantRefusal(t, call(t, cs, "b_delete_note", map[string]any{"name": "hello"}), "AXAG_INTENT_NOT_FOUND", "")
	wantRefusal(t, call(t, cs, "a_read_note", map[string]any{"name": "hello"}), "AXAG_INTENT_NOT_FOUND", "")

	// c changes (another environment): its child is stopped, a new one
	// serves the session.
	c2 := c
	c2.Upstream.Env = append(slices.Clone(c.Upstream.Env), "RELOADED=1")
	if err := g.Reload(ctx, []gateway.Named{b2, c2}); err != nil {
		t.Fatal(err)
	}
	if !eventually(20*time.Second, func() bool { return !alive(pid) }) {
		t.Errorf("c's old child %d outlived the Reload that changed c", pid)
	}
	if got := pidOf(t, cs); got == pid {
		t.Error("c's session kept its child across a change of c")
	}

	// a comes back: the open session lists and calls it.
	if err := g.Reload(ctx, []gateway.Named{b2, c2, a}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(listNames(t, cs), "a_read_note") {
		t.Error("an upstream added by Reload is not listed to an open session")
	}
	if res := call(t, cs, "a_read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Errorf("a_read_note after a came back: %s", text(res))
	}
}

// TestMultiSpanNamesTheUpstream: with several upstreams, the span of a
// forwarded call names its upstream (axgate.upstream), and only that
// upstream's chain records the call.
func TestMultiSpanNamesTheUpstream(t *testing.T) {
	t.Parallel()
	_, urlA := httpUpstream(t)
	_, urlB := httpUpstream(t)
	traced := func(tp *spans) *axgate.Enforcer {
		m, err := manifest.Parse(toolsOnlyManifest(t, ""))
		if err != nil {
			t.Fatal(err)
		}
		enf, err := axgate.New(m, axgate.WithTelemetry(middleware.TelemetryConfig{TracerProvider: tp}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { enf.Close() })
		return enf
	}
	tpA, tpB := &spans{attrs: map[attribute.Key]string{}}, &spans{attrs: map[attribute.Key]string{}}
	g := newMulti(t, []gateway.Named{
		{Name: "a", Enforcer: traced(tpA), Upstream: gateway.Upstream{URL: urlA}},
		{Name: "b", Enforcer: traced(tpB), Upstream: gateway.Upstream{URL: urlB}},
	})
	cs := connect(t, serve(t, g), "alice-token", nil)
	if res := call(t, cs, "b_read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("b_read_note: %s", text(res))
	}
	tpB.mu.Lock()
	got := tpB.attrs["axgate.upstream"]
	tpB.mu.Unlock()
	if got != "b" {
		t.Errorf("the call's span names upstream %q, want b", got)
	}
	tpA.mu.Lock()
	defer tpA.mu.Unlock()
	if len(tpA.attrs) != 0 {
		t.Errorf("a's chain recorded b's call: %v", tpA.attrs)
	}
}

// TestReloadOfNewsGateway: New's gateway reloads as one unnamed upstream:
// a new manifest for the same upstream applies from the next call, and
// the session keeps its child.
func TestReloadOfNewsGateway(t *testing.T) {
	t.Parallel()
	up := stdioUpstream()
	g := newGatewayFor(t, manifestFor(t, ""), up)
	cs := connect(t, serve(t, g), "bob-token", nil)
	pid := pidOf(t, cs)
	if !slices.Contains(listNames(t, cs), "delete_note") {
		t.Fatal("bob is not listed delete_note")
	}
	var doc map[string]any
	json.Unmarshal(manifestFor(t, ""), &doc)
	doc["actions"] = slices.DeleteFunc(doc["actions"].([]any), func(x any) bool { return x.(map[string]any)["operation_id"] == "delete_note" })
	raw, _ := json.Marshal(doc)
	if err := g.Reload(context.Background(), []gateway.Named{{Enforcer: enforcerOf(t, raw), Upstream: up}}); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(listNames(t, cs), "delete_note") {
		t.Error("the reloaded manifest's list shows delete_note")
	}
	wantRefusal(t, call(t, cs, "delete_note", map[string]any{"name": "hello"}), "AXAG_INTENT_NOT_FOUND", "")
	if got := pidOf(t, cs); got != pid {
		t.Errorf("the session's child changed across a manifest Reload: %d, was %d", got, pid)
	}
	if err := g.Reload(context.Background(), []gateway.Named{{Name: "x", Enforcer: enforcerOf(t, raw), Upstream: up, Options: []gateway.Option{gateway.ToolsOnly()}}}); err == nil || !strings.Contains(err.Error(), "ToolsOnly") {
		t.Errorf("a front option in a Reload: %v, want it named", err)
	}
}

// TestMultiConfirmationBoundToItsUpstream: the person's answer to the
// confirmation question about one upstream's call does not pass the same
// call (tool, intent, arguments) of another upstream, even when their
// chains share an elicitation key (as replicas do); it passes its own.
func TestMultiConfirmationBoundToItsUpstream(t *testing.T) {
	t.Parallel()
	na, nb, cs := twoUpstreamsSharingAnElicitationKey(t)
	args := map[string]any{"name": "n", "text": "x"}
	res := call(t, cs, "a_write_note", args)
	if !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("want a's confirmation question, got %+v (%s)", res, text(res))
	}
	accept := mcp.InputResponseMap{mcpgate.ConfirmationInputID: &mcp.ElicitResult{Action: "accept"}}
	ctx := context.Background()
	other, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "b_write_note", Arguments: args, RequestState: res.RequestState, InputResponses: accept})
	if err == nil && !other.IsError && !other.NeedsInput() {
		t.Errorf("a's answer passed b's call: %s", text(other))
	}
	if n := len(nb.seenTool("write_note")); n != 0 {
		t.Fatalf("b saw %d writes confirmed for a", n)
	}
	own, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a_write_note", Arguments: args, RequestState: res.RequestState, InputResponses: accept})
	if err != nil || own.IsError || own.NeedsInput() {
		t.Fatalf("a's own answer: %v %+v (%s)", err, own, text(own))
	}
	if n := len(na.seenTool("write_note")); n != 1 {
		t.Errorf("a saw %d writes, want 1", n)
	}
}

// TestMultiLocalClient: a stdio gateway (the local principal) in front of
// two command upstreams starts no child of its own: the client's session
// has one child per upstream, each checked before the initialize is
// answered, and the calls route to each.
func TestMultiLocalClient(t *testing.T) {
	t.Parallel()
	g := newMulti(t, []gateway.Named{
		{Name: "x", Enforcer: enforcerOf(t, toolsOnlyManifest(t, "")), Upstream: stdioUpstream()},
		{Name: "y", Enforcer: enforcerOf(t, manifestFor(t, "")), Upstream: stdioUpstream()},
	}, gateway.WithLocalPrincipal(middleware.Principal{ID: "alice", Roles: []string{"user"}}))
	cs := localSession(t, g, nil)
	names := listNames(t, cs)
	if !slices.Contains(names, "x_read_note") || !slices.Contains(names, "y_read_note") || slices.Contains(names, "x_delete_note") {
		t.Fatalf("the local client's list: %v", names)
	}
	for _, tool := range []string{"x_read_note", "y_read_note"} {
		if res := call(t, cs, tool, map[string]any{"name": "hello"}); res.IsError {
			t.Errorf("%s: %s", tool, text(res))
		}
	}
	if pid := pidOf(t, cs); !alive(pid) {
		t.Errorf("y's child %d is not running", pid)
	}
}

// TestMultiReloadUnderCalls: calls, lists and new sessions go on while
// Reload swaps a manifest and removes and adds an upstream; every call is
// answered (served, or refused as the manifest of the moment says), and
// the race detector sees the swaps.
func TestMultiReloadUnderCalls(t *testing.T) {
	t.Parallel()
	_, urlA := httpUpstream(t)
	_, urlB := httpUpstream(t)
	a := gateway.Named{Name: "a", Enforcer: enforcerOf(t, toolsOnlyManifest(t, "")), Upstream: gateway.Upstream{URL: urlA}}
	b := gateway.Named{Name: "b", Enforcer: enforcerOf(t, toolsOnlyManifest(t, "")), Upstream: gateway.Upstream{URL: urlB}}
	b2 := b
	b2.Enforcer = enforcerOf(t, toolsOnlyManifest(t, strings.Repeat("0", 64)))
	g := newMulti(t, []gateway.Named{a, b})
	url := serve(t, g)
	ctx := context.Background()
	stop := make(chan struct{})
	done := make(chan error, 2)
	for _, token := range []string{"alice-token", "bob-token"} {
		cs := connect(t, url, token, nil)
		go func() {
			for {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				for _, tool := range []string{"a_read_note", "b_read_note", "b_write_note"} {
					if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"name": "hello", "text": "x"}}); err != nil {
						done <- err
						return
					}
				}
				if _, err := cs.ListTools(ctx, nil); err != nil {
					done <- err
					return
				}
			}
		}()
	}
	sets := [][]gateway.Named{{a, b2}, {b}, {a, b}, {b2, a}}
	for i := range 8 {
		if err := g.Reload(ctx, sets[i%len(sets)]); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("a client's request failed during the Reloads: %v", err)
		}
	}
}

// twoUpstreamsSharingAnElicitationKey serves upstreams a and b, the same
// tools on each, behind one gateway whose chains trust the client's
// elicitation and share one elicitation key (as replicas do), and connects
// a stateless client that answers forms.
func twoUpstreamsSharingAnElicitationKey(t *testing.T) (na, nb *notes, cs *mcp.ClientSession) {
	t.Helper()
	na, urlA := httpUpstream(t)
	nb, urlB := httpUpstream(t)
	key := bytes.Repeat([]byte{7}, mcpgate.ElicitationKeySize)
	g := newMulti(t, []gateway.Named{
		{Name: "a", Enforcer: enforcerOf(t, toolsOnlyManifest(t, "")), Upstream: gateway.Upstream{URL: urlA}},
		{Name: "b", Enforcer: enforcerOf(t, toolsOnlyManifest(t, "")), Upstream: gateway.Upstream{URL: urlB}},
	}, gateway.WithTrustClientElicitation(), gateway.WithMCPOptions(mcpgate.WithElicitationKey(key)))
	cs = connectStateless(t, serve(t, g), "alice-token", &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}})
	return na, nb, cs
}
