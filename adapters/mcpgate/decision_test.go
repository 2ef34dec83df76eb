package mcpgate_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
)

// pagesBase is where the enforcers of these tests say the pages for people
// are (axgate.WithDecisionPages).
const pagesBase = "http://people.example/"

// pageVisitor is a client's URL-mode elicitation handler: it records the
// page it is sent to and, as the person there, gives decision (none when
// empty) through decide.
type pageVisitor struct {
	mu       sync.Mutex
	urls     []string
	modes    []string
	ids      []string
	decision string // "confirm", "deny" or ""
	decide   func(ctx context.Context, id string, approve bool) error
}

func (v *pageVisitor) handle(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	v.mu.Lock()
	v.urls = append(v.urls, req.Params.URL)
	v.modes = append(v.modes, req.Params.Mode)
	v.ids = append(v.ids, req.Params.ElicitationID)
	decision := v.decision
	v.mu.Unlock()
	if decision != "" {
		if err := v.decide(ctx, req.Params.ElicitationID, decision == "confirm"); err != nil {
			return nil, err
		}
	}
	return &mcp.ElicitResult{Action: "accept"}, nil
}

// urlOnly declares URL-mode elicitation only: the client cannot show a form.
var urlOnly = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}

// decideAs decides request id as alice, the requester, through f's enforcer.
func decideAs(f **fixture) func(ctx context.Context, id string, approve bool) error {
	return func(ctx context.Context, id string, approve bool) error {
		_, _, _, err := (*f).enf.Approvals().Decide(ctx, alice, id, approve, "")
		return err
	}
}

// TestDecisionPageSendsTheClientToThePage: with axgate.WithDecisionPages, a
// call waiting for the person's confirmation reaches a client that declares
// URL-mode elicitation as a URL-mode request for the page of the call
// (2026-07-28: an input_required result the client's multi round-trip
// answers and retries with the signed request state; 2025-11-25: the SDK's
// elicitation/create), and the call runs once the person confirmed there,
// once. Where the person did not decide, the retry is refused with the page,
// and the client is not sent there twice for one call; where they denied,
// it is refused as declined.
func TestDecisionPageSendsTheClientToThePage(t *testing.T) {
	for _, proto := range []string{"2026-07-28", "2025-11-25"} {
		for _, decision := range []string{"confirm", "", "deny"} {
			name := decision
			if name == "" {
				name = "undecided"
			}
			t.Run(proto+"/"+name, func(t *testing.T) {
				var f *fixture
				v := &pageVisitor{decision: decision, decide: decideAs(&f)}
				f = connect(t, setup{
					enfOpts:    []axgate.Option{axgate.WithDecisionPages(pagesBase)},
					gateOpts:   asAlice(mcpgate.WithoutElicitation()),
					clientOpts: &mcp.ClientOptions{Capabilities: urlOnly, ElicitationHandler: v.handle},
					protocol:   proto,
				})
				res := f.call(t, "order_place", orderArgs, nil)
				if len(v.urls) != 1 || v.modes[0] != "url" || !strings.HasPrefix(v.ids[0], "cnf_") || v.urls[0] != pagesBase+"requests/"+v.ids[0] {
					t.Errorf("the client was sent to %q (modes %q, ids %q)", v.urls, v.modes, v.ids)
				}
				switch decision {
				case "confirm":
					structured(t, res)
					if f.seen.count() != 1 {
						t.Fatalf("the tool ran %d times", f.seen.count())
					}
				default:
					env := refusal(t, res)
					wantReason := map[string]any{"": nil, "deny": string(reasons.Declined)}[decision]
					if env.Error.Code != string(axerr.CodeConfirmationMissing) || env.Error.Details["decision_url"] != v.urls[0] || env.Error.Details["reason"] != wantReason {
						t.Errorf("refusal = %s %v", env.Error.Code, env.Error.Details)
					}
					if f.seen.count() != 0 {
						t.Errorf("the tool ran %d times", f.seen.count())
					}
				}
			})
		}
	}
}

// TestDecisionPageRefusalReachesOtherClients: a client that declares no
// URL-mode elicitation (none at all, or form only, not trusted) gets the 428
// refusal with the page's URL and the agent's next step in its details (and
// not the advice to mint a token), and the same call repeated after the
// decision runs, once, with no token to carry.
func TestDecisionPageRefusalReachesOtherClients(t *testing.T) {
	for name, opts := range map[string]*mcp.ClientOptions{
		"no elicitation": nil,
		"form only":      {ElicitationHandler: (&person{answer: "accept"}).handle},
	} {
		t.Run(name, func(t *testing.T) {
			f := connect(t, setup{
				enfOpts:    []axgate.Option{axgate.WithDecisionPages(pagesBase)},
				gateOpts:   asAlice(mcpgate.WithoutElicitation(), mcpgate.WithConfirmationHelp(func(*middleware.Call) string { return "mint a token" })),
				clientOpts: opts,
				protocol:   "2025-11-25",
			})
			env := refusal(t, f.call(t, "order_place", orderArgs, nil))
			d := env.Error.Details
			id, _ := d["decision_id"].(string)
			if env.Error.Code != string(axerr.CodeConfirmationMissing) || d["decision_url"] != pagesBase+"requests/"+id || d["agent_action"] == nil {
				t.Errorf("refusal = %s %v", env.Error.Code, d)
			}
			if d["how_to_confirm"] != nil || d["elicitation"] != nil {
				t.Errorf("a refusal naming the page also says to mint a token: %v", d)
			}
			if _, _, _, err := f.enf.Approvals().Decide(context.Background(), alice, id, true, ""); err != nil {
				t.Fatal(err)
			}
			structured(t, f.call(t, "order_place", orderArgs, nil))
			refusal(t, f.call(t, "order_place", orderArgs, nil))
			if f.seen.count() != 1 {
				t.Errorf("the tool ran %d times", f.seen.count())
			}
		})
	}
}

// TestDecisionPageRequestStateIsBoundToTheCall: the request state of a
// person sent to the page is the adapter's, signed, for this call only
// (another call's arguments, a forged state are refused), and taken once.
func TestDecisionPageRequestStateIsBoundToTheCall(t *testing.T) {
	enf, err := newEnforcer(t, axgate.WithDecisionPages(pagesBase))
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
	if !ok || page.Mode != "url" || page.URL != pagesBase+"requests/"+page.ElicitationID || first.RequestState == "" {
		t.Fatalf("first pass = %+v", first)
	}
	if _, _, _, err := enf.Approvals().Decide(context.Background(), alice, page.ElicitationID, true, ""); err != nil {
		t.Fatal(err)
	}
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
