package mcpgate_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/internal/wire"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// order_place needs the person's confirmation (confirmation_required, risk
// high).
const orderArgs = `{"cart_id":"3f0c2a8e-9b1d-4c56-8f3e-2a1b0c9d8e7f","shipping_address_id":"home"}`

const orderQuestion = "Allow order.place (Place a new order from the current cart), risk high?"

// person answers elicitation requests and remembers the questions.
type person struct {
	mu        sync.Mutex
	answer    string
	questions []string
}

func (p *person) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.questions = append(p.questions, req.Params.Message)
	return &mcp.ElicitResult{Action: p.answer}, nil
}

// audit keeps the audit records of the enforcer.
type audit struct {
	mu      sync.Mutex
	records []middleware.AuditRecord
}

func (a *audit) Audit(_ context.Context, r middleware.AuditRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.records = append(a.records, r)
}

func (a *audit) allowed() []middleware.AuditRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []middleware.AuditRecord
	for _, r := range a.records {
		if r.Decision == middleware.DecisionAllow {
			out = append(out, r)
		}
	}
	return out
}

// Both paths of the SDK: a current client gets the question in an
// input-required result and calls again with the answer; a client on an
// older protocol is asked by the server with elicitation/create.
var protocols = []string{"2026-07-28", "2025-11-25", "2025-06-18"}

func TestElicitationAcceptRunsTheCallAndIsAudited(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			p := &person{answer: "accept"}
			log := &audit{}
			f := connect(t, setup{
				enfOpts:    []axgate.Option{axgate.WithTelemetry(middleware.TelemetryConfig{Audit: log})},
				gateOpts:   asAlice(),
				clientOpts: &mcp.ClientOptions{ElicitationHandler: p.handle},
				protocol:   proto,
			})
			out := structured(t, f.call(t, "order_place", orderArgs, nil))
			if out["elicited"] != true {
				t.Errorf("the tool did not see an elicited confirmation: %v", out)
			}
			if len(p.questions) != 1 || p.questions[0] != orderQuestion {
				t.Errorf("the person was asked %q", p.questions)
			}
			if f.seen.count() != 1 {
				t.Errorf("the tool ran %d times", f.seen.count())
			}
			allowed := log.allowed()
			if len(allowed) != 1 || !allowed[0].ConfirmationElicited || allowed[0].Intent != "order.place" || allowed[0].PrincipalID != "alice" {
				t.Errorf("audit of the allowed call = %+v", allowed)
			}
		})
	}
}

func TestElicitationDeclineOrCancelRefuses(t *testing.T) {
	for _, proto := range protocols {
		for _, answer := range []string{"decline", "cancel"} {
			t.Run(proto+"/"+answer, func(t *testing.T) {
				p := &person{answer: answer}
				f := connect(t, setup{
					gateOpts:   asAlice(),
					clientOpts: &mcp.ClientOptions{ElicitationHandler: p.handle},
					protocol:   proto,
				})
				env := refusal(t, f.call(t, "order_place", orderArgs, nil))
				if env.Error.Code != string(axerr.CodeConfirmationMissing) || env.Error.Details["reason"] != "declined" {
					t.Errorf("refusal = %s %v", env.Error.Code, env.Error.Details)
				}
				if len(p.questions) != 1 || f.seen.count() != 0 {
					t.Errorf("asked %d times, tool ran %d times", len(p.questions), f.seen.count())
				}
			})
		}
	}
}

func TestConfirmationTokenFlowWithoutElicitation(t *testing.T) {
	f := connect(t, setup{gateOpts: asAlice()})
	env := refusal(t, f.call(t, "order_place", orderArgs, nil))
	if env.Error.Code != string(axerr.CodeConfirmationMissing) || env.Error.Details["confirmation_message"] != orderQuestion {
		t.Fatalf("refusal = %s %v", env.Error.Code, env.Error.Details)
	}
	// The host's UI asks the person, then signs a token for this exact call.
	token, _, err := f.enf.IssueConfirmation(context.Background(), alice, "order_place", json.RawMessage(orderArgs))
	if err != nil {
		t.Fatal(err)
	}
	out := structured(t, f.call(t, "order_place", orderArgs, mcp.Meta{wire.MetaConfirmation: token}))
	if out["elicited"] != false {
		t.Errorf("elicited = %v", out["elicited"])
	}
	// Single use.
	env = refusal(t, f.call(t, "order_place", orderArgs, mcp.Meta{wire.MetaConfirmation: token}))
	if env.Error.Code != string(axerr.CodeConfirmationMissing) || env.Error.Details["reason"] != "already_used" {
		t.Errorf("replay: %s %v", env.Error.Code, env.Error.Details)
	}
}

