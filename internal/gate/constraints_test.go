package gate_test

import (
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/middleware"
)

const constraintManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "room.book", "entity": "room", "action_type": "write", "description": "Book a room",
     "required_parameters": [
       {"name": "check_in", "type": "string", "format": "date", "description": "Arrival"},
       {"name": "check_out", "type": "string", "format": "date", "description": "Departure"},
       {"name": "guests", "type": "integer", "description": "Guests"}],
     "optional_parameters": [
       {"name": "min_price", "type": "number", "description": "Lowest price"},
       {"name": "max_price", "type": "number", "description": "Highest price"},
       {"name": "amount", "type": "number", "description": "Deposit"}],
     "risk_level": "medium", "idempotent": false, "scope": "user",
     "constraints": {
       "dates_ordered": "check_out > check_in",
       "party_size": "guests <= 8",
       "price_range": "!has(args.max_price) || !has(args.min_price) || args.max_price >= args.min_price",
       "deposit_limit": "!has(args.amount) || args.amount <= 500.0 || 'finance' in principal.roles"
     }},
    {"intent": "event.plan", "entity": "event", "action_type": "write", "description": "Plan an event",
     "risk_level": "low", "idempotent": false, "scope": "global",
     "constraints": {"ordered": "timestamp(args.end) > timestamp(args.start)"}},
    {"intent": "payment.send", "entity": "payment", "action_type": "write", "description": "Pay",
     "required_parameters": [{"name": "amount", "type": "number", "description": "Amount"}],
     "optional_parameters": [
       {"name": "cfo_code", "type": "string", "description": "CFO approval code"},
       {"name": "quantity", "type": "number", "description": "Units"},
       {"name": "vip", "type": "boolean", "description": "VIP"}],
     "risk_level": "low", "idempotent": false, "scope": "global",
     "constraints": {
       "cfo_above_1000": "args.amount <= 1000.0 || args.cfo_code == 'CFO-OK'",
       "units": "!has(args.quantity) || int(args.quantity) * 1000000 <= 100000000 || (has(args.vip) && args.vip)"
     }},
    {"intent": "order.lines", "entity": "order", "action_type": "write", "description": "Order lines",
     "required_parameters": [{"name": "amount", "type": "number", "description": "Amount"},
       {"name": "lines", "type": "array", "description": "Lines", "maxItems": 50}],
     "risk_level": "low", "idempotent": false, "scope": "global",
     "constraints": {"cheap_or_small": "args.lines.all(l, l.price <= 100.0) || args.amount < 10.0"}},
    {"intent": "product.search", "entity": "product", "action_type": "read", "description": "Search",
     "risk_level": "none", "idempotent": true, "scope": "global"}
  ]
}`

func TestConstraints(t *testing.T) {
	m := mustParse(t, constraintManifest)
	g, err := gate.NewConstraints(m)
	if err != nil {
		t.Fatal(err)
	}
	alice := middleware.Principal{ID: "alice"}
	finance := middleware.Principal{ID: "fin", Roles: []string{"finance"}}
	tests := []struct {
		name    string
		intent  string
		args    string
		p       middleware.Principal
		code    axerr.Code
		details map[string]any
	}{
		{name: "all hold", intent: "room.book", args: `{"check_in":"2026-05-01","check_out":"2026-05-03","guests":2}`},
		{name: "dates reversed", intent: "room.book", args: `{"check_in":"2026-05-03","check_out":"2026-05-01","guests":2}`,
			code: axerr.CodePreconditionFailed, details: map[string]any{"reason": "constraint_failed", "failed_constraint": "dates_ordered", "expression": "check_out > check_in"}},
		{name: "same day", intent: "room.book", args: `{"check_in":"2026-05-01","check_out":"2026-05-01","guests":2}`,
			code: axerr.CodePreconditionFailed, details: map[string]any{"failed_constraint": "dates_ordered"}},
		{name: "double against int literal", intent: "room.book", args: `{"check_in":"2026-05-01","check_out":"2026-05-03","guests":9}`,
			code: axerr.CodePreconditionFailed, details: map[string]any{"failed_constraint": "party_size"}},
		{name: "two fail, both named", intent: "room.book", args: `{"check_in":"2026-05-03","check_out":"2026-05-01","guests":9}`,
			code: axerr.CodePreconditionFailed, details: map[string]any{"failed_constraint": "dates_ordered", "failed_constraints": []any{"dates_ordered", "party_size"}}},
		{name: "optional pair absent, guarded by has()", intent: "room.book", args: `{"check_in":"2026-05-01","check_out":"2026-05-03","guests":2,"min_price":50}`},
		{name: "optional pair present, holds", intent: "room.book", args: `{"check_in":"2026-05-01","check_out":"2026-05-03","guests":2,"min_price":50,"max_price":80.5}`},
		{name: "optional pair present, fails", intent: "room.book", args: `{"check_in":"2026-05-01","check_out":"2026-05-03","guests":2,"min_price":90,"max_price":80}`,
			code: axerr.CodePreconditionFailed, details: map[string]any{"failed_constraint": "price_range"}},
		{name: "principal: over the limit", intent: "room.book", args: `{"check_in":"2026-05-01","check_out":"2026-05-03","guests":2,"amount":900}`, p: alice,
			code: axerr.CodePreconditionFailed, details: map[string]any{"failed_constraint": "deposit_limit"}},
		{name: "principal: role lifts the limit", intent: "room.book", args: `{"check_in":"2026-05-01","check_out":"2026-05-03","guests":2,"amount":900}`, p: finance},
		{name: "timestamps with offsets", intent: "event.plan", args: `{"start":"2026-05-01T10:00:00+02:00","end":"2026-05-01T09:30:00Z"}`},
		{name: "timestamps reversed", intent: "event.plan", args: `{"start":"2026-05-01T10:00:00Z","end":"2026-05-01T11:00:00+02:00"}`,
			code: axerr.CodePreconditionFailed, details: map[string]any{"failed_constraint": "ordered"}},
		{name: "present but not evaluable: refused", intent: "event.plan", args: `{"start":"yesterday","end":"2026-05-01T11:00:00Z"}`,
			code: axerr.CodePreconditionFailed, details: map[string]any{"reason": "constraint_not_evaluable", "failed_constraint": "ordered"}},
		{name: "wrong types: refused", intent: "event.plan", args: `{"start":1,"end":2}`,
			code: axerr.CodePreconditionFailed, details: map[string]any{"reason": "constraint_not_evaluable"}},
		{name: "no constraints", intent: "product.search", args: `{}`},
		// An absent argument read outside has() refuses, even where || would
		// absorb the error (CEL: error || true is true).
		{name: "absent argument read without has(), absorbed by ||", intent: "payment.send", args: `{"amount":5000}`,
			code: axerr.CodePreconditionFailed, details: map[string]any{"reason": "constraint_not_evaluable", "failed_constraint": "cfo_above_1000"}},
		{name: "absent argument not read: short circuit", intent: "payment.send", args: `{"amount":500}`},
		{name: "cfo code given", intent: "payment.send", args: `{"amount":5000,"cfo_code":"CFO-OK"}`},
		{name: "wrong cfo code", intent: "payment.send", args: `{"amount":5000,"cfo_code":"nope"}`,
			code: axerr.CodePreconditionFailed, details: map[string]any{"reason": "constraint_failed", "failed_constraint": "cfo_above_1000"}},
		// quantity * 1000000 overflows int64: an error, which || true would
		// absorb. (1e300 itself is not I-JSON and never reaches CEL.)
		{name: "overflow absorbed by ||", intent: "payment.send", args: `{"amount":1,"quantity":9000000000000000,"vip":true}`,
			code: axerr.CodePreconditionFailed, details: map[string]any{"reason": "constraint_not_evaluable", "failed_constraint": "units"}},
		{name: "overflow", intent: "payment.send", args: `{"amount":1,"quantity":9000000000000000}`,
			code: axerr.CodePreconditionFailed, details: map[string]any{"reason": "constraint_not_evaluable", "failed_constraint": "units"}},
		{name: "units hold", intent: "payment.send", args: `{"amount":1,"quantity":100}`},
		// An error inside a loop iteration (a line without price) refuses,
		// also where all() (error && false is false) and || absorb it.
		{name: "error in a loop iteration", intent: "order.lines", args: `{"amount":50,"lines":[{"qty":1},{"price":50}]}`,
			code: axerr.CodePreconditionFailed, details: map[string]any{"reason": "constraint_not_evaluable", "failed_constraint": "cheap_or_small"}},
		{name: "error in a loop iteration, || true", intent: "order.lines", args: `{"amount":5,"lines":[{"qty":1},{"price":500}]}`,
			code: axerr.CodePreconditionFailed, details: map[string]any{"reason": "constraint_not_evaluable"}},
		{name: "loop holds", intent: "order.lines", args: `{"amount":50,"lines":[{"price":50},{"price":60}]}`},
		{name: "arguments not an object", intent: "event.plan", args: `"x"`, code: axerr.CodeInvalidArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := g.Check(call(t, m, tt.intent, tt.args, tt.p))
			if tt.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			d := refusal(t, err, tt.code, tt.code.HTTPStatus())
			for k, want := range tt.details {
				if !reflect.DeepEqual(d[k], want) {
					t.Errorf("details[%s] = %#v, want %#v", k, d[k], want)
				}
			}
			if tt.code == axerr.CodePreconditionFailed && d["suggestion"] == nil {
				t.Error("no suggestion")
			}
		})
	}
	if axerr.CodePreconditionFailed.HTTPStatus() != http.StatusPreconditionFailed {
		t.Error("precondition status is not 412")
	}
}

func TestConstraintsCompileErrors(t *testing.T) {
	m := mustParse(t, `{"version":"1.0.0","actions":[
	  {"intent":"room.book","entity":"room","action_type":"write","description":"Book","risk_level":"low","idempotent":false,"scope":"global",
	   "required_parameters":[{"name":"check_in","type":"string","description":"In"}],
	   "constraints":{"syntax":"check_in >","typo":"check_inn > 1","not_bool":"check_in + 'x'","ok":"check_in != ''"}}]}`)
	_, err := gate.NewConstraints(m)
	if err == nil {
		t.Fatal("bad constraints compiled")
	}
	for _, want := range []string{"/actions/0/constraints/syntax", "/actions/0/constraints/typo", "/actions/0/constraints/not_bool"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "/constraints/ok") {
		t.Errorf("error names a good constraint: %v", err)
	}
}

// TestConstraintsConcurrent evaluates the compiled programs from several
// goroutines at once (run with -race): programs and pooled activations are
// shared by every call.
func TestConstraintsConcurrent(t *testing.T) {
	m := mustParse(t, constraintManifest)
	g, err := gate.NewConstraints(m)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				good := (i+j)%2 == 0
				args := `{"check_in":"2026-05-01","check_out":"2026-05-03","guests":2,"amount":900}`
				if !good {
					args = `{"check_in":"2026-05-03","check_out":"2026-05-01","guests":2}`
				}
				p := middleware.Principal{ID: "fin", Roles: []string{"finance"}}
				err := g.Check(call(t, m, "room.book", args, p))
				if good != (err == nil) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("goroutine saw a wrong decision: %v", err)
	}
}
