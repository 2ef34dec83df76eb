package mcpgate_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
)

// decisionPage is where the stand-in of axgate.WithDecisionPages says the
// person decides.
const decisionPage = "http://people.example/requests/d-1"

// heldDecision stands in for a decision held server-side for one call (the
// contract of axgate.WithDecisionPages): until the person decided, the
// confirmation gate refuses with AXAG_CONFIRMATION_MISSING naming the page
// (details decision_id, decision_url); once they confirmed, the same call
// passes once, with no token in hand.
type heldDecision struct {
	mu       sync.Mutex
	decided  bool
	executed bool
}

func (h *heldDecision) decide() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.decided = true
}

// option replaces the enforcer's confirmation gate by the stand-in.
func (h *heldDecision) option() axgate.Option {
	return axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		var out []middleware.Stage
		for _, s := range std {
			if s.Name != middleware.StageConfirmation {
				out = append(out, s)
			}
		}
		return append(out, middleware.Stage{Name: middleware.StageConfirmation, Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
			if call.Tool != "order_place" {
				return next.Invoke(ctx, call)
			}
			h.mu.Lock()
			pass := h.decided && !h.executed
			if pass {
				h.executed = true
			}
			h.mu.Unlock()
			if !pass {
				return middleware.Result{}, axerr.New(axerr.CodeConfirmationMissing, "order.place needs the person's confirmation").
					With("decision_id", "d-1").With("decision_url", decisionPage).
					With("agent_action", "Show decision_url to the user, then call again with the same arguments.")
			}
			return next.Invoke(ctx, call)
		}})
	})
}

// pageVisitor is a client's URL-mode elicitation handler: it records the
// page it is sent to and, when the person decides there, decides.
type pageVisitor struct {
	mu     sync.Mutex
	urls   []string
	modes  []string
	ids    []string
	decide func()
}

func (v *pageVisitor) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	v.mu.Lock()
	v.urls = append(v.urls, req.Params.URL)
	v.modes = append(v.modes, req.Params.Mode)
	v.ids = append(v.ids, req.Params.ElicitationID)
	v.mu.Unlock()
	if v.decide != nil {
		v.decide()
	}
	return &mcp.ElicitResult{Action: "accept"}, nil
}

// urlOnly declares URL-mode elicitation only: the client cannot show a form.
var urlOnly = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}

// TestDecisionPageSendsTheClientToThePage: a call refused for a decision
// held on a page reaches a client that declares URL-mode elicitation as a
// URL-mode request for that page (2026-07-28: an input_required result the
// client's multi round-trip answers and retries with the signed request
// state; 2025-11-25: the SDK's elicitation/create), and the call runs once
// the person decided there, once. Where the person did not decide, the
// retry is refused with the page again, and the client is not sent there
// twice for one call.
func TestDecisionPageSendsTheClientToThePage(t *testing.T) {
	for _, proto := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(proto+"/decided", func(t *testing.T) {
			h := &heldDecision{}
			v := &pageVisitor{decide: h.decide}
			f := connect(t, setup{
				enfOpts:    []axgate.Option{h.option()},
				gateOpts:   asAlice(mcpgate.WithoutElicitation()),
				clientOpts: &mcp.ClientOptions{Capabilities: urlOnly, ElicitationHandler: v.handle},
				protocol:   proto,
			})
			structured(t, f.call(t, "order_place", orderArgs, nil))
			if f.seen.count() != 1 {
				t.Fatalf("the tool ran %d times", f.seen.count())
			}
			if len(v.urls) != 1 || v.urls[0] != decisionPage || v.modes[0] != "url" || v.ids[0] != "d-1" {
				t.Errorf("the client was sent to %q (modes %q, ids %q)", v.urls, v.modes, v.ids)
			}
			// The decision was for one call: the next is sent to the page again.
			v.decide = nil
			env := refusal(t, f.call(t, "order_place", orderArgs, nil))
			if env.Error.Code != string(axerr.CodeConfirmationMissing) || env.Error.Details["decision_url"] != decisionPage {
				t.Errorf("the second call: %s %v", env.Error.Code, env.Error.Details)
			}
			if f.seen.count() != 1 || len(v.urls) != 2 {
				t.Errorf("the tool ran %d times, the client was sent to the page %d times", f.seen.count(), len(v.urls))
			}
		})
		t.Run(proto+"/undecided", func(t *testing.T) {
			h := &heldDecision{}
			v := &pageVisitor{}
			f := connect(t, setup{
				enfOpts:    []axgate.Option{h.option()},
				gateOpts:   asAlice(mcpgate.WithoutElicitation()),
				clientOpts: &mcp.ClientOptions{Capabilities: urlOnly, ElicitationHandler: v.handle},
				protocol:   proto,
			})
			env := refusal(t, f.call(t, "order_place", orderArgs, nil))
			if env.Error.Code != string(axerr.CodeConfirmationMissing) || env.Error.Details["decision_url"] != decisionPage || env.Error.Details["agent_action"] == nil {
				t.Errorf("refusal = %s %v", env.Error.Code, env.Error.Details)
			}
			if f.seen.count() != 0 || len(v.urls) != 1 {
				t.Errorf("the tool ran %d times, the client was sent to the page %d times", f.seen.count(), len(v.urls))
			}
		})
	}
}