func TestConfirmationTokenForOtherArgumentsIsRefused(t *testing.T) {
	f := connect(t, setup{gateOpts: asAlice()})
	token, _, err := f.enf.IssueConfirmation(context.Background(), alice, "order_place", json.RawMessage(orderArgs))
	if err != nil {
		t.Fatal(err)
	}
	other := `{"cart_id":"3f0c2a8e-9b1d-4c56-8f3e-2a1b0c9d8e7f","shipping_address_id":"office"}`
	env := refusal(t, f.call(t, "order_place", other, mcp.Meta{wire.MetaConfirmation: token}))
	if env.Error.Code != string(axerr.CodeConfirmationMissing) || env.Error.Details["reason"] == nil {
		t.Errorf("refusal = %s %v", env.Error.Code, env.Error.Details)
	}
	if f.seen.count() != 0 {
		t.Error("the tool ran")
	}
}

func TestWithoutElicitationNeverAsks(t *testing.T) {
	p := &person{answer: "accept"}
	f := connect(t, setup{
		gateOpts:   asAlice(mcpgate.WithoutElicitation()),
		clientOpts: &mcp.ClientOptions{ElicitationHandler: p.handle},
	})
	env := refusal(t, f.call(t, "order_place", orderArgs, nil))
	if env.Error.Code != string(axerr.CodeConfirmationMissing) || len(p.questions) != 0 {
		t.Errorf("code = %s, asked %d times", env.Error.Code, len(p.questions))
	}
}

func TestElicitationIsNotAskedForCallsThatNeedNoConfirmation(t *testing.T) {
	p := &person{answer: "accept"}
	f := connect(t, setup{
		gateOpts:   asAlice(),
		clientOpts: &mcp.ClientOptions{ElicitationHandler: p.handle},
	})
	structured(t, f.call(t, "product_search", `{"query":"lamp"}`, nil))
	// A call refused before the confirmation gate never asks the person.
	refusal(t, f.call(t, "order_place", `{"cart_id":"not-a-uuid"}`, nil))
	if len(p.questions) != 0 {
		t.Errorf("asked %q", p.questions)
	}
}

// answerer drives the multi round-trip by hand, as a client (honest or not)
// can: it sends whatever request state and answer it likes.
type answerer struct {
	t    *testing.T
	h    mcp.ToolHandler
	tool *seen
}

func newAnswerer(t *testing.T, enf *axgate.Enforcer, opts ...mcpgate.Option) *answerer {
	t.Helper()
	s := &seen{}
	return &answerer{t: t, h: mcpgate.ToolHandler(enf, s.echo(), opts...), tool: s}
}

// elicitingClient declares that the client can show a form to the person.
var elicitingClient = map[string]any{mcp.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}}

func (a *answerer) call(tool, args, state string, answer mcp.InputResponse) *mcp.CallToolResult {
	a.t.Helper()
	p := &mcp.CallToolParamsRaw{Name: tool, Arguments: json.RawMessage(args), RequestState: state}
	p.Meta = elicitingClient
	if answer != nil {
		p.InputResponses = mcp.InputResponseMap{mcpgate.ConfirmationInputID: answer}
	}
	res, err := a.h(context.Background(), &mcp.CallToolRequest{Params: p})
	if err != nil {
		a.t.Fatal(err)
	}
	return res
}

// ask makes the first pass and returns the request state of the question.
func (a *answerer) ask(tool, args string) string {
	a.t.Helper()
	first := a.call(tool, args, "", nil)
	q, ok := first.InputRequests[mcpgate.ConfirmationInputID].(*mcp.ElicitParams)
	if !ok || q.Message == "" || first.RequestState == "" {
		a.t.Fatalf("first pass = %+v", first)
	}
	return first.RequestState
}

