package mcpgate_test

import (
	"context"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// confirmStage follows the contract of the confirmation gate for the
// adapter's sake: with no token it asks through Call.Elicit when the
// transport can ask, and records an elicited confirmation in the facts.
// The real gate is tested in confirm_test.go.
var confirmStage = middleware.Stage{Name: "confirmation", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
	if !call.Action.ConfirmationRequired || call.Credentials.Confirmation == "valid" {
		return next.Invoke(ctx, call)
	}
	missing := axerr.New(axerr.CodeConfirmationMissing, "this call needs the person's confirmation").WithIntent(call.Intent())
	if call.Elicit == nil {
		return middleware.Result{}, missing
	}
	ok, err := call.Elicit(ctx, "Place the order for cart "+argString(call, "cart_id")+"?")
	if err != nil {
		return middleware.Result{}, missing.WithCause(err)
	}
	if !ok {
		return middleware.Result{}, missing.With("reason", "declined")
	}
	call.Facts.ConfirmationElicited = true
	return next.Invoke(ctx, call)
}}

func argString(call *middleware.Call, name string) string {
	args, _ := call.Args()
	s, _ := args[name].(string)
	return s
}

const orderArgs = `{"cart_id":"3f0c2a8e-9b1d-4c56-8f3e-2a1b0c9d8e7f","shipping_address_id":"home"}`

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

// Both paths of the SDK: a current client gets the question in an
// input-required result; a client on an older protocol is asked by the
// server with elicitation/create.
var protocols = []string{"2026-07-28", "2025-11-25", "2025-06-18"}

func TestElicitationAcceptRunsTheCall(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			p := &person{answer: "accept"}
			f := connect(t, setup{
				enfOpts:    []axgate.Option{appendStage(confirmStage)},
				gateOpts:   asAlice(),
				clientOpts: &mcp.ClientOptions{ElicitationHandler: p.handle},
				protocol:   proto,
			})
			out := structured(t, f.call(t, "order_place", orderArgs, nil))
			if out["elicited"] != true {
				t.Errorf("the tool did not see an elicited confirmation: %v", out)
			}
			if len(p.questions) != 1 || p.questions[0] != "Place the order for cart 3f0c2a8e-9b1d-4c56-8f3e-2a1b0c9d8e7f?" {
				t.Errorf("the person was asked %q", p.questions)
			}
			if f.seen.count() != 1 {
				t.Errorf("the tool ran %d times", f.seen.count())
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
					enfOpts:    []axgate.Option{appendStage(confirmStage)},
					gateOpts:   asAlice(),
					clientOpts: &mcp.ClientOptions{ElicitationHandler: p.handle},
					protocol:   proto,
				})
				env := refusal(t, f.call(t, "order_place", orderArgs, nil))
				if env.Error.Code != string(axerr.CodeConfirmationMissing) {
					t.Errorf("code = %s", env.Error.Code)
				}
				if len(p.questions) != 1 || f.seen.count() != 0 {
					t.Errorf("asked %d times, tool ran %d times", len(p.questions), f.seen.count())
				}
			})
		}
	}
}

func TestNoElicitationWithoutClientSupport(t *testing.T) {
	f := connect(t, setup{enfOpts: []axgate.Option{appendStage(confirmStage)}, gateOpts: asAlice()})
	env := refusal(t, f.call(t, "order_place", orderArgs, nil))
	if env.Error.Code != string(axerr.CodeConfirmationMissing) {
		t.Errorf("code = %s", env.Error.Code)
	}
	// The token flow still works.
	out := structured(t, f.call(t, "order_place", orderArgs, mcp.Meta{mcpgate.MetaConfirmation: "valid"}))
	if out["elicited"] != false {
		t.Errorf("elicited = %v", out["elicited"])
	}
}

func TestWithoutElicitationNeverAsks(t *testing.T) {
	p := &person{answer: "accept"}
	f := connect(t, setup{
		enfOpts:    []axgate.Option{appendStage(confirmStage)},
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
		enfOpts:    []axgate.Option{appendStage(confirmStage)},
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
