package mcpgo_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/trace"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgo"
	"github.com/axgate/axgate/adapters/wire"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/fixtures"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// manifestPath is the project's full test manifest (testdata/axag).
var manifestPath = fixtures.Manifest("shop-full.json")

var alice = middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"customer"}}

const orderArgs = `{"cart_id":"3f0c2a8e-9b1d-4c56-8f3e-2a1b0c9d8e7f","shipping_address_id":"home"}`

func newEnforcer(t testing.TB, opts ...axgate.Option) *axgate.Enforcer {
	t.Helper()
	m, err := manifest.LoadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	// The manifest's prose conditions have no checks here: the adapter is
	// under test.
	e, err := axgate.New(m, append([]axgate.Option{axgate.WithUnboundConditions()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// tools counts handler runs and answers what each saw.
type tools struct {
	mu   sync.Mutex
	runs int
}

func (tl *tools) handler(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	tl.mu.Lock()
	tl.runs++
	tl.mu.Unlock()
	if req.Params.Name == "user_list" {
		return mcp.NewToolResultError("the user directory is down"), nil
	}
	out := map[string]any{"tool": req.Params.Name, "args": req.GetArguments()}
	return mcp.NewToolResultStructured(out, "ok"), nil
}

func (tl *tools) count() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.runs
}

func handlers(e *axgate.Enforcer, tl *tools) map[string]server.ToolHandlerFunc {
	h := map[string]server.ToolHandlerFunc{}
	for _, t := range e.Tools() {
		h[t.Name] = tl.handler
	}
	return h
}

func newServer(t *testing.T, e *axgate.Enforcer, tl *tools, opts ...mcpgo.Option) *server.MCPServer {
	t.Helper()
	s := server.NewMCPServer("shop", "v0.0.1", server.WithToolHandlerMiddleware(mcpgo.Middleware(e, opts...)))
	if err := mcpgo.AddTools(s, e, handlers(e, tl)); err != nil {
		t.Fatal(err)
	}
	return s
}

func inProcess(t *testing.T, s *server.MCPServer) *client.Client {
	t.Helper()
	c, err := client.NewInProcessClient(s)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	return c
}

func start(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "agent", Version: "v0"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
}

func call(t *testing.T, c *client.Client, tool, args string, meta map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = json.RawMessage(args)
	if meta != nil {
		req.Params.Meta = &mcp.Meta{AdditionalFields: meta}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	return res
}

type envelope struct {
	Error struct {
		Code    string         `json:"code"`
		Type    string         `json:"type"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

func refusal(t *testing.T, res *mcp.CallToolResult) envelope {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want a refusal, got %+v", res.Content)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil || env.Error.Code == "" {
		t.Fatalf("structuredContent %s is not an AXAG envelope (%v)", raw, err)
	}
	if len(res.Content) != 2 || !strings.HasPrefix(text(res, 0), "Refused ("+env.Error.Code+")") {
		t.Fatalf("content = %+v", res.Content)
	}
	return env
}

func text(res *mcp.CallToolResult, i int) string {
	if i >= len(res.Content) {
		return ""
	}
	tc, _ := mcp.AsTextContent(res.Content[i])
	if tc == nil {
		return ""
	}
	return tc.Text
}

func asAlice() mcpgo.Option { return mcpgo.WithPrincipal(mcpgo.StaticPrincipal(alice)) }

func TestListedToolsCarrySchemaAnnotationsAndSafety(t *testing.T) {
	e := newEnforcer(t)
	c := inProcess(t, newServer(t, e, &tools{}, asAlice()))
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]mcp.Tool{}
	for _, tl := range res.Tools {
		byName[tl.Name] = tl
	}
	search, place := byName["product_search"], byName["order_place"]
	if search.Annotations.ReadOnlyHint == nil || !*search.Annotations.ReadOnlyHint {
		t.Errorf("product_search annotations = %+v", search.Annotations)
	}
	if place.Annotations.DestructiveHint == nil || !*place.Annotations.DestructiveHint {
		t.Errorf("order_place annotations = %+v", place.Annotations)
	}
	want, _ := e.Tool("product_search")
	got, _ := json.Marshal(search.InputSchema)
	if !strings.Contains(string(got), `"query"`) || len(want.InputSchema) == 0 {
		t.Errorf("inputSchema = %s", got)
	}
	if place.Meta == nil || place.Meta.AdditionalFields["axag/safety"] == nil {
		t.Errorf("order_place _meta = %+v", place.Meta)
	}
}

func TestHappyPathAndParameterRefusal(t *testing.T) {
	tl := &tools{}
	c := inProcess(t, newServer(t, newEnforcer(t), tl, asAlice()))
	res := call(t, c, "product_search", `{"query":"lamp"}`, nil)
	if res.IsError || tl.count() != 1 {
		t.Fatalf("search: %+v", res)
	}
	out, _ := res.StructuredContent.(map[string]any)
	if out["tool"] != "product_search" {
		t.Errorf("structured = %v", res.StructuredContent)
	}

	env := refusal(t, call(t, c, "product_search", `{"limit":500,"category":"toys"}`, nil))
	vs, _ := env.Error.Details["violations"].([]any)
	if len(vs) != 3 {
		t.Errorf("violations = %v, want the missing query, /limit and /category", vs)
	}
	if tl.count() != 1 {
		t.Error("the handler ran for a refused call")
	}
}

func TestEveryRefusalKind(t *testing.T) {
	var refuseWith axerr.Code
	gate := middleware.Stage{Name: "test", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		e := axerr.New(refuseWith, "refused by the test gate").WithIntent(call.Intent())
		if refuseWith.IsParameterError() {
			e.Violations = []axerr.Violation{{Path: "/query", Message: "bad", Keyword: "type", Code: refuseWith}}
		}
		return middleware.Result{}, e
	}}
	e := newEnforcer(t, axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage { return append(std, gate) }))
	tl := &tools{}
	c := inProcess(t, newServer(t, e, tl, asAlice()))
	for _, code := range axerr.Codes() {
		t.Run(string(code), func(t *testing.T) {
			refuseWith = code
			res := call(t, c, "product_search", `{"query":"lamp"}`, nil)
			env := refusal(t, res)
			if env.Error.Code != string(code) || env.Error.Type != string(code.Type()) || env.Error.Details["gate"] != "test" {
				t.Errorf("envelope = %+v", env.Error)
			}
			if code.IsParameterError() && !strings.Contains(text(res, 0), "- /query: bad") {
				t.Errorf("text = %s", text(res, 0))
			}
		})
	}
	if tl.count() != 0 {
		t.Error("the handler ran for a refused call")
	}
}

func TestNoPrincipalIsRefused(t *testing.T) {
	tl := &tools{}
	c := inProcess(t, newServer(t, newEnforcer(t), tl))
	if env := refusal(t, call(t, c, "product_search", `{"query":"lamp"}`, nil)); env.Error.Code != string(axerr.CodeUnauthenticated) {
		t.Errorf("code = %s", env.Error.Code)
	}
	if tl.count() != 0 {
		t.Error("the handler ran")
	}
}

func TestToolOutsideTheManifestIsRefused(t *testing.T) {
	e := newEnforcer(t)
	tl := &tools{}
	s := newServer(t, e, tl, asAlice())
	s.AddTool(mcp.NewTool("order_cancel"), tl.handler)
	c := inProcess(t, s)
	if env := refusal(t, call(t, c, "order_cancel", `{}`, nil)); env.Error.Code != string(axerr.CodeIntentNotFound) {
		t.Errorf("code = %s", env.Error.Code)
	}
}

func TestToolsOwnErrorResultPassesThrough(t *testing.T) {
	c := inProcess(t, newServer(t, newEnforcer(t), &tools{}, asAlice()))
	res := call(t, c, "user_list", `{}`, nil)
	if !res.IsError || text(res, 0) != "the user directory is down" {
		t.Errorf("res = %+v", res)
	}
}

func TestConfirmationTokenFromMeta(t *testing.T) {
	e := newEnforcer(t)
	tl := &tools{}
	c := inProcess(t, newServer(t, e, tl, asAlice()))
	env := refusal(t, call(t, c, "order_place", orderArgs, nil))
	if env.Error.Code != string(axerr.CodeConfirmationMissing) || env.Error.Details["confirmation_message"] == nil {
		t.Fatalf("refusal = %+v", env.Error)
	}
	token, _, err := e.IssueConfirmation(context.Background(), alice, "order_place", json.RawMessage(orderArgs))
	if err != nil {
		t.Fatal(err)
	}
	if res := call(t, c, "order_place", orderArgs, map[string]any{wire.MetaConfirmation: token}); res.IsError {
		t.Fatalf("confirmed call refused: %s", text(res, 0))
	}
	env = refusal(t, call(t, c, "order_place", orderArgs, map[string]any{wire.MetaConfirmation: token}))
	if env.Error.Details["reason"] != "already_used" {
		t.Errorf("replay: %+v", env.Error)
	}
	if env := refusal(t, call(t, c, "order_place", orderArgs, map[string]any{wire.MetaConfirmation: 7})); env.Error.Code != string(axerr.CodeInvalidArguments) {
		t.Errorf("a token of the wrong type: %+v", env.Error)
	}
	if tl.count() != 1 {
		t.Errorf("handler ran %d times", tl.count())
	}
}

func TestTraceparentIsContinued(t *testing.T) {
	var traceID string
	e := newEnforcer(t)
	s := server.NewMCPServer("shop", "v0", server.WithToolHandlerMiddleware(mcpgo.Middleware(e, asAlice())))
	h := handlers(e, &tools{})
	h["product_search"] = func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		traceID = trace.SpanContextFromContext(ctx).TraceID().String()
		return mcp.NewToolResultText("ok"), nil
	}
	if err := mcpgo.AddTools(s, e, h); err != nil {
		t.Fatal(err)
	}
	c := inProcess(t, s)
	const want = "4bf92f3577b34da6a3ce929d0e0e4736"
	call(t, c, "product_search", `{"query":"lamp"}`, map[string]any{"traceparent": "00-" + want + "-00f067aa0ba902b7-01"})
	if traceID != want {
		t.Errorf("trace id = %s, want %s", traceID, want)
	}
}

// TestStreamableHTTPPrincipalAndHeaders authenticates over streamable HTTP
// with HTTPContextFunc and reads credentials from the headers.
func TestStreamableHTTPPrincipalAndHeaders(t *testing.T) {
	var got *middleware.Call
	capture := middleware.Stage{Name: "capture", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		c := *call
		got = &c
		return next.Invoke(ctx, call)
	}}
	e := newEnforcer(t, axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage { return append(std, capture) }))
	tl := &tools{}
	s := newServer(t, e, tl)
	authenticate := func(r *http.Request) (middleware.Principal, error) {
		if r.Header.Get("Authorization") != "Bearer alice-token" {
			return middleware.Principal{}, errors.New("bad token")
		}
		return alice, nil
	}
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithHTTPContextFunc(mcpgo.HTTPContextFunc(authenticate))))
	defer ts.Close()

	connect := func(headers map[string]string) *client.Client {
		c, err := client.NewStreamableHttpClient(ts.URL+"/mcp", transport.WithHTTPHeaders(headers))
		if err != nil {
			t.Fatal(err)
		}
		start(t, c)
		return c
	}
	anon := connect(map[string]string{"Authorization": "Bearer mallory"})
	if env := refusal(t, call(t, anon, "product_search", `{"query":"lamp"}`, nil)); env.Error.Code != string(axerr.CodeUnauthenticated) {
		t.Errorf("bad bearer: %+v", env.Error)
	}

	c := connect(map[string]string{
		"Authorization":           "Bearer alice-token",
		wire.HeaderConfirmation:   "conf.jwt",
		wire.HeaderApproval:       "a1.jwt, a2.jwt",
		wire.HeaderIdempotencyKey: "key-h",
		wire.HeaderTenant:         "acme",
	})
	if res := call(t, c, "product_search", `{"query":"lamp"}`, map[string]any{wire.MetaIdempotencyKey: "key-meta"}); res.IsError {
		t.Fatalf("search refused: %s", text(res, 0))
	}
	if got.Principal.ID != "alice" || got.Principal.Tenant != "acme" {
		t.Errorf("principal = %+v", got.Principal)
	}
	cr := got.Credentials
	if cr.Confirmation != "conf.jwt" || !slices.Equal(cr.Approvals, []string{"a1.jwt", "a2.jwt"}) || cr.ClaimedTenant != "acme" || cr.IdempotencyKey != "key-meta" {
		t.Errorf("credentials = %+v", cr)
	}
}