var accept = &mcp.ElicitResult{Action: "accept"}

// wantStateRefused checks that the answer was not taken: the call is refused
// with AXAG_CONFIRMATION_MISSING, reason elicitation_state_invalid, and the
// tool did not run.
func wantStateRefused(t *testing.T, res *mcp.CallToolResult, a *answerer, ran int) {
	t.Helper()
	env := refusal(t, res)
	if env.Error.Code != string(axerr.CodeConfirmationMissing) || env.Error.Details["reason"] != string(reasons.ElicitationStateInvalid) {
		t.Errorf("refusal = %s %v", env.Error.Code, env.Error.Details)
	}
	if env.Error.Details["args_sha256"] == nil || env.Error.Details["confirmation_message"] == nil {
		t.Errorf("the refusal lacks what the agent needs to ask again: %v", env.Error.Details)
	}
	if a.tool.count() != ran {
		t.Errorf("the tool ran %d times, want %d", a.tool.count(), ran)
	}
}

func enforcer(t *testing.T) *axgate.Enforcer {
	t.Helper()
	enf, err := newEnforcer(t)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	return enf
}

func TestElicitationGenuineAnswerRunsTheCallOnce(t *testing.T) {
	a := newAnswerer(t, enforcer(t), asAlice()...)
	state := a.ask("order_place", orderArgs)
	out := structured(t, a.call("order_place", orderArgs, state, accept))
	if out["elicited"] != true || a.tool.count() != 1 {
		t.Fatalf("out = %v, the tool ran %d times", out, a.tool.count())
	}
	// The same answer again is a replay: the question was answered.
	wantStateRefused(t, a.call("order_place", orderArgs, state, accept), a, 1)
}

