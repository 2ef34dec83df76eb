package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// The callers: alice may read and write, bob is an admin and may delete too.
var principals = map[string]middleware.Principal{
	"alice-token": {ID: "alice", Roles: []string{"user"}},
	"bob-token":   {ID: "bob", Roles: []string{"user", "admin"}},
}

// authenticate is the bearer authenticator of the tests: a fixed token per
// caller (httpgate.JWTBearer in production).
func authenticate(r *http.Request) (middleware.Principal, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p, known := principals[token]
	if !ok || !known {
		return middleware.Principal{}, errors.New("unknown token")
	}
	p.Claims = map[string]any{"exp": float64(time.Now().Add(time.Hour).Unix())}
	return p, nil
}

// notesHandler is a new notes upstream and its streamable HTTP handler, for
// a test that serves it behind a handler of its own.
func notesHandler() (*notes, http.Handler) {
	n := newNotes()
	srv := n.server()
	return n, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
}

// httpUpstream serves a notes upstream over streamable HTTP.
func httpUpstream(t *testing.T) (*notes, string) {
	t.Helper()
	n, sdk := notesHandler()
	hs := httptest.NewServer(sdk)
	t.Cleanup(hs.Close)
	return n, hs.URL
}

// pinOf is the digest of an upstream tool as a client lists it (what
// axgate manifest init writes as upstream_sha256).
func pinOf(t *testing.T, url, tool string) string {
	t.Helper()
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "pin", Version: "v1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tl.Name == tool {
			d, err := mcpgate.ToolDigest(tl)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatalf("the upstream has no tool %s", tool)
	return ""
}

// newGateway builds the gateway of the notes manifest, pinned to pin, in
// front of up.
func newGateway(t *testing.T, up gateway.Upstream, pin string, opts ...gateway.Option) *gateway.Gateway {
	t.Helper()
	return newGatewayFor(t, manifestFor(t, pin), up, opts...)
}