// TestDecisionPageRefusalReachesOtherClients: a client that declares no
// URL-mode elicitation (none at all, or form only) gets the 428 refusal
// with the page's URL and the agent's next step in its details, and the
// same call repeated after the decision runs, with no token to carry.
func TestDecisionPageRefusalReachesOtherClients(t *testing.T) {
	for name, opts := range map[string]*mcp.ClientOptions{
		"no elicitation": nil,
		"form only":      {ElicitationHandler: (&person{answer: "accept"}).handle},
	} {
		t.Run(name, func(t *testing.T) {
			h := &heldDecision{}
			f := connect(t, setup{
				enfOpts:    []axgate.Option{h.option()},
				gateOpts:   asAlice(mcpgate.WithoutElicitation(), mcpgate.WithConfirmationHelp(func(*middleware.Call) string { return "mint a token" })),
				clientOpts: opts,
				protocol:   "2025-11-25",
			})
			env := refusal(t, f.call(t, "order_place", orderArgs, nil))
			d := env.Error.Details
			if env.Error.Code != string(axerr.CodeConfirmationMissing) || d["decision_url"] != decisionPage || d["decision_id"] != "d-1" || d["agent_action"] == nil {
				t.Errorf("refusal = %s %v", env.Error.Code, d)
			}
			if d["how_to_confirm"] != nil || d["elicitation"] != nil {
				t.Errorf("a refusal naming the page also says to mint a token: %v", d)
			}
			h.decide()
			structured(t, f.call(t, "order_place", orderArgs, nil))
			if f.seen.count() != 1 {
				t.Errorf("the tool ran %d times", f.seen.count())
			}
		})
	}
}

// TestDecisionPageRequestStateIsBoundToTheCall: the request state of a
// person sent to the page is the adapter's, signed, for this call only
// (another call's arguments are refused), and taken once; a form answer's
// state is not taken for it.
func TestDecisionPageRequestStateIsBoundToTheCall(t *testing.T) {
	h := &heldDecision{}
	enf, err := newEnforcer(t, h.option())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	s := &seen{}
	handler := mcpgate.ToolHandler(enf, s.echo(), mcpgate.WithPrincipal(mcpgate.StaticPrincipal(alice)), mcpgate.WithoutElicitation())
	urlClient := map[string]any{mcp.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}}
	callWith := func(args, state string, answered bool) *mcp.CallToolResult {
		t.Helper()
		p := &mcp.CallToolParamsRaw{Name: "order_place", Arguments: json.RawMessage(args), RequestState: state}
		p.Meta = urlClient
		if answered {
			p.InputResponses = mcp.InputResponseMap{mcpgate.DecisionInputID: &mcp.ElicitResult{Action: "accept"}}
		}
		res, err := handler(context.Background(), &mcp.CallToolRequest{Params: p})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := callWith(orderArgs, "", false)
	page, ok := first.InputRequests[mcpgate.DecisionInputID].(*mcp.ElicitParams)
	if !ok || page.Mode != "url" || page.URL != decisionPage || first.RequestState == "" {
		t.Fatalf("first pass = %+v", first)
	}
	h.decide()
	stateRefused := func(res *mcp.CallToolResult) {
		t.Helper()
		env := refusal(t, res)
		if env.Error.Code != string(axerr.CodeConfirmationMissing) || env.Error.Details["reason"] != string(reasons.ElicitationStateInvalid) {
			t.Errorf("refusal = %s %v", env.Error.Code, env.Error.Details)
		}
	}
	other := `{"cart_id":"3f0c2a8e-9b1d-4c56-8f3e-2a1b0c9d8e7f","shipping_address_id":"office"}`
	stateRefused(callWith(other, first.RequestState, true))
	stateRefused(callWith(orderArgs, "forged."+first.RequestState, true))
	if s.count() != 0 {
		t.Fatalf("the tool ran %d times on refused states", s.count())
	}
	structured(t, callWith(orderArgs, first.RequestState, true))
	stateRefused(callWith(orderArgs, first.RequestState, true))
	if s.count() != 1 {
		t.Errorf("the tool ran %d times, want 1", s.count())
	}
}