// The client sends both the answer and the state: a state the client can
// compute (the digest of the arguments) must not let it confirm for the
// person, with no question ever asked.
func TestElicitationForgedStateIsRefused(t *testing.T) {
	a := newAnswerer(t, enforcer(t), asAlice()...)
	digest, err := middleware.NewCall("order_place", json.RawMessage(orderArgs), alice).ArgsSHA256()
	if err != nil {
		t.Fatal(err)
	}
	for _, forged := range []string{digest, "", "x.y", digest + "." + digest, "e30.AAAA"} {
		for range 3 {
			wantStateRefused(t, a.call("order_place", orderArgs, forged, accept), a, 0)
		}
	}
	// A genuine state (a JWT) whose content was edited no longer matches
	// its MAC; one that says it is unsigned is refused.
	state := a.ask("order_place", orderArgs)
	parts := strings.Split(state, ".")
	if len(parts) != 3 {
		t.Fatalf("the state is not a JWT: %q", state)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	edited := strings.Replace(string(raw), `"exp":`, `"exp":9`, 1)
	wantStateRefused(t, a.call("order_place", orderArgs, parts[0]+"."+base64.RawURLEncoding.EncodeToString([]byte(edited))+"."+parts[2], accept), a, 0)
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	wantStateRefused(t, a.call("order_place", orderArgs, none+"."+parts[1]+".", accept), a, 0)
}

func TestElicitationStateIsBoundToTheCall(t *testing.T) {
	key := bytes.Repeat([]byte{7}, mcpgate.ElicitationKeySize)
	enf := enforcer(t)
	a := newAnswerer(t, enf, asAlice(mcpgate.WithElicitationKey(key))...)
	other := `{"cart_id":"3f0c2a8e-9b1d-4c56-8f3e-2a1b0c9d8e7f","shipping_address_id":"office"}`

	t.Run("other arguments", func(t *testing.T) {
		state := a.ask("order_place", orderArgs)
		wantStateRefused(t, a.call("order_place", other, state, accept), a, 0)
	})
	t.Run("other tool", func(t *testing.T) {
		// account_delete acts on the caller's own account: its owner asks.
		owner := middleware.Principal{ID: "9d2e4f60-1c3b-4a5d-8e7f-0a1b2c3d4e5f", Tenant: "acme", Roles: []string{"customer"}}
		o := newAnswerer(t, enf, mcpgate.WithPrincipal(mcpgate.StaticPrincipal(owner)), mcpgate.WithElicitationKey(key))
		state := o.ask("order_place", orderArgs)
		del := `{"account_id":"9d2e4f60-1c3b-4a5d-8e7f-0a1b2c3d4e5f","confirmation_text":"DELETE"}`
		wantStateRefused(t, o.call("account_delete", del, state, accept), o, 0)
		// The question about account_delete itself is answerable (its
		// approval is the next gate's business).
		env := refusal(t, o.call("account_delete", del, o.ask("account_delete", del), accept))
		if env.Error.Code != string(axerr.CodeApprovalMissing) {
			t.Errorf("refusal = %s %v", env.Error.Code, env.Error.Details)
		}
	})
	t.Run("other principal", func(t *testing.T) {
		// Another replica (same key) serving mallory, in alice's tenant.
		mallory := middleware.Principal{ID: "mallory", Tenant: "acme", Roles: []string{"customer"}}
		m := newAnswerer(t, enf, mcpgate.WithPrincipal(mcpgate.StaticPrincipal(mallory)), mcpgate.WithElicitationKey(key))
		state := a.ask("order_place", orderArgs)
		wantStateRefused(t, m.call("order_place", orderArgs, state, accept), m, 0)
		// A state mallory was given herself does not work for alice.
		wantStateRefused(t, a.call("order_place", orderArgs, m.ask("order_place", orderArgs), accept), a, 0)
	})
	t.Run("other key", func(t *testing.T) {
		// Each AddTools or ToolHandler signs with its own random key by default.
		b := newAnswerer(t, enf, asAlice()...)
		wantStateRefused(t, b.call("order_place", orderArgs, a.ask("order_place", orderArgs), accept), b, 0)
	})
	t.Run("the right call still works", func(t *testing.T) {
		state := a.ask("order_place", other)
		structured(t, a.call("order_place", other, state, accept))
	})
}

func TestElicitationStateExpires(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []mcpgate.Option
		wait time.Duration
	}{
		{"default", nil, mcpgate.DefaultElicitationTTL},
		{"WithElicitationTTL", []mcpgate.Option{mcpgate.WithElicitationTTL(time.Minute)}, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			clock := func() time.Time { return now }
			a := newAnswerer(t, enforcer(t), asAlice(append(tc.opts, mcpgate.WithClock(clock))...)...)
			state := a.ask("order_place", orderArgs)
			now = now.Add(tc.wait)
			wantStateRefused(t, a.call("order_place", orderArgs, state, accept), a, 0)
			// Asked again, the person's answer is taken.
			state = a.ask("order_place", orderArgs)
			now = now.Add(tc.wait - time.Second)
			structured(t, a.call("order_place", orderArgs, state, accept))
		})
	}
}

// Of many concurrent answers carrying one state, exactly one is taken.
func TestElicitationStateIsSingleUseUnderConcurrency(t *testing.T) {
	a := newAnswerer(t, enforcer(t), asAlice()...)
	state := a.ask("order_place", orderArgs)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			p := &mcp.CallToolParamsRaw{Name: "order_place", Arguments: json.RawMessage(orderArgs), RequestState: state,
				InputResponses: mcp.InputResponseMap{mcpgate.ConfirmationInputID: accept}}
			p.Meta = elicitingClient
			if _, err := a.h(context.Background(), &mcp.CallToolRequest{Params: p}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if a.tool.count() != 1 {
		t.Errorf("the tool ran %d times", a.tool.count())
	}
}

// failingReplay is a replay store that is down.
type failingReplay struct{}

func (failingReplay) Consume(context.Context, []token.Use) error {
	return errors.New("connection refused")
}
func (failingReplay) Used(context.Context, string) (bool, error) {
	return false, errors.New("connection refused")
}

func TestElicitationReplayStoreFailureFailsClosed(t *testing.T) {
	a := newAnswerer(t, enforcer(t), asAlice(mcpgate.WithElicitationReplayStore(failingReplay{}))...)
	state := a.ask("order_place", orderArgs)
	env := refusal(t, a.call("order_place", orderArgs, state, accept))
	if env.Error.Code != string(axerr.CodeStoreUnavailable) || a.tool.count() != 0 {
		t.Errorf("refusal = %s %v, the tool ran %d times", env.Error.Code, env.Error.Details, a.tool.count())
	}
}

func TestWithElicitationKeyRefusesShortKeys(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a 16-byte key was accepted")
		}
	}()
	mcpgate.WithElicitationKey(make([]byte, 16))
}