// newGatewayFor builds the gateway of the manifest doc in front of up, its
// callers those of authenticate.
func newGatewayFor(t *testing.T, doc []byte, up gateway.Upstream, opts ...gateway.Option) *gateway.Gateway {
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
	base := []gateway.Option{
		gateway.WithBearer(authenticate, &oauthex.ProtectedResourceMetadata{
			Resource: "https://gw.example.com/mcp", AuthorizationServers: []string{"https://id.example.com"},
		}),
		gateway.WithRestartBackoff(300*time.Millisecond, time.Second),
		gateway.WithConnectTimeout(20 * time.Second),
	}
	g, err := gateway.New(enf, up, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// serve serves the gateway over HTTP and returns its /mcp URL.
func serve(t *testing.T, g *gateway.Gateway) string {
	t.Helper()
	hs := httptest.NewServer(g.Handler())
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect is an agent of the caller with token, with the Go SDK's client.
func connect(t *testing.T, url, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, opts)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func accept(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "accept"}, nil
}

func decline(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "decline"}, nil
}

func listNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// refusal is the AXAG envelope of a refused call.
type refusal struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

func refusalOf(t *testing.T, res *mcp.CallToolResult) refusal {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want a refusal, got %s", text(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var env struct {
		Error refusal `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || env.Error.Code == "" {
		t.Fatalf("no AXAG envelope in %s (%v)", raw, err)
	}
	return env.Error
}

func wantRefusal(t *testing.T, res *mcp.CallToolResult, code, reason string) refusal {
	t.Helper()
	r := refusalOf(t, res)
	if r.Code != code {
		t.Fatalf("refused with %s (%s), want %s", r.Code, r.Message, code)
	}
	if reason != "" && r.Details["reason"] != reason {
		t.Fatalf("%s with reason %v, want %s", code, r.Details["reason"], reason)
	}
	return r
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestGatewayHTTP drives the gateway in front of a streamable HTTP upstream
// with the Go SDK's client, as two callers.
func TestGatewayHTTP(t *testing.T) {
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL + "/"}, pinOf(t, upURL, "write_note"), gateway.AllowUpstreamElicitation())
	url := serve(t, g)
	alice := connect(t, url, "alice-token", nil)
	ctx := context.Background()

	t.Run("list per caller", func(t *testing.T) {
		// Manifest order; not secret_dump (the manifest does not name it),
		// not archive_note (the upstream does not offer it), not
		// delete_note for alice (admin only).
		if got, want := listNames(t, alice), []string{"read_note", "write_note", "fail_note", "ask_note"}; !slices.Equal(got, want) {
			t.Errorf("alice lists %v, want %v", got, want)
		}
		bob := connect(t, url, "bob-token", nil)
		if got, want := listNames(t, bob), []string{"read_note", "write_note", "delete_note", "fail_note", "ask_note"}; !slices.Equal(got, want) {
			t.Errorf("bob lists %v, want %v", got, want)
		}
		// The manifest's definitions, not the upstream's.
		res, _ := alice.ListTools(ctx, nil)
		if d := res.Tools[0].Description; d != "Read one note by its name." {
			t.Errorf("read_note's description is %q, want the manifest's", d)
		}
		raw, _ := json.Marshal(res.Tools[0].InputSchema)
		if !strings.Contains(string(raw), `"maxLength":40`) {
			t.Errorf("read_note's input schema %s is not the enforced one", raw)
		}
	})

	t.Run("read", func(t *testing.T) {
		res := call(t, alice, "read_note", json.RawMessage(`{ "name" :"hello" }`))
		if res.IsError {
			t.Fatalf("read refused: %s", text(res))
		}
		raw, _ := json.Marshal(res.StructuredContent)
		if string(raw) != `{"name":"hello","text":"world"}` {
			t.Errorf("structured content %s", raw)
		}
		last := up.seenTool("read_note")
		if len(last) != 1 {
			t.Fatalf("the upstream saw %d reads, want 1", len(last))
		}
		c := last[0]
		if c.Args != `{"name":"hello"}` {
			t.Errorf("the upstream got the arguments %s, want their canonical form", c.Args)
		}
		if c.Authorization != "" {
			t.Errorf("the client's credentials reached the upstream: %q", c.Authorization)
		}
		for k := range c.Meta {
			if strings.HasPrefix(k, "axag/") {
				t.Errorf("the upstream got the credential %s", k)
			}
		}
	})

	t.Run("output schema of the upstream result", func(t *testing.T) {
		wantRefusal(t, call(t, alice, "read_note", map[string]any{"name": "broken"}), "AXGATE_POSTCONDITION_FAILED", "output_schema")
	})

	t.Run("refused write", func(t *testing.T) {
		before := len(up.seenTool("write_note"))
		// Too long for the manifest.
		wantRefusal(t, call(t, alice, "write_note", map[string]any{"name": "n", "text": strings.Repeat("x", 201)}), "AXAG_OUT_OF_RANGE", "")
		// Alice's client cannot be asked: a confirmation token is needed.
		wantRefusal(t, call(t, alice, "write_note", map[string]any{"name": "n", "text": "t"}), "AXAG_CONFIRMATION_MISSING", "")
		if n := len(up.seenTool("write_note")); n != before {
			t.Errorf("refused writes reached the upstream (%d)", n-before)
		}
	})

	t.Run("write confirmed by elicitation", func(t *testing.T) {
		var asked []string
		var mu sync.Mutex
		cs := connect(t, url, "alice-token", &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			mu.Unlock()
			return accept(ctx, req)
		}})
		before := len(up.seenTool("write_note"))
		// Keys out of order and an escape: the upstream gets the canonical
		// form (RFC 8785) of what the gates checked.
		res := call(t, cs, "write_note", json.RawMessage(`{"text":"buy milk","name":"\u0074odo"}`))
		if res.IsError || text(res) != "written" {
			t.Fatalf("confirmed write: %s", text(res))
		}
		if len(asked) != 1 {
			t.Errorf("the person was asked %d times", len(asked))
		}
		if got := up.seenTool("write_note"); len(got) != before+1 || got[len(got)-1].Args != `{"name":"todo","text":"buy milk"}` {
			t.Errorf("the upstream saw %+v", got)
		}
	})

	t.Run("write declined", func(t *testing.T) {
		cs := connect(t, url, "alice-token", &mcp.ClientOptions{ElicitationHandler: decline})
		before := len(up.seenTool("write_note"))
		wantRefusal(t, call(t, cs, "write_note", map[string]any{"name": "todo", "text": "sell milk"}), "AXAG_CONFIRMATION_MISSING", "declined")
		if n := len(up.seenTool("write_note")); n != before {
			t.Error("a declined write reached the upstream")
		}
	})

	t.Run("hidden upstream tool", func(t *testing.T) {
		wantRefusal(t, call(t, alice, "secret_dump", map[string]any{}), "AXAG_INTENT_NOT_FOUND", "")
		if n := len(up.seenTool("secret_dump")); n != 0 {
			t.Error("a tool the manifest does not name was called upstream")
		}
	})

	t.Run("manifest tool the upstream lacks", func(t *testing.T) {
		wantRefusal(t, call(t, alice, "archive_note", map[string]any{"name": "x"}), "AXAG_INTENT_NOT_FOUND", "")
	})

	t.Run("role", func(t *testing.T) {
		wantRefusal(t, call(t, alice, "delete_note", map[string]any{"name": "hello"}), "AXAG_ROLE_INSUFFICIENT", "role_missing")
		if n := len(up.seenTool("delete_note")); n != 0 {
			t.Error("a refused delete reached the upstream")
		}
	})

	t.Run("upstream isError", func(t *testing.T) {
		r := wantRefusal(t, call(t, alice, "fail_note", map[string]any{}), "AXGATE_TOOL_FAILED", "")
		if !strings.Contains(r.Message, "disk full on /var/notes") {
			t.Errorf("the upstream's text is lost: %q", r.Message)
		}
	})

	t.Run("upstream asks the person", func(t *testing.T) {
		cs := connect(t, url, "alice-token", &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if req.Params.Message != "Which note?" {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "hello"}}, nil
		}})
		if res := call(t, cs, "ask_note", map[string]any{}); res.IsError || text(res) != "accept hello" {
			t.Errorf("the upstream's question did not reach the person: %s", text(res))
		}
		// A client that cannot be asked is not offered to the upstream as one
		// that can.
		if res := call(t, alice, "ask_note", map[string]any{}); !strings.Contains(text(res), "cannot ask") {
			t.Errorf("the upstream asked a client without elicitation: %s", text(res))
		}
	})

	t.Run("passthrough", func(t *testing.T) {
		rr, err := alice.ReadResource(ctx, &mcp.ReadResourceParams{URI: "notes://readme"})
		if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "Notes are short." {
			t.Fatalf("resources/read: %v %+v", err, rr)
		}
		lr, err := alice.ListResources(ctx, nil)
		if err != nil || len(lr.Resources) != 4 { // readme, pid, env, flood
			t.Fatalf("resources/list: %v %+v", err, lr)
		}
		gp, err := alice.GetPrompt(ctx, &mcp.GetPromptParams{Name: "summarize", Arguments: map[string]string{"name": "hello"}})
		if err != nil || len(gp.Messages) != 1 || gp.Messages[0].Content.(*mcp.TextContent).Text != "Summarize the note hello." {
			t.Fatalf("prompts/get: %v %+v", err, gp)
		}
		caps := alice.InitializeResult().Capabilities
		if caps.Resources == nil || caps.Prompts == nil || caps.Tools == nil {
			t.Errorf("the gateway does not announce the upstream's capabilities: %+v", caps)
		}
	})

	t.Run("protected resource", func(t *testing.T) {
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := `Bearer resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource"`
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
			t.Errorf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		base := strings.TrimSuffix(url, "/mcp")
		for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
			resp, err := http.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			var meta oauthex.ProtectedResourceMetadata
			json.NewDecoder(resp.Body).Decode(&meta)
			resp.Body.Close()
			if resp.StatusCode != 200 || meta.Resource != "https://gw.example.com/mcp" {
				t.Errorf("%s: %d %+v", path, resp.StatusCode, meta)
			}
		}
		resp, err = http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("healthz: %d", resp.StatusCode)
		}
	})
}

