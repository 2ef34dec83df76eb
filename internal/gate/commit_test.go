package gate_test

import (
	"context"
	"testing"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/middleware"
)

// TestCustomChainWithoutCommitNeverRunsTheTool: a chain built with
// middleware.Build around the confirmation gate but without the commit
// stage refuses the call with AXGATE_INTERNAL before the tool runs, and
// the token stays unspent; with gate.Commit() the same token runs the
// tool once and is spent.
func TestCustomChainWithoutCommitNeverRunsTheTool(t *testing.T) {
	f := newTkFixture(t)
	const args = `{"order_id":"o-1","amount":25}`
	tok := f.signEd(t, nil, f.claims(t, "order.refund", args))
	var ran int
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		ran++
		return middleware.Result{}, nil
	})
	call := func() *middleware.Call {
		c := f.call("order.refund", args)
		c.Credentials.Confirmation = tok
		return c
	}

	forgot := middleware.Build(tool, nil, f.gate.Stage())
	_, err := forgot.Invoke(t.Context(), call())
	if e, ok := axerr.As(err); !ok || e.Code != axerr.CodeInternal || ran != 0 {
		t.Fatalf("chain without the commit stage: %v, tool ran %d times; want AXGATE_INTERNAL, tool not run", err, ran)
	}

	// The same chain's gates, the commit stage composed in: the token was
	// not spent by the refused call, and is spent now.
	chain := middleware.Build(tool, nil, f.gate.Stage(), gate.Commit())
	if _, err := chain.Invoke(t.Context(), call()); err != nil || ran != 1 {
		t.Fatalf("with the commit stage: %v, tool ran %d times; want it to run once", err, ran)
	}
	if _, err := chain.Invoke(t.Context(), call()); err == nil || ran != 1 {
		t.Fatalf("replayed token: %v, tool ran %d times; want a refusal", err, ran)
	}
}

// TestCommitInAnOuterChain: gates composed into one interceptor (a
// middleware.Build around the interceptor's next, see nested) hand the call back to the outer chain, whose commit
// stage spends the token: that is not a tool boundary. A check-only call
// passes the gates without a commit stage.
func TestCommitInAnOuterChain(t *testing.T) {
	f := newTkFixture(t)
	const args = `{"order_id":"o-1","amount":25}`
	tok := f.signEd(t, nil, f.claims(t, "order.refund", args))
	var ran int
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		ran++
		return middleware.Result{}, nil
	})
	c := f.call("order.refund", args)
	c.Credentials.Confirmation = tok
	c.SetCheckOnly(true)
	checked := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) { return middleware.Result{}, nil })
	if _, err := middleware.Build(checked, nil, f.gate.Stage()).Invoke(t.Context(), c); err != nil {
		t.Fatalf("check-only call: %v; want it to pass the gate", err)
	}
	c.SetCheckOnly(false)
	outer := middleware.Build(tool, nil, middleware.Stage{Name: "tokens", Interceptor: nested(f.gate.Stage())}, gate.Commit())
	if _, err := outer.Invoke(t.Context(), c); err != nil || ran != 1 {
		t.Fatalf("commit in the outer chain: %v, tool ran %d times; want it to run", err, ran)
	}
}

// nested composes stages into one interceptor: a chain built, for each
// call, around the outer chain's continuation.
func nested(stages ...middleware.Stage) middleware.Interceptor {
	return func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		return middleware.Build(next, nil, stages...).Invoke(ctx, call)
	}
}

// TestRefusedCallRetried: a call refused after the confirmation gate
// accepted its token (by a later gate) leaves nothing deferred behind: the
// same call retried and allowed spends its token once and runs.
func TestRefusedCallRetried(t *testing.T) {
	f := newTkFixture(t)
	const args = `{"order_id":"o-1","amount":25}`
	c := f.call("order.refund", args)
	c.Credentials.Confirmation = f.signEd(t, nil, f.claims(t, "order.refund", args))
	refuse := true
	later := middleware.Stage{Name: "later", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if refuse {
			return middleware.Result{}, axerr.New(axerr.CodeApprovalMissing, "not yet")
		}
		return next.Invoke(ctx, call)
	}}
	var ran int
	chain := middleware.Build(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		ran++
		return middleware.Result{}, nil
	}), nil, f.gate.Stage(), later, gate.Commit())
	if _, err := chain.Invoke(t.Context(), c); err == nil || ran != 0 {
		t.Fatalf("first run: %v, ran %d; want the later gate's refusal", err, ran)
	}
	refuse = false
	if _, err := chain.Invoke(t.Context(), c); err != nil || ran != 1 {
		t.Fatalf("the same call retried: %v, ran %d; want it to run once", err, ran)
	}
}

// TestInnerRefusalKeepsOuterCommits: a chain used as one interceptor of
// another (nested) drops only what its own run registered when
// it refuses; an outer stage that goes on after that refusal still reaches
// a commit stage that spends the outer gates' tokens.
func TestInnerRefusalKeepsOuterCommits(t *testing.T) {
	f := newTkFixture(t)
	const args = `{"order_id":"o-1","amount":25}`
	tok := f.signEd(t, nil, f.claims(t, "order.refund", args))
	refuser := func(context.Context, *middleware.Call, middleware.Invoker) (middleware.Result, error) {
		return middleware.Result{}, axerr.New(axerr.CodePreconditionFailed, "no")
	}
	fallback := middleware.Stage{Name: "fallback", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if res, err := nested(middleware.Stage{Interceptor: refuser})(ctx, call, next); err == nil {
			return res, nil
		}
		return next.Invoke(ctx, call)
	}}
	var ran int
	chain := middleware.Build(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		ran++
		return middleware.Result{}, nil
	}), nil, f.gate.Stage(), fallback, gate.Commit())
	for i := range 2 {
		c := f.call("order.refund", args)
		c.Credentials.Confirmation = tok
		_, err := chain.Invoke(t.Context(), c)
		if (i == 0) != (err == nil) || ran != 1 {
			t.Fatalf("run %d: %v, tool ran %d times; want the first to run and spend the token, the second refused", i, err, ran)
		}
	}
}
