package eino_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/eino"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/fixtures"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// manifestPath is the project's full test manifest (testdata/axag).
var manifestPath = fixtures.Manifest("shop-full.json")

var alice = middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"customer"}}

const orderArgs = `{"cart_id":"3f0c2a8e-9b1d-4c56-8f3e-2a1b0c9d8e7f","shipping_address_id":"home"}`

func newEnforcer(t *testing.T, opts ...axgate.Option) *axgate.Enforcer {
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

// shopTool is an invokable tool that counts its runs.
type shopTool struct {
	name string
	mu   sync.Mutex
	runs int
}

func (s *shopTool) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: s.name, Desc: s.name}, nil
}

func (s *shopTool) InvokableRun(_ context.Context, args string, _ ...tool.Option) (string, error) {
	s.mu.Lock()
	s.runs++
	s.mu.Unlock()
	return `{"tool": "` + s.name + `", "ok": true}`, nil
}

func (s *shopTool) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs
}

type fixture struct {
	node  *compose.ToolsNode
	tools map[string]*shopTool
}

func newFixture(t *testing.T, e *axgate.Enforcer, opts ...eino.Option) *fixture {
	t.Helper()
	f := &fixture{tools: map[string]*shopTool{}}
	var base []tool.BaseTool
	for _, n := range []string{"product_search", "order_place", "coupon_guess"} {
		f.tools[n] = &shopTool{name: n}
		base = append(base, f.tools[n])
	}
	var err error
	f.node, err = compose.NewToolNode(context.Background(), &compose.ToolsNodeConfig{
		Tools:               base,
		ToolCallMiddlewares: []compose.ToolMiddleware{eino.Middleware(e, opts...)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// call runs one tool call as the model would ask for it and returns what
// the model reads back.
func (f *fixture) call(t *testing.T, ctx context.Context, name, args string) string {
	t.Helper()
	msg := schema.AssistantMessage("", []schema.ToolCall{{ID: "call-1", Function: schema.FunctionCall{Name: name, Arguments: args}}})
	out, err := f.node.Invoke(ctx, msg)
	if err != nil {
		t.Fatalf("tools node: %v", err)
	}
	if len(out) != 1 {
		t.Fatalf("want one tool message, got %d", len(out))
	}
	return out[0].Content
}

type envelope struct {
	Error struct {
		Code    string         `json:"code"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

func refusal(t *testing.T, s string) envelope {
	t.Helper()
	var env envelope
	if err := json.Unmarshal([]byte(s), &env); err != nil || env.Error.Code == "" {
		t.Fatalf("want the AXAG envelope, got %s", s)
	}
	return env
}

func asAlice() context.Context { return eino.ContextWithPrincipal(context.Background(), alice) }

func TestRefusalThenSuccess(t *testing.T) {
	f := newFixture(t, newEnforcer(t))
	env := refusal(t, f.call(t, asAlice(), "product_search", `{"query": 7, "limit": 500}`))
	if vs, _ := env.Error.Details["violations"].([]any); len(vs) != 2 {
		t.Errorf("violations = %v", env.Error.Details["violations"])
	}
	got := f.call(t, asAlice(), "product_search", `{"query": "lamp"}`)
	if got != `{"tool": "product_search", "ok": true}` {
		t.Errorf("the tool's output changed on its way: %s", got)
	}
	if n := f.tools["product_search"].count(); n != 1 {
		t.Errorf("the tool ran %d times", n)
	}
}

func TestEveryRefusalKindIsTheToolOutput(t *testing.T) {
	var refuseWith axerr.Code
	gate := middleware.Stage{Name: "test", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		return middleware.Result{}, axerr.New(refuseWith, "refused by the test gate").WithIntent(call.Intent())
	}}
	f := newFixture(t, newEnforcer(t, axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage { return append(std, gate) })))
	for _, c := range axerr.Codes() {
		refuseWith = c
		env := refusal(t, f.call(t, asAlice(), "product_search", `{"query": "lamp"}`))
		if env.Error.Code != string(c) || env.Error.Details["gate"] != "test" {
			t.Errorf("%s: %+v", c, env.Error)
		}
	}
	if f.tools["product_search"].count() != 0 {
		t.Error("the tool ran for a refused call")
	}
}

func TestNoPrincipalAndUnknownTool(t *testing.T) {
	f := newFixture(t, newEnforcer(t))
	if env := refusal(t, f.call(t, context.Background(), "product_search", `{"query": "lamp"}`)); env.Error.Code != string(axerr.CodeUnauthenticated) {
		t.Errorf("no principal: %s", env.Error.Code)
	}
	if env := refusal(t, f.call(t, asAlice(), "coupon_guess", `{}`)); env.Error.Code != string(axerr.CodeIntentNotFound) {
		t.Errorf("tool outside the manifest: %s", env.Error.Code)
	}
	if f.tools["product_search"].count()+f.tools["coupon_guess"].count() != 0 {
		t.Error("a tool ran")
	}
}

func TestConfirmationTokenFromTheHost(t *testing.T) {
	e := newEnforcer(t)
	var (
		mu     sync.Mutex
		tokens = map[string]string{} // the host's tokens, by tool and arguments
	)
	creds := func(_ context.Context, in *compose.ToolInput) (middleware.Credentials, error) {
		mu.Lock()
		defer mu.Unlock()
		return middleware.Credentials{Confirmation: tokens[in.Name+" "+in.Arguments]}, nil
	}
	f := newFixture(t, e, eino.WithCredentials(creds))
	env := refusal(t, f.call(t, asAlice(), "order_place", orderArgs))
	if env.Error.Code != string(axerr.CodeConfirmationMissing) || env.Error.Details["confirmation_message"] == nil {
		t.Fatalf("refusal = %+v", env.Error)
	}
	// The host asks the person, then mints a token for this exact call.
	token, _, err := e.IssueConfirmation(context.Background(), alice, "order_place", json.RawMessage(orderArgs))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	tokens["order_place "+orderArgs] = token
	mu.Unlock()
	if got := f.call(t, asAlice(), "order_place", orderArgs); got != `{"tool": "order_place", "ok": true}` {
		t.Errorf("confirmed call: %s", got)
	}
	if env := refusal(t, f.call(t, asAlice(), "order_place", orderArgs)); env.Error.Details["reason"] != "already_used" {
		t.Errorf("replayed token: %+v", env.Error)
	}
}

func TestToolInfoCarriesTheEnforcedSchema(t *testing.T) {
	e := newEnforcer(t)
	info, err := eino.ToolInfo(e, "product_search")
	if err != nil {
		t.Fatal(err)
	}
	js, err := info.ParamsOneOf.ToJSONSchema()
	if err != nil || js == nil {
		t.Fatalf("schema: %v", err)
	}
	if len(js.Required) != 1 || js.Required[0] != "query" {
		t.Errorf("required = %v", js.Required)
	}
	if _, err := eino.ToolInfo(e, "coupon_guess"); err == nil {
		t.Error("a tool outside the manifest got a definition")
	}
}