// counter records the gateway's tool_changed counts.
type counter struct {
	noop.MeterProvider
	mu    sync.Mutex
	tools map[string]int
}

func (c *counter) Meter(string, ...metric.MeterOption) metric.Meter { return meter{c: c} }

type meter struct {
	noop.Meter
	c *counter
}

func (m meter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	if name != "axgate.gateway.tool_changed" {
		return noop.Int64Counter{}, nil
	}
	return changedCounter{c: m.c}, nil
}

type changedCounter struct {
	noop.Int64Counter
	c *counter
}

func (cc changedCounter) Add(_ context.Context, n int64, opts ...metric.AddOption) {
	attrs := metric.NewAddConfig(opts).Attributes()
	tool, _ := attrs.Value(attribute.Key("gen_ai.tool.name"))
	cc.c.mu.Lock()
	cc.c.tools[tool.AsString()] += int(n)
	cc.c.mu.Unlock()
}

// logs keeps the gateway's log records.
type logs struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestToolChanged: the upstream changes write_note's definition while the
// gateway runs and says so; the gateway disables it, tells the client,
// logs and counts it, and refuses its calls with AXGATE_TOOL_CHANGED.
func TestToolChanged(t *testing.T) {
	up, upURL := httpUpstream(t)
	mp := &counter{tools: map[string]int{}}
	var lg logs
	g := newGateway(t, gateway.Upstream{URL: upURL}, pinOf(t, upURL, "write_note"),
		gateway.WithMeterProvider(mp), gateway.WithLogger(slog.New(slog.NewTextHandler(&lg, nil))))
	url := serve(t, g)
	changed := make(chan struct{}, 10)
	cs := connect(t, url, "alice-token", &mcp.ClientOptions{
		ElicitationHandler:     accept,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	if !slices.Contains(listNames(t, cs), "write_note") {
		t.Fatal("write_note is not listed before the change")
	}
	if res := call(t, cs, "write_note", map[string]any{"name": "a", "text": "b"}); res.IsError {
		t.Fatalf("write before the change: %s", text(res))
	}

	up.rugPull()
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the client was not told that the tools changed")
	}
	if slices.Contains(listNames(t, cs), "write_note") {
		t.Error("a changed tool is still listed")
	}
	before := len(up.seenTool("write_note"))
	r := wantRefusal(t, call(t, cs, "write_note", map[string]any{"name": "a", "text": "c"}), "AXGATE_TOOL_CHANGED", "upstream_changed")
	if !strings.Contains(r.Message, "write_note") {
		t.Errorf("the refusal does not name the tool: %q", r.Message)
	}
	if len(up.seenTool("write_note")) != before {
		t.Error("a call of a changed tool reached the upstream")
	}
	// Other tools go on.
	if res := call(t, cs, "read_note", map[string]any{"name": "a"}); res.IsError {
		t.Errorf("read after the change: %s", text(res))
	}
	// A new session of another caller sees the same.
	bob := connect(t, url, "bob-token", nil)
	if slices.Contains(listNames(t, bob), "write_note") {
		t.Error("a changed tool is listed to a new session")
	}
	mp.mu.Lock()
	n := mp.tools["write_note"]
	mp.mu.Unlock()
	if n != 1 {
		t.Errorf("tool_changed counted %d for write_note, want 1", n)
	}
	if out := lg.String(); !strings.Contains(out, "upstream tool changed") || !strings.Contains(out, "tool=write_note") {
		t.Errorf("the log does not name the changed tool:\n%s", out)
	}
}

// TestPinMismatchAtStart: a tool whose definition differs from its pin when
// the gateway starts is disabled from the first call.
func TestPinMismatchAtStart(t *testing.T) {
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, strings.Repeat("0", 64))
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{ElicitationHandler: accept})
	if got, want := listNames(t, cs), []string{"read_note", "fail_note", "ask_note"}; !slices.Equal(got, want) {
		t.Errorf("lists %v, want %v", got, want)
	}
	wantRefusal(t, call(t, cs, "write_note", map[string]any{"name": "a", "text": "b"}), "AXGATE_TOOL_CHANGED", "upstream_changed")
	if len(up.seenTool("write_note")) != 0 {
		t.Error("the upstream was called")
	}
}