// TestConfirmationRefusalWithoutElicitationSaysHow: a client that cannot ask
// the person is told where the token goes (_meta["axag/confirmation"]) and,
// with WithConfirmationHelp, how this deployment mints one; a token that was
// presented and refused keeps its own refusal.
func TestConfirmationRefusalWithoutElicitationSaysHow(t *testing.T) {
	var helped []string
	help := mcpgate.WithConfirmationHelp(func(call *middleware.Call) string {
		helped = append(helped, call.Intent())
		return "Run: mint-a-token " + call.Intent()
	})
	for _, tc := range []struct {
		name   string
		opts   []mcpgate.Option
		client *mcp.ClientOptions
		why    string
	}{
		{"the client has no elicitation", asAlice(help), nil, "does not support MCP elicitation"},
		{"WithoutElicitation", asAlice(help, mcpgate.WithoutElicitation()), &mcp.ClientOptions{ElicitationHandler: (&person{answer: "accept"}).handle}, "not asked inline here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			helped = nil
			f := connect(t, setup{gateOpts: tc.opts, clientOpts: tc.client})
			res := f.call(t, "order_place", orderArgs, nil)
			env := refusal(t, res)
			d := env.Error.Details
			if env.Error.Code != string(axerr.CodeConfirmationMissing) || !strings.Contains(env.Error.Message, tc.why) {
				t.Errorf("refusal %s: %q; want it to say %q", env.Error.Code, env.Error.Message, tc.why)
			}
			sugg, _ := d["suggestion"].(string)
			for _, want := range []string{`_meta["axag/confirmation"]`, "Run: mint-a-token order.place"} {
				if !strings.Contains(sugg, want) {
					t.Errorf("suggestion does not say %q: %q", want, sugg)
				}
			}
			// Where nobody is asked inline, no client would help: the
			// suggestion does not send the agent looking for one.
			if got := strings.Contains(sugg, "supports MCP elicitation"); got != (tc.name == "the client has no elicitation") {
				t.Errorf("suggestion names a client that supports MCP elicitation: %v: %q", got, sugg)
			}
			if d["how_to_confirm"] != "Run: mint-a-token order.place" || d["token_meta_key"] != "axag/confirmation" || d["elicitation"] != false {
				t.Errorf("details %v", d)
			}
			if !strings.Contains(texts(res), "mint-a-token") {
				t.Errorf("the readable text does not say how: %s", texts(res))
			}
		})
	}
	// A token presented and refused says what is wrong with it, not how to
	// get one.
	helped = nil
	f := connect(t, setup{gateOpts: asAlice(help)})
	env := refusal(t, f.call(t, "order_place", orderArgs, mcp.Meta{wire.MetaConfirmation: "not.a.token"}))
	if env.Error.Code != string(axerr.CodeConfirmationMissing) || env.Error.Details["reason"] == nil || env.Error.Details["how_to_confirm"] != nil || len(helped) != 0 {
		t.Errorf("refused token: %s %v (help called for %v)", env.Error.Code, env.Error.Details, helped)
	}
}

// TestElicitationOfferedToACustomStageOnAnyTool: a stage of the operator's
// own (axgate.WithPreExecution) may ask the person on a call of any tool,
// one without a confirmation stage too: the handler reads the client's
// capabilities for such a chain and offers call.Elicit. (Only a chain of
// the standard stages without a confirmation or an approval stage skips
// the capabilities, which the SDK decodes anew on every read of a 2026-07-28
// request's _meta.)
func TestElicitationOfferedToACustomStageOnAnyTool(t *testing.T) {
	var offered atomic.Bool
	enf, err := newEnforcer(t, appendStage(middleware.Stage{Name: "ask_first",
		Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
			offered.Store(call.Elicit != nil)
			return next.Invoke(ctx, call)
		}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	a := newAnswerer(t, enf, asAlice()...)
	structured(t, a.call("product_search", `{"query":"lamp"}`, "", nil))
	if !offered.Load() {
		t.Error("the custom stage was not offered call.Elicit on a call whose client can be asked")
	}
}
