package adk_test

import (
	"context"
	"encoding/json"
	"iter"
	"sync"
	"testing"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/functiontool"
	"google.golang.org/adk/v2/tool/toolconfirmation"
	"google.golang.org/genai"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/adk"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/fixtures"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// manifestPath is the project's full test manifest (testdata/axag).
var manifestPath = fixtures.Manifest("shop-full.json")

const (
	appName = "shop"
	userID  = "alice"
)

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

// scriptedModel answers each model call with the next step of a script: a
// function call or a final text. No network, no model.
type scriptedModel struct {
	mu    sync.Mutex
	steps []*genai.Part
	seen  []*model.LLMRequest
}

func (m *scriptedModel) Name() string { return "scripted" }

func (m *scriptedModel) GenerateContent(_ context.Context, req *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		m.mu.Lock()
		m.seen = append(m.seen, req)
		part := genai.NewPartFromText("done")
		if len(m.steps) > 0 {
			part, m.steps = m.steps[0], m.steps[1:]
		}
		m.mu.Unlock()
		yield(&model.LLMResponse{Content: &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{part}}}, nil)
	}
}

func callPart(name string, args map[string]any) *genai.Part {
	return &genai.Part{FunctionCall: &genai.FunctionCall{Name: name, Args: args}}
}

// shop counts the runs of its tools.
type shop struct {
	mu   sync.Mutex
	runs map[string]int
}