// TestNoPin: without upstream_sha256 the definition is not checked.
func TestNoPin(t *testing.T) {
	up, upURL := httpUpstream(t)
	up.rugPull() // changed before the gateway ever saw it: nothing to compare with
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{ElicitationHandler: accept})
	if res := call(t, cs, "write_note", map[string]any{"name": "a", "text": "b"}); res.IsError {
		t.Fatalf("unpinned write: %s", text(res))
	}
}

// TestToolsOnly: everything but tools is refused, and not announced.
func TestToolsOnly(t *testing.T) {
	_, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, "", gateway.ToolsOnly())
	cs := connect(t, serve(t, g), "alice-token", nil)
	if caps := cs.InitializeResult().Capabilities; caps.Resources != nil || caps.Prompts != nil {
		t.Errorf("announces %+v", caps)
	}
	_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "notes://readme"})
	var re *jsonrpc.Error
	if !errors.As(err, &re) || re.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("resources/read: %v, want method not found", err)
	}
	if res := call(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Errorf("read: %s", text(res))
	}
}

// TestNewFailsWithoutUpstream: the gateway does not start in front of
// nothing.
func TestNewFailsWithoutUpstream(t *testing.T) {
	m, err := manifest.Parse(manifestFor(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	for _, up := range []gateway.Upstream{{}, {URL: "http://x", Command: "y"}, {URL: "ftp://x"}, {Command: "/nonexistent/upstream"}} {
		if g, err := gateway.New(enf, up, gateway.WithConnectTimeout(2*time.Second)); err == nil {
			g.Close()
			t.Errorf("%+v: New succeeded", up)
		}
	}
	if _, err := gateway.New(enf, gateway.Upstream{URL: "http://127.0.0.1:1"}, gateway.WithBearer(authenticate, nil)); err == nil {
		t.Error("WithBearer without resource metadata was accepted")
	}
}

// stdioUpstream is the test binary as a child process speaking MCP on
// stdio.
func stdioUpstream() gateway.Upstream {
	return gateway.Upstream{Command: os.Args[0], Env: []string{upstreamEnv + "=stdio"}, Stderr: io.Discard}
}

func pidOf(t *testing.T, cs *mcp.ClientSession) int {
	t.Helper()
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "notes://pid"})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(rr.Contents[0].Text)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestStdioUpstreamRestart: a command upstream served to a local client
// (the gateway's stdio front, over in-memory pipes here): the child is
// started per session, restarted after it is killed (calls in between are
// refused as unavailable), and stopped on Close.
func TestStdioUpstreamRestart(t *testing.T) {
	g := newGateway(t, stdioUpstream(), "", gateway.WithLocalPrincipal(middleware.Principal{ID: "alice", Roles: []string{"user"}}))
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- gateway.ServeLocal(g, ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, &mcp.ClientOptions{ElicitationHandler: accept}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	if got, want := listNames(t, cs), []string{"read_note", "write_note", "fail_note", "ask_note"}; !slices.Equal(got, want) {
		t.Errorf("the local user lists %v, want %v", got, want)
	}
	if res := call(t, cs, "write_note", map[string]any{"name": "k", "text": "v"}); res.IsError {
		t.Fatalf("write: %s", text(res))
	}
	res := call(t, cs, "read_note", map[string]any{"name": "k"})
	if res.IsError || text(res) != `{"name":"k","text":"v"}` {
		t.Fatalf("read: %s", text(res))
	}

	pid := pidOf(t, cs)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, call(t, cs, "read_note", map[string]any{"name": "hello"}), "AXGATE_STORE_UNAVAILABLE", "upstream_unavailable")

	deadline := time.Now().Add(20 * time.Second)
	for {
		res := call(t, cs, "read_note", map[string]any{"name": "hello"})
		if !res.IsError {
			break
		}
		wantRefusal(t, res, "AXGATE_STORE_UNAVAILABLE", "upstream_unavailable")
		if time.Now().After(deadline) {
			t.Fatal("the upstream was not restarted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	newPID := pidOf(t, cs)
	if newPID == pid {
		t.Fatal("the same process answers after it was killed")
	}
	// A new child: the note written to the old one is gone.
	if res := call(t, cs, "read_note", map[string]any{"name": "k"}); !res.IsError {
		t.Errorf("the new child knows the old one's note: %s", text(res))
	}

	g.Close()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Error("ServeLocal did not return after Close")
	}
	for end := time.Now().Add(10 * time.Second); alive(newPID); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the child %d still runs after Close", newPID)
		}
	}
}

// TestStdioUpstreamPerSession: over HTTP, each client session has its own
// child.
func TestStdioUpstreamPerSession(t *testing.T) {
	g := newGateway(t, stdioUpstream(), "")
	url := serve(t, g)
	a := connect(t, url, "alice-token", nil)
	b := connect(t, url, "bob-token", nil)
	pa, pb := pidOf(t, a), pidOf(t, b)
	if pa == pb {
		t.Errorf("two sessions share the child %d", pa)
	}
	a.Close()
	for end := time.Now().Add(10 * time.Second); alive(pa); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the child %d of a closed session still runs", pa)
		}
	}
	if !alive(pb) {
		t.Error("closing one session stopped another's child")
	}
}

