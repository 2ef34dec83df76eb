package axgate

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/fixtures"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// appliesManifest has actions that each give one gate something to check,
// and one that gives none.
const appliesManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "note.read", "entity": "note", "action_type": "read", "description": "Read a note",
     "required_parameters": [{"name": "note_id", "type": "string"}], "idempotent": true, "scope": "global"},
    {"intent": "order.refund", "entity": "order", "action_type": "write", "description": "Refund an order",
     "required_parameters": [{"name": "order_id", "type": "string"}, {"name": "amount", "type": "number"}],
     "constraints": {"positive": "amount > 0"},
     "preconditions": ["order_open"], "postconditions": ["refund_recorded"],
     "rate_limit": "5/minute", "cooldown": "10s", "idempotent": false,
     "risk_level": "medium", "confirmation_required": true,
     "approval_required": true, "approval_roles": ["admin"]},
    {"intent": "vault.open", "entity": "vault", "action_type": "write", "description": "Open the vault",
     "risk_level": "critical"},
    {"intent": "report.export", "entity": "report", "action_type": "read", "description": "Export",
     "output_schema": {"type": "object", "required": ["url"]}}
  ]
}`

// TestStagesLeftOutPassEveryCall: a stage that says it does not apply to an
// action (and so is left out of that action's chain) passes every call of
// it on unchanged, however hostile: tokens that are garbage, an idempotency
// key, arguments that break every rule or are not JSON, a checked call.
// Were one of them to refuse or record something, leaving it out would
// have let a call through that it stops.
func TestStagesLeftOutPassEveryCall(t *testing.T) {
	inline, err := manifest.Parse([]byte(appliesManifest))
	if err != nil {
		t.Fatal(err)
	}
	manifests := map[string]*manifest.Manifest{"inline": inline}
	for _, path := range []string{
		fixtures.Manifest("shop-full.json"),
		fixtures.Manifest("shop-basic.json"),
		filepath.Join("manifest", "testdata", "safety.json"),
		filepath.Join("manifest", "testdata", "reference-full.yaml"),
	} {
		m, err := manifest.LoadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		manifests[path] = m
	}
	ctx := context.WithValue(context.Background(), ctxMarker{}, "the caller's")
	checked := 0
	for name, m := range manifests {
		e, err := New(m, WithUnboundConditions())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range m.Actions {
			for _, s := range e.stages {
				if s.AppliesTo(a) {
					continue
				}
				for i, call := range hostileCalls(a) {
					before := call.Facts
					reached := false
					var passed context.Context
					next := middleware.InvokerFunc(func(ctx context.Context, _ *middleware.Call) (middleware.Result, error) {
						reached, passed = true, ctx
						return middleware.Result{Value: "tool result"}, nil
					})
					res, err := s.Interceptor(ctx, call, next)
					if err != nil || !reached || res.Value != "tool result" {
						t.Errorf("%s: %s, call %d: stage %s is left out of the chain but answered %v (passed on: %v)", name, a.Intent, i, s.Name, err, reached)
					}
					if reached && passed != ctx {
						t.Errorf("%s: %s, call %d: stage %s is left out of the chain but passed on a context of its own", name, a.Intent, i, s.Name)
					}
					if !reflect.DeepEqual(before, call.Facts) {
						t.Errorf("%s: %s, call %d: stage %s is left out of the chain but recorded facts %+v", name, a.Intent, i, s.Name, call.Facts)
					}
					// The commits are unexported; their number is enough.
					if n := reflect.ValueOf(call).Elem().FieldByName("commits").Len(); n != 0 {
						t.Errorf("%s: %s, call %d: stage %s is left out of the chain but registered %d commits", name, a.Intent, i, s.Name, n)
					}
					checked++
				}
			}
		}
		e.Close()
	}
	// The inline manifest alone leaves out seven gates for note.read.
	if checked < 7*len(hostileCalls(nil)) {
		t.Fatalf("only %d left-out stage calls checked", checked)
	}

	// And the stages that are left out for note.read are the ones that apply
	// to order.refund, which gives each of them something to check.
	e, err := New(inline, WithUnboundConditions())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, s := range e.stages {
		if !s.AppliesTo(inline.Tool("order_refund")) {
			t.Errorf("stage %s does not apply to order.refund", s.Name)
		}
	}
}

type ctxMarker struct{}

func hostileCalls(a *manifest.Action) []*middleware.Call {
	p := middleware.Principal{ID: "mallory", Tenant: "other", Roles: []string{"nobody"}, Scopes: []string{}}
	var out []*middleware.Call
	for _, args := range []string{`{"amount": -5, "note_id": 7, "tenant_id": "acme", "user_id": "alice"}`, `not json`, ``} {
		for _, check := range []bool{false, true} {
			c := middleware.NewCall("x", json.RawMessage(args), p)
			c.Action = a
			c.Credentials.Confirmation = "garbage"
			c.Credentials.Approvals = []string{"garbage", "more.garbage.here"}
			c.Credentials.IdempotencyKey = "key-1"
			c.Credentials.ClaimedTenant = "acme"
			c.SetCheckOnly(check)
			out = append(out, c)
		}
	}
	return out
}

// TestActionChangedInTheChainIsRefused: a stage of the user's that renames
// the tool of a call before the intent gate cannot carry a call of note.read
// (whose chain has no confirmation, approval or rate limit) into
// order.refund, which needs them all: the chain chosen for note.read refuses
// it before the next gate runs, and the tool never runs.
func TestActionChangedInTheChainIsRefused(t *testing.T) {
	m, err := manifest.Parse([]byte(appliesManifest))
	if err != nil {
		t.Fatal(err)
	}
	rename := middleware.Stage{Name: "rename", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		call.Tool = "order_refund"
		return next.Invoke(ctx, call)
	}}
	e, err := New(m, WithUnboundConditions(), WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		return append([]middleware.Stage{rename}, std...)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ran := false
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		ran = true
		return middleware.Result{}, nil
	})
	p := middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"admin"}}
	const args = `{"order_id":"o-1","amount":5}`
	if _, err = e.Wrap(tool).Invoke(context.Background(), middleware.NewCall("note_read", json.RawMessage(args), p)); ran || !internalFrom(err, middleware.StageIntent) {
		t.Fatalf("Wrap: err = %v (tool ran: %v); want AXGATE_INTERNAL from the intent gate", err, ran)
	}
	if err := e.Check(context.Background(), middleware.NewCall("note_read", json.RawMessage(args), p)); !internalFrom(err, middleware.StageIntent) {
		t.Fatalf("Check: err = %v; want AXGATE_INTERNAL from the intent gate", err)
	}
}

func internalFrom(err error, gate string) bool {
	ae, ok := axerr.As(err)
	return ok && ae.Code == axerr.CodeInternal && ae.Gate == gate
}

// TestClearedActionIsRefused: a stage of the user's after the intent gate
// that clears call.Action does not get a call of note.read to its tool. In
// the whole chain the constraint gate would refuse a call with no action;
// note.read's chain leaves that gate out, so its pin refuses the call when
// it leaves the last stage (commit, for Wrap; the clearing stage
// itself, for Check), before the tool runs.
func TestClearedActionIsRefused(t *testing.T) {
	m, err := manifest.Parse([]byte(appliesManifest))
	if err != nil {
		t.Fatal(err)
	}
	clear := middleware.Stage{Name: "clear", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		call.Action = nil
		return next.Invoke(ctx, call)
	}}
	e, err := New(m, WithUnboundConditions(), WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		return append(std, clear)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ran := false
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		ran = true
		return middleware.Result{}, nil
	})
	p := middleware.Principal{ID: "alice", Tenant: "acme"}
	call := func() *middleware.Call {
		return middleware.NewCall("note_read", json.RawMessage(`{"note_id":"n-1"}`), p)
	}
	if _, err := e.Wrap(tool).Invoke(context.Background(), call()); ran || !internalFrom(err, middleware.StageCommit) {
		t.Fatalf("Wrap: err = %v (tool ran: %v); want AXGATE_INTERNAL from the commit stage", err, ran)
	}
	if err := e.Check(context.Background(), call()); !internalFrom(err, "clear") {
		t.Fatalf("Check: err = %v; want AXGATE_INTERNAL from the clearing stage", err)
	}
}

// TestWrappedStandardStageSeesEveryCall: a user who wraps the rate-limit
// gate's interceptor in a block list of their own, keeping the stage's name
// and Applies, gets the block list applied to every call, not only to the
// calls of rate-limited actions.
func TestWrappedStandardStageSeesEveryCall(t *testing.T) {
	m, err := manifest.Parse([]byte(appliesManifest))
	if err != nil {
		t.Fatal(err)
	}
	blocked := axerr.New(axerr.CodeRoleInsufficient, "blocked")
	e, err := New(m, WithUnboundConditions(), WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		for i, s := range std {
			if s.Name != middleware.StageRateLimit {
				continue
			}
			inner := s.Interceptor
			std[i].Interceptor = func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
				if call.Principal.ID == "mallory" {
					return middleware.Result{}, blocked
				}
				return inner(ctx, call, next)
			}
		}
		return std
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	stages, _ := e.StagesFor("note_read")
	if !slices.Contains(stages, middleware.StageRateLimit) {
		t.Errorf("note_read's chain %v leaves out the wrapped rate-limit stage", stages)
	}
	mallory := middleware.Principal{ID: "mallory", Tenant: "acme"}
	_, err = e.Wrap(okInvoker).Invoke(context.Background(), middleware.NewCall("note_read", json.RawMessage(`{"note_id":"n-1"}`), mallory))
	if ae, ok := axerr.As(err); !ok || ae.Code != axerr.CodeRoleInsufficient || ae.Gate != middleware.StageRateLimit {
		t.Fatalf("err = %v; want the block list's refusal from %s", err, middleware.StageRateLimit)
	}
	// The standard stages left untouched keep their Applies.
	if slices.Contains(stages, middleware.StageConfirmation) {
		t.Errorf("note_read's chain %v has the confirmation gate", stages)
	}
}

var okInvoker = middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
	return middleware.Result{}, nil
})