func (s *shop) tool(t *testing.T, name string) tool.Tool {
	t.Helper()
	tl, err := functiontool.New(functiontool.Config{Name: name, Description: name},
		func(ctx agent.Context, args map[string]any) (map[string]any, error) {
			s.mu.Lock()
			s.runs[name]++
			s.mu.Unlock()
			return map[string]any{"tool": name, "args": args}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func (s *shop) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[name]
}

type fixture struct {
	r    *runner.Runner
	shop *shop
	sess string
}

func newFixture(t *testing.T, e *axgate.Enforcer, script []*genai.Part, opts ...adk.Option) *fixture {
	t.Helper()
	s := &shop{runs: map[string]int{}}
	a, err := llmagent.New(llmagent.Config{
		Name:  "shopper",
		Model: &scriptedModel{steps: script},
		Tools: []tool.Tool{s.tool(t, "product_search"), s.tool(t, "order_place"), s.tool(t, "coupon_guess")},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := adk.New(e, opts...).Plugin()
	if err != nil {
		t.Fatal(err)
	}
	svc := session.InMemoryService()
	r, err := runner.New(runner.Config{AppName: appName, Agent: a, SessionService: svc, PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{p}}})
	if err != nil {
		t.Fatal(err)
	}
	created, err := svc.Create(context.Background(), &session.CreateRequest{AppName: appName, UserID: userID})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{r: r, shop: s, sess: created.Session.ID()}
}

// turn runs one turn and returns its events.
func (f *fixture) turn(t *testing.T, msg *genai.Content) []*session.Event {
	t.Helper()
	var out []*session.Event
	for ev, err := range f.r.Run(context.Background(), userID, f.sess, msg, agent.RunConfig{}) {
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		out = append(out, ev)
	}
	return out
}

func userText(s string) *genai.Content { return genai.NewContentFromText(s, genai.RoleUser) }

// responses returns the function responses of the events for tool name.
func responses(evs []*session.Event, name string) []map[string]any {
	var out []map[string]any
	for _, ev := range evs {
		if ev.Content == nil {
			continue
		}
		for _, p := range ev.Content.Parts {
			if p.FunctionResponse != nil && p.FunctionResponse.Name == name {
				out = append(out, p.FunctionResponse.Response)
			}
		}
	}
	return out
}

func code(resp map[string]any) string {
	e, _ := resp["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func details(resp map[string]any) map[string]any {
	e, _ := resp["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	return d
}

func TestRefusalThenCorrectedCallSucceeds(t *testing.T) {
	f := newFixture(t, newEnforcer(t), []*genai.Part{
		callPart("product_search", map[string]any{"query": 7, "limit": 500}),
		callPart("product_search", map[string]any{"query": "lamp"}),
	})
	evs := f.turn(t, userText("find a lamp"))
	rs := responses(evs, "product_search")
	if len(rs) != 2 {
		t.Fatalf("want 2 responses, got %v", rs)
	}
	if c := code(rs[0]); c != string(axerr.CodeInvalidType) && c != string(axerr.CodeOutOfRange) {
		t.Errorf("first response = %v", rs[0])
	}
	vs, _ := details(rs[0])["violations"].([]any)
	if len(vs) != 2 {
		t.Errorf("violations = %v, want /query and /limit", vs)
	}
	if rs[1]["tool"] != "product_search" {
		t.Errorf("second response = %v", rs[1])
	}
	if n := f.shop.count("product_search"); n != 1 {
		t.Errorf("the tool ran %d times, want once (ADK must not run it again)", n)
	}
}

func TestToolOutsideTheManifestIsRefused(t *testing.T) {
	f := newFixture(t, newEnforcer(t), []*genai.Part{callPart("coupon_guess", map[string]any{})})
	rs := responses(f.turn(t, userText("any coupons?")), "coupon_guess")
	if len(rs) != 1 || code(rs[0]) != string(axerr.CodeIntentNotFound) || f.shop.count("coupon_guess") != 0 {
		t.Errorf("responses = %v, runs %d", rs, f.shop.count("coupon_guess"))
	}
	// Unless it is named unmanaged on purpose.
	f = newFixture(t, newEnforcer(t), []*genai.Part{callPart("coupon_guess", map[string]any{})}, adk.WithUnmanagedTools("coupon_guess"))
	rs = responses(f.turn(t, userText("any coupons?")), "coupon_guess")
	if len(rs) != 1 || rs[0]["tool"] != "coupon_guess" {
		t.Errorf("unmanaged: %v", rs)
	}
}

func TestEveryRefusalKindIsTheToolResult(t *testing.T) {
	var refuseWith axerr.Code
	gate := middleware.Stage{Name: "test", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		return middleware.Result{}, axerr.New(refuseWith, "refused by the test gate").WithIntent(call.Intent())
	}}
	e := newEnforcer(t, axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage { return append(std, gate) }))
	for _, c := range axerr.Codes() {
		refuseWith = c
		f := newFixture(t, e, []*genai.Part{callPart("product_search", map[string]any{"query": "lamp"})})
		rs := responses(f.turn(t, userText("find a lamp")), "product_search")
		if len(rs) != 1 || code(rs[0]) != string(c) || details(rs[0])["gate"] != "test" {
			t.Errorf("%s: responses = %v", c, rs)
		}
		if f.shop.count("product_search") != 0 {
			t.Errorf("%s: the tool ran", c)
		}
	}
}

// confirmationRequest finds ADK's request for the person's confirmation.
func confirmationRequest(t *testing.T, evs []*session.Event) (id, hint string) {
	t.Helper()
	for _, ev := range evs {
		if ev.Content == nil {
			continue
		}
		for _, p := range ev.Content.Parts {
			if fc := p.FunctionCall; fc != nil && fc.Name == toolconfirmation.FunctionCallName {
				raw, _ := json.Marshal(fc.Args["toolConfirmation"])
				var tc toolconfirmation.ToolConfirmation
				_ = json.Unmarshal(raw, &tc)
				return fc.ID, tc.Hint
			}
		}
	}
	t.Fatal("no confirmation request in the events")
	return "", ""
}

func answer(id string, confirmed bool) *genai.Content {
	return &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{FunctionResponse: &genai.FunctionResponse{
		Name: toolconfirmation.FunctionCallName, ID: id, Response: map[string]any{"confirmed": confirmed},
	}}}}
}

var order = map[string]any{"cart_id": "3f0c2a8e-9b1d-4c56-8f3e-2a1b0c9d8e7f", "shipping_address_id": "home"}

type auditLog struct {
	mu      sync.Mutex
	records []middleware.AuditRecord
}

func (a *auditLog) Audit(_ context.Context, r middleware.AuditRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.records = append(a.records, r)
}

func TestToolConfirmationApproveRunsTheCall(t *testing.T) {
	log := &auditLog{}
	f := newFixture(t, newEnforcer(t, axgate.WithTelemetry(middleware.TelemetryConfig{Audit: log})), []*genai.Part{callPart("order_place", order)})
	evs := f.turn(t, userText("place my order"))
	rs := responses(evs, "order_place")
	if len(rs) != 1 || code(rs[0]) != string(axerr.CodeConfirmationMissing) || details(rs[0])["confirmation_requested"] != true {
		t.Fatalf("first pass = %v", rs)
	}
	id, hint := confirmationRequest(t, evs)
	if hint != "Allow order.place (Place a new order from the current cart), risk high?" {
		t.Errorf("hint = %q", hint)
	}
	if f.shop.count("order_place") != 0 {
		t.Fatal("the tool ran before the person answered")
	}

	evs = f.turn(t, answer(id, true))
	rs = responses(evs, "order_place")
	if len(rs) != 1 || rs[0]["tool"] != "order_place" || f.shop.count("order_place") != 1 {
		t.Fatalf("after approval: %v, runs %d", rs, f.shop.count("order_place"))
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	var elicited bool
	for _, r := range log.records {
		if r.Decision == middleware.DecisionAllow && r.Intent == "order.place" {
			elicited = r.ConfirmationElicited
		}
	}
	if !elicited {
		t.Errorf("the audit does not record the person's confirmation: %+v", log.records)
	}
}

func TestToolConfirmationRejectRefuses(t *testing.T) {
	f := newFixture(t, newEnforcer(t), []*genai.Part{callPart("order_place", order)})
	id, _ := confirmationRequest(t, f.turn(t, userText("place my order")))
	rs := responses(f.turn(t, answer(id, false)), "order_place")
	if len(rs) != 1 || code(rs[0]) != string(axerr.CodeConfirmationMissing) || details(rs[0])["reason"] != "declined" {
		t.Errorf("after rejection: %v", rs)
	}
	if f.shop.count("order_place") != 0 {
		t.Error("the tool ran")
	}
}

func TestSignedTokenWithoutToolConfirmation(t *testing.T) {
	e := newEnforcer(t)
	args, _ := json.Marshal(order)
	token, _, err := e.IssueConfirmation(context.Background(), middleware.Principal{ID: userID}, "order_place", args)
	if err != nil {
		t.Fatal(err)
	}
	creds := func(ctx agent.Context, name string, _ map[string]any) (middleware.Credentials, error) {
		if name == "order_place" {
			return middleware.Credentials{Confirmation: token}, nil
		}
		return middleware.Credentials{}, nil
	}
	f := newFixture(t, e, []*genai.Part{callPart("order_place", order)}, adk.WithoutToolConfirmation(), adk.WithCredentials(creds))
	rs := responses(f.turn(t, userText("place my order")), "order_place")
	if len(rs) != 1 || rs[0]["tool"] != "order_place" {
		t.Errorf("responses = %v", rs)
	}
}