// TestStdioUpstreamAsksThePerson: a command upstream's question to the
// person during a call (elicitation) reaches the client and its answer the
// upstream. The gateway's upstream sessions ask for protocol 2025-11-25,
// with sessions, for a command upstream as for an HTTP one: on the go-sdk's
// default, the stateless 2026-07-28, a go-sdk server cannot send a request
// while it serves a call, and the question failed.
func TestStdioUpstreamAsksThePerson(t *testing.T) {
	g := newGateway(t, stdioUpstream(), "", gateway.WithLocalPrincipal(middleware.Principal{ID: "alice", Roles: []string{"user"}}), gateway.AllowUpstreamElicitation())
	cs := localSession(t, g, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "hello"}}, nil
		}})
	if res := call(t, cs, "ask_note", map[string]any{}); res.IsError || text(res) != "accept hello" {
		t.Errorf("the upstream's question did not reach the person: %s", text(res))
	}
}

// localSession serves g to a local client (the gateway's stdio front, over
// in-memory pipes) until the test ends, and returns the client's session.
func localSession(t *testing.T, g *gateway.Gateway, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go gateway.ServeLocal(g, ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestStdioSessionOneChild: one local (stdio) client session of a command
// upstream runs one child. New starts none of its own (it used to start
// one to check the pins and learn the upstream's capabilities, then the
// session started a second): the session's child, started at the client's
// initialize with what the client offers (here elicitation), checks the
// pins before the initialize is answered, so before any call. An upstream
// that does not start fails the client's initialize with why; a program
// that does not exist fails New.
func TestStdioSessionOneChild(t *testing.T) {
	local := gateway.WithLocalPrincipal(middleware.Principal{ID: "alice", Roles: []string{"user"}})
	counted := func(t *testing.T) (gateway.Upstream, func() int) {
		startsFile := filepath.Join(t.TempDir(), "starts")
		up := stdioUpstream()
		up.Env = append(up.Env, startsFileEnv+"="+startsFile)
		return up, func() int {
			raw, _ := os.ReadFile(startsFile)
			return strings.Count(string(raw), "\n")
		}
	}
	t.Run("one session, one child", func(t *testing.T) {
		up, starts := counted(t)
		g := newGateway(t, up, "", local, gateway.AllowUpstreamElicitation())
		if n := starts(); n != 0 {
			t.Errorf("New started %d children before any session", n)
		}
		cs := localSession(t, g, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "hello"}}, nil
		}})
		if res := call(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
			t.Fatalf("read: %s", text(res))
		}
		// The child was told what the client offers.
		if res := call(t, cs, "ask_note", map[string]any{}); res.IsError || text(res) != "accept hello" {
			t.Errorf("the upstream's question did not reach the person: %s", text(res))
		}
		if n := starts(); n != 1 {
			t.Errorf("one stdio session started %d children, want 1", n)
		}
	})
	t.Run("pins checked before the first call", func(t *testing.T) {
		up, starts := counted(t)
		g := newGateway(t, up, strings.Repeat("0", 64), local)
		cs := localSession(t, g, nil)
		if got := listNames(t, cs); slices.Contains(got, "write_note") {
			t.Errorf("a tool whose pin does not match is listed: %v", got)
		}
		wantRefusal(t, call(t, cs, "write_note", map[string]any{"name": "k", "text": "v"}), "AXGATE_TOOL_CHANGED", "")
		if n := starts(); n != 1 {
			t.Errorf("one stdio session started %d children, want 1", n)
		}
	})
	t.Run("an upstream that does not start", func(t *testing.T) {
		up, _ := counted(t)
		up.Env = append(up.Env, okFileEnv+"="+filepath.Join(t.TempDir(), "absent")) // the child exits 3
		g := newGateway(t, up, "", local, gateway.WithConnectTimeout(5*time.Second))
		ct, st := mcp.NewInMemoryTransports()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go gateway.ServeLocal(g, ctx, st)
		_, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, nil).Connect(ctx, ct, nil)
		if err == nil || !strings.Contains(err.Error(), "the upstream MCP server did not start: the upstream command exited (exit status 3) before it answered initialize") {
			t.Errorf("initialize: %v", err)
		}
	})
	t.Run("a program that does not exist", func(t *testing.T) {
		m, err := manifest.Parse(manifestFor(t, ""))
		if err != nil {
			t.Fatal(err)
		}
		enf, err := axgate.New(m)
		if err != nil {
			t.Fatal(err)
		}
		defer enf.Close()
		for _, up := range []gateway.Upstream{{Command: "/nonexistent/upstream"}, {Command: "axgate-no-such-upstream-program"}, {Command: t.TempDir()}} {
			if g, err := gateway.New(enf, up, local); err == nil {
				g.Close()
				t.Errorf("%+v: New succeeded", up)
			} else if !strings.Contains(err.Error(), "cannot be started") {
				t.Errorf("%+v: %v", up, err)
			}
		}
	})
}
