package mcpgate_test

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

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/wire"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/fixtures"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// The AXAG example manifest: product_search, cart_add_item, order_place
// (confirmation), account_delete (confirmation and approval), user_list.
// manifestPath is the project's full test manifest (testdata/axag).
var manifestPath = fixtures.Manifest("shop-full.json")

var alice = middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"customer"}}

func loadManifest(t testing.TB) *manifest.Manifest {
	t.Helper()
	m, err := manifest.LoadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newEnforcer enforces the example manifest. Its preconditions and
// postconditions are prose with no check bound to them: allowed on purpose
// here, since the adapter is under test, not the conditions.
func newEnforcer(t testing.TB, opts ...axgate.Option) (*axgate.Enforcer, error) {
	t.Helper()
	return axgate.New(loadManifest(t), append([]axgate.Option{axgate.WithUnboundConditions()}, opts...)...)
}

// seen records what the tool saw of the calls that reached it.
type seen struct {
	mu    sync.Mutex
	calls []*middleware.Call
}

func (s *seen) last() *middleware.Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) == 0 {
		return nil
	}
	return s.calls[len(s.calls)-1]
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// echo is every tool: it answers what it was called with.
func (s *seen) echo() middleware.Invoker {
	return middleware.InvokerFunc(func(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
		s.mu.Lock()
		s.calls = append(s.calls, call)
		s.mu.Unlock()
		args, err := call.Args()
		if err != nil {
			return middleware.Result{}, err
		}
		return middleware.Result{Value: map[string]any{
			"tool":      call.Tool,
			"args":      args,
			"principal": call.Principal.ID,
			"elicited":  call.Facts.ConfirmationElicited,
			"trace_id":  trace.SpanContextFromContext(ctx).TraceID().String(),
		}}, nil
	})
}

func handlersFor(e *axgate.Enforcer, inv middleware.Invoker) mcpgate.Handlers {
	h := mcpgate.Handlers{}
	for _, t := range e.Tools() {
		h[t.Name] = inv
	}
	return h
}

// appendStage adds a stage at the end of the pre-execution chain.
func appendStage(s middleware.Stage) axgate.Option {
	return axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage { return append(std, s) })
}

type fixture struct {
	enf  *axgate.Enforcer
	seen *seen
	cs   *mcp.ClientSession
}

type setup struct {
	enfOpts    []axgate.Option
	gateOpts   []mcpgate.Option
	clientOpts *mcp.ClientOptions
	protocol   string
}

// connect serves the manifest over the SDK's in-memory transport and returns
// a connected client session.
func connect(t *testing.T, s setup) *fixture {
	t.Helper()
	enf, err := newEnforcer(t, s.enfOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	f := &fixture{enf: enf, seen: &seen{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v0.0.1"}, nil)
	if err := mcpgate.AddTools(server, enf, handlersFor(enf, f.seen.echo()), s.gateOpts...); err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0.0.1"}, s.clientOpts)
	f.cs, err = client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: s.protocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.cs.Close() })
	return f
}

func asAlice(opts ...mcpgate.Option) []mcpgate.Option {
	return append([]mcpgate.Option{mcpgate.WithPrincipal(mcpgate.StaticPrincipal(alice))}, opts...)
}

func (f *fixture) call(t *testing.T, tool, args string, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := f.callErr(tool, args, meta)
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	return res
}

func (f *fixture) callErr(tool, args string, meta mcp.Meta) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return f.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args), Meta: meta})
}

