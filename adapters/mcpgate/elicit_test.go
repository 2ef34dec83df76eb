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
	"github.com/axgate/axgate/middleware"
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
				enfOpts:    []axgate.Option{axgate.WithAuditSink(log)},
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
	out := structured(t, f.call(t, "order_place", orderArgs, mcp.Meta{mcpgate.MetaConfirmation: token}))
	if out["elicited"] != false {
		t.Errorf("elicited = %v", out["elicited"])
	}
	// Single use.
	env = refusal(t, f.call(t, "order_place", orderArgs, mcp.Meta{mcpgate.MetaConfirmation: token}))
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
	env := refusal(t, f.call(t, "order_place", other, mcp.Meta{mcpgate.MetaConfirmation: token}))
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

// TestElicitationAnswerIsBoundToTheArguments drives the multi round-trip by
// hand: an answer whose request state is not the digest of these arguments
// is not taken as the person's answer to them.
func TestElicitationAnswerIsBoundToTheArguments(t *testing.T) {
	enf, err := newEnforcer(t)
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	s := &seen{}
	h := mcpgate.ToolHandler(enf, s.echo(), asAlice()...)
	caps := map[string]any{mcp.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}}
	call := func(state string, answer mcp.InputResponse) *mcp.CallToolResult {
		p := &mcp.CallToolParamsRaw{Name: "order_place", Arguments: json.RawMessage(orderArgs), RequestState: state}
		p.Meta = caps
		if answer != nil {
			p.InputResponses = mcp.InputResponseMap{mcpgate.ConfirmationInputID: answer}
		}
		res, err := h(context.Background(), &mcp.CallToolRequest{Params: p})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := call("", nil)
	q, ok := first.InputRequests[mcpgate.ConfirmationInputID].(*mcp.ElicitParams)
	if !ok || q.Message != orderQuestion || first.RequestState == "" {
		t.Fatalf("first pass = %+v", first)
	}
	accept := &mcp.ElicitResult{Action: "accept"}
	if again := call("some-other-digest", accept); again.InputRequests == nil || s.count() != 0 {
		t.Fatalf("an answer about other arguments was taken: %+v", again)
	}
	structured(t, call(first.RequestState, accept))
	if s.count() != 1 {
		t.Errorf("the tool ran %d times", s.count())
	}
}
