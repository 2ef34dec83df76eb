package axgate

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

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
		filepath.Join("..", "shared", "spec", "axag", "valid-full.json"),
		filepath.Join("..", "shared", "spec", "axag", "valid-basic.json"),
		filepath.Join("manifest", "testdata", "safety.json"),
		filepath.Join("manifest", "testdata", "reference-full.yaml"),
	} {
		m, err := manifest.LoadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		manifests[path] = m
	}
	ctx := context.Background()
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
					next := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
						reached = true
						return middleware.Result{Value: "tool result"}, nil
					})
					res, err := s.Interceptor(ctx, call, next)
					if err != nil || !reached || res.Value != "tool result" {
						t.Errorf("%s: %s, call %d: stage %s is left out of the chain but answered %v (passed on: %v)", name, a.Intent, i, s.Name, err, reached)
					}
					if !reflect.DeepEqual(before, call.Facts) {
						t.Errorf("%s: %s, call %d: stage %s is left out of the chain but recorded facts %+v", name, a.Intent, i, s.Name, call.Facts)
					}
					if err := call.RunCommits(ctx); err != nil {
						t.Errorf("%s: %s, call %d: stage %s is left out of the chain but its commit failed: %v", name, a.Intent, i, s.Name, err)
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