// envelope is the AXAG error envelope as a client decodes it.
type envelope struct {
	Error struct {
		Code    string         `json:"code"`
		Type    string         `json:"type"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

// refusal asserts res is a refusal and returns its envelope.
func refusal(t *testing.T, res *mcp.CallToolResult) envelope {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want a refusal (isError), got %s", texts(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil || env.Error.Code == "" {
		t.Fatalf("structuredContent is not an AXAG envelope: %s (%v)", raw, err)
	}
	if len(res.Content) != 2 {
		t.Fatalf("want a readable text and the envelope as text, got %d blocks", len(res.Content))
	}
	var again envelope
	if err := json.Unmarshal([]byte(res.Content[1].(*mcp.TextContent).Text), &again); err != nil || again.Error.Code != env.Error.Code {
		t.Errorf("second text block is not the envelope: %v", err)
	}
	return env
}

func texts(res *mcp.CallToolResult) string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n")
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("want success, got refusal: %s", texts(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("structuredContent %s: %v", raw, err)
	}
	return m
}

func TestListToolsCarriesSchemasAnnotationsAndSafety(t *testing.T) {
	f := connect(t, setup{gateOpts: asAlice()})
	res, err := f.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		byName[tl.Name] = tl
	}
	for _, want := range f.enf.Tools() {
		got := byName[want.Name]
		if got == nil {
			t.Fatalf("tool %s not listed", want.Name)
		}
		if got.Description != want.Description {
			t.Errorf("%s description %q, want %q", want.Name, got.Description, want.Description)
		}
		gotSchema, _ := json.Marshal(got.InputSchema)
		wantSchema, _ := json.Marshal(want.InputSchema)
		if string(gotSchema) != string(wantSchema) {
			t.Errorf("%s inputSchema\n got %s\nwant %s", want.Name, gotSchema, wantSchema)
		}
		safety, _ := got.Meta["axag/safety"].(map[string]any)
		if safety["intent"] != want.Safety.Intent {
			t.Errorf("%s _meta axag/safety intent = %v, want %s", want.Name, safety["intent"], want.Safety.Intent)
		}
	}
	for _, c := range []struct {
		tool                          string
		readOnly, destructive, idempt bool
	}{
		{"product_search", true, false, true},
		{"cart_add_item", false, false, false},
		{"order_place", false, true, false},
		{"account_delete", false, true, true},
	} {
		a := byName[c.tool].Annotations
		if a == nil || a.ReadOnlyHint != c.readOnly || a.DestructiveHint == nil || *a.DestructiveHint != c.destructive || a.IdempotentHint != c.idempt {
			t.Errorf("%s annotations = %+v, want readOnly=%v destructive=%v idempotent=%v", c.tool, a, c.readOnly, c.destructive, c.idempt)
		}
	}
}

func TestHappyPath(t *testing.T) {
	f := connect(t, setup{gateOpts: asAlice()})
	res := f.call(t, "product_search", `{"query":"lamp","limit":5}`, nil)
	out := structured(t, res)
	if out["tool"] != "product_search" || out["principal"] != "alice" {
		t.Errorf("tool saw %v", out)
	}
	if args := out["args"].(map[string]any); args["query"] != "lamp" {
		t.Errorf("args = %v", args)
	}
	if !strings.Contains(texts(res), `"query":"lamp"`) {
		t.Errorf("text content does not carry the JSON result: %s", texts(res))
	}
}

func TestParameterRefusalListsEveryViolation(t *testing.T) {
	f := connect(t, setup{gateOpts: asAlice()})
	res := f.call(t, "product_search", `{"limit":500,"category":"toys"}`, nil)
	env := refusal(t, res)
	if env.Error.Type != "parameter_error" && env.Error.Type != "constraint_error" {
		t.Errorf("type = %s", env.Error.Type)
	}
	vs, _ := env.Error.Details["violations"].([]any)
	var paths []string
	for _, v := range vs {
		paths = append(paths, v.(map[string]any)["path"].(string))
	}
	slices.Sort(paths)
	if !slices.Equal(paths, []string{"", "/category", "/limit"}) && !slices.Equal(paths, []string{"/category", "/limit", "/query"}) {
		t.Errorf("violation paths = %v, want the missing query, /category and /limit", paths)
	}
	text := texts(res)
	for _, want := range []string{"Refused (AXAG_", "/limit", "/category", "Next step:"} {
		if !strings.Contains(text, want) {
			t.Errorf("readable text lacks %q:\n%s", want, text)
		}
	}
	if f.seen.count() != 0 {
		t.Error("the tool ran for a refused call")
	}
}

func TestParameterRefusalAsJSONRPCInvalidParams(t *testing.T) {
	f := connect(t, setup{gateOpts: asAlice(mcpgate.WithJSONRPCParamErrors())})
	_, err := f.callErr("product_search", `{"query":"lamp","limit":500}`, nil)
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	if we.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("code = %d, want -32602", we.Code)
	}
	var data struct {
		Code    string            `json:"code"`
		Errors  []axerr.Violation `json:"errors"`
		Details map[string]any    `json:"details"`
	}
	if err := json.Unmarshal(we.Data, &data); err != nil {
		t.Fatalf("data %s: %v", we.Data, err)
	}
	if data.Code != string(axerr.CodeOutOfRange) || len(data.Errors) != 1 || data.Errors[0].Path != "/limit" {
		t.Errorf("data = %s", we.Data)
	}
	// A refusal that is not about parameters stays a tool result.
	f2 := connect(t, setup{gateOpts: []mcpgate.Option{mcpgate.WithJSONRPCParamErrors()}})
	res := f2.call(t, "product_search", `{"query":"lamp"}`, nil)
	if env := refusal(t, res); env.Error.Code != string(axerr.CodeUnauthenticated) {
		t.Errorf("code = %s, want AXGATE_UNAUTHENTICATED", env.Error.Code)
	}
}

// TestEveryRefusalKind renders each code any gate can answer with: isError,
// the envelope as structuredContent with the code's type and agent action,
// and a text naming the code; parameter codes become -32602 on request.
func TestEveryRefusalKind(t *testing.T) {
	var refuseWith axerr.Code
	gate := middleware.Stage{Name: "test", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		e := axerr.New(refuseWith, "refused by the test gate").WithIntent(call.Intent()).With("reason", "testing")
		if refuseWith.IsParameterError() {
			e.Violations = []axerr.Violation{{Path: "/query", Message: "bad", Keyword: "type", Code: refuseWith}}
		}
		if refuseWith == axerr.CodeRateLimited {
			e.RetryAfter = 1500 * time.Millisecond
		}
		return middleware.Result{}, e
	}}
	plain := connect(t, setup{enfOpts: []axgate.Option{appendStage(gate)}, gateOpts: asAlice()})
	rpc := connect(t, setup{enfOpts: []axgate.Option{appendStage(gate)}, gateOpts: asAlice(mcpgate.WithJSONRPCParamErrors())})
	for _, code := range axerr.Codes() {
		t.Run(string(code), func(t *testing.T) {
			refuseWith = code
			res := plain.call(t, "product_search", `{"query":"lamp"}`, nil)
			env := refusal(t, res)
			if env.Error.Code != string(code) || env.Error.Type != string(code.Type()) {
				t.Errorf("envelope code/type = %s/%s", env.Error.Code, env.Error.Type)
			}
			d := env.Error.Details
			if d["intent"] != "product.search" || d["gate"] != "test" || d["reason"] != "testing" || d["retryable"] != code.Retryable() {
				t.Errorf("details = %v", d)
			}
			if a := code.AgentAction(); a != "" && d["agent_action"] != a {
				t.Errorf("agent_action = %v", d["agent_action"])
			}
			text := texts(res)
			if !strings.Contains(text, "Refused ("+string(code)+"): refused by the test gate") {
				t.Errorf("text = %s", text)
			}
			if code == axerr.CodeRateLimited && (d["retry_after"] != float64(2) || !strings.Contains(text, "Retry after: 2 s")) {
				t.Errorf("retry_after = %v, text %s", d["retry_after"], text)
			}

			res, err := rpc.callErr("product_search", `{"query":"lamp"}`, nil)
			var we *jsonrpc.Error
			if code.IsParameterError() {
				if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams || !strings.Contains(string(we.Data), `"path":"/query"`) {
					t.Errorf("want -32602 with the violation in data, got %v (%v)", err, we)
				}
				return
			}
			if err != nil {
				t.Fatalf("a non-parameter refusal became a protocol error: %v", err)
			}
			if env := refusal(t, res); env.Error.Code != string(code) {
				t.Errorf("code = %s", env.Error.Code)
			}
		})
	}
	if plain.seen.count()+rpc.seen.count() != 0 {
		t.Error("the tool ran for a refused call")
	}
}

func TestUnknownToolIsAProtocolError(t *testing.T) {
	f := connect(t, setup{gateOpts: asAlice()})
	_, err := f.callErr("order_cancel", `{}`, nil)
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("want the SDK's unknown-tool error, got %v", err)
	}
}

func TestNoAuthenticationIsRefused(t *testing.T) {
	f := connect(t, setup{})
	env := refusal(t, f.call(t, "product_search", `{"query":"lamp"}`, nil))
	if env.Error.Code != string(axerr.CodeUnauthenticated) {
		t.Errorf("code = %s, want AXGATE_UNAUTHENTICATED", env.Error.Code)
	}
	if f.seen.count() != 0 {
		t.Error("the tool ran")
	}
}

// capture records the call as the gates see it, then passes it on.
func capture(into **middleware.Call) middleware.Stage {
	return middleware.Stage{Name: "capture", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		c := *call
		*into = &c
		return next.Invoke(ctx, call)
	}}
}

func TestCredentialsFromMeta(t *testing.T) {
	var got *middleware.Call
	f := connect(t, setup{enfOpts: []axgate.Option{appendStage(capture(&got))}, gateOpts: asAlice()})
	meta := mcp.Meta{
		wire.MetaConfirmation:   "conf.jwt",
		wire.MetaApprovals:      []string{"a1.jwt", "a2.jwt"},
		wire.MetaIdempotencyKey: "key-1",
		wire.MetaTenant:         "acme",
	}
	structured(t, f.call(t, "product_search", `{"query":"lamp"}`, meta))
	want := middleware.Credentials{Confirmation: "conf.jwt", Approvals: []string{"a1.jwt", "a2.jwt"}, IdempotencyKey: "key-1", ClaimedTenant: "acme"}
	if got == nil || got.Credentials.Confirmation != want.Confirmation || !slices.Equal(got.Credentials.Approvals, want.Approvals) ||
		got.Credentials.IdempotencyKey != want.IdempotencyKey || got.Credentials.ClaimedTenant != want.ClaimedTenant {
		t.Fatalf("credentials = %+v, want %+v", got.Credentials, want)
	}
	if got.Principal.ID != "alice" {
		t.Errorf("principal = %+v", got.Principal)
	}

	for name, meta := range map[string]mcp.Meta{
		"confirmation not a string": {wire.MetaConfirmation: 42},
		"approvals not strings":     {wire.MetaApprovals: []any{"a", 1}},
		"misspelled key":            {"axag/confirmaton": "conf.jwt"},
	} {
		t.Run(name, func(t *testing.T) {
			env := refusal(t, f.call(t, "product_search", `{"query":"lamp"}`, meta))
			if env.Error.Code != string(axerr.CodeInvalidArguments) || env.Error.Details["meta_key"] == nil {
				t.Errorf("envelope = %+v", env.Error)
			}
		})
	}
}

func TestArgumentsAreNeverThePrincipal(t *testing.T) {
	var got *middleware.Call
	enf, err := newEnforcer(t, axgate.WithUnknownParams(), appendStage(capture(&got)))
	if err != nil {
		t.Fatal(err)
	}
	h := mcpgate.ToolHandler(enf, (&seen{}).echo(), asAlice()...)
	res, err := h(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
		Name: "product_search", Arguments: json.RawMessage(`{"query":"x","principal":"mallory","user_id":"mallory","tenant":"evil"}`),
	}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %s", err, texts(res))
	}
	if got.Principal.ID != "alice" || got.Principal.Tenant != "acme" {
		t.Errorf("principal = %+v", got.Principal)
	}
}

func TestTraceparentIsContinued(t *testing.T) {
	f := connect(t, setup{gateOpts: asAlice()})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	out := structured(t, f.call(t, "product_search", `{"query":"lamp"}`, mcp.Meta{
		"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01",
	}))
	if out["trace_id"] != traceID {
		t.Errorf("tool's trace id = %v, want %s", out["trace_id"], traceID)
	}
}

// bearer is a test token verifier: "Bearer alice" is alice of acme.
func bearer(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	if token != "alice-token" {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{
		UserID: "alice", Scopes: []string{"read"}, Expiration: time.Now().Add(time.Hour),
		Extra: map[string]any{"tenant": "acme", "roles": []any{"customer", "beta"}},
	}, nil
}

type headerTransport struct {
	h    http.Header
	base http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.h {
		r.Header[k] = vs
	}
	return t.base.RoundTrip(r)
}

func TestStreamableHTTPPrincipalAndHeaderCredentials(t *testing.T) {
	var got *middleware.Call
	enf, err := newEnforcer(t, appendStage(capture(&got)))
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	server := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v0.0.1"}, nil)
	if err := mcpgate.AddTools(server, enf, handlersFor(enf, (&seen{}).echo())); err != nil {
		t.Fatal(err)
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ts := httptest.NewServer(auth.RequireBearerToken(bearer, nil)(handler))
	defer ts.Close()

	headers := http.Header{
		"Authorization":           {"Bearer alice-token"},
		wire.HeaderConfirmation:   {"conf.jwt"},
		wire.HeaderApproval:       {"a1.jwt, a2.jwt", "a3.jwt"},
		wire.HeaderIdempotencyKey: {"key-h"},
		wire.HeaderTenant:         {"acme"},
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0.0.1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   ts.URL,
		HTTPClient: &http.Client{Transport: headerTransport{headers, http.DefaultTransport}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name: "product_search", Arguments: map[string]any{"query": "lamp"},
		Meta: mcp.Meta{wire.MetaIdempotencyKey: "key-meta"},
	})
	if err != nil {
		t.Fatal(err)
	}
	structured(t, res)
	p := got.Principal
	if p.ID != "alice" || p.Tenant != "acme" || !slices.Equal(p.Roles, []string{"customer", "beta"}) || !slices.Equal(p.Scopes, []string{"read"}) {
		t.Errorf("principal = %+v", p)
	}
	c := got.Credentials
	if c.Confirmation != "conf.jwt" || !slices.Equal(c.Approvals, []string{"a1.jwt", "a2.jwt", "a3.jwt"}) || c.ClaimedTenant != "acme" {
		t.Errorf("credentials = %+v", c)
	}
	if c.IdempotencyKey != "key-meta" {
		t.Errorf("idempotency key = %q, want _meta's over the header's", c.IdempotencyKey)
	}
}

func TestAddToolsNamesMissingAndUnknownHandlers(t *testing.T) {
	enf, err := newEnforcer(t)
	if err != nil {
		t.Fatal(err)
	}
	h := handlersFor(enf, (&seen{}).echo())
	delete(h, "order_place")
	h["order_cancel"] = (&seen{}).echo()
	server := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v0"}, nil)
	err = mcpgate.AddTools(server, enf, h)
	if err == nil || !strings.Contains(err.Error(), "no handler for order_place") || !strings.Contains(err.Error(), "order_cancel") {
		t.Errorf("err = %v", err)
	}
}

func TestToolResultPassesThrough(t *testing.T) {
	enf, err := newEnforcer(t)
	if err != nil {
		t.Fatal(err)
	}
	own := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "3 lamps"}}}
	h := mcpgate.ToolHandler(enf, middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: own}, nil
	}), asAlice()...)
	res, err := h(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "product_search", Arguments: json.RawMessage(`{"query":"x"}`)}})
	if err != nil || res != own {
		t.Errorf("res = %v, %v", res, err)
	}
}

func TestToolFailureIsARefusalWithoutInternals(t *testing.T) {
	enf, err := newEnforcer(t)
	if err != nil {
		t.Fatal(err)
	}
	h := mcpgate.ToolHandler(enf, middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{}, errors.New("pq: connection refused to 10.0.0.7")
	}), asAlice()...)
	res, err := h(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "product_search", Arguments: json.RawMessage(`{"query":"x"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	env := refusal(t, res)
	if env.Error.Code != string(axerr.CodeToolFailed) || strings.Contains(texts(res), "10.0.0.7") {
		t.Errorf("refusal = %+v / %s", env.Error, texts(res))
	}
}

func TestBearerVerifierCarriesTheAuthenticatorsPrincipal(t *testing.T) {
	var got *middleware.Call
	enf, err := newEnforcer(t, appendStage(capture(&got)))
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	server := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v0.0.1"}, nil)
	if err := mcpgate.AddTools(server, enf, handlersFor(enf, (&seen{}).echo())); err != nil {
		t.Fatal(err)
	}
	exp := float64(time.Now().Add(time.Hour).Unix())
	authenticate := func(r *http.Request) (middleware.Principal, error) {
		if r.Header.Get("Authorization") != "Bearer bob-token" {
			return middleware.Principal{}, axerr.New(axerr.CodeUnauthenticated, "bad token")
		}
		return middleware.Principal{ID: "bob", Tenant: "globex", Roles: []string{"admin"}, Claims: map[string]any{"exp": exp, "org": "globex"}}, nil
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ts := httptest.NewServer(auth.RequireBearerToken(mcpgate.BearerVerifier(authenticate), nil)(handler))
	defer ts.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connectAs := func(token string) (*mcp.ClientSession, error) {
		hc := &http.Client{Transport: headerTransport{http.Header{"Authorization": {"Bearer " + token}}, http.DefaultTransport}}
		return mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: hc}, nil)
	}
	if _, err := connectAs("mallory-token"); err == nil {
		t.Fatal("a bad bearer token connected")
	}
	cs, err := connectAs("bob-token")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "user_list", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	structured(t, res)
	if p := got.Principal; p.ID != "bob" || p.Tenant != "globex" || !slices.Equal(p.Roles, []string{"admin"}) || p.Claims["org"] != "globex" {
		t.Errorf("principal = %+v", p)
	}
}

// TestAddToolsRefusesAWrappedTool: a handler the enforcer already wrapped
// is refused at construction, naming it.
func TestAddToolsRefusesAWrappedTool(t *testing.T) {
	enf, err := newEnforcer(t)
	if err != nil {
		t.Fatal(err)
	}
	h := handlersFor(enf, (&seen{}).echo())
	h["order_place"] = enf.Wrap(h["order_place"])
	server := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v0"}, nil)
	if err := mcpgate.AddTools(server, enf, h); !errors.Is(err, axgate.ErrWrapped) || !strings.Contains(err.Error(), `"order_place"`) {
		t.Fatalf("AddTools with a wrapped tool: %v; want axgate.ErrWrapped naming the handler", err)
	}
}
