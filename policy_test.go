package axgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// polManifest loads one of the policy test manifests in testdata/policy.
func polManifest(t testing.TB, name string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.LoadFile(filepath.Join("testdata", "policy", name))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// polTool is a tool that counts its invocations and returns value.
type polTool struct {
	calls atomic.Int32
	value any
	err   error
}

func (p *polTool) Invoke(context.Context, *middleware.Call) (middleware.Result, error) {
	p.calls.Add(1)
	return middleware.Result{Value: p.value}, p.err
}

// polDetails returns the refusal's code, status and envelope details, as a
// caller decodes them from the wire.
func polDetails(t *testing.T, err error) (axerr.Code, int, map[string]any) {
	t.Helper()
	ae, ok := axerr.As(err)
	if !ok {
		t.Fatalf("error %v (%T) is not an *errors.Error", err, err)
	}
	raw, _ := json.Marshal(ae)
	var env struct {
		Error struct {
			Code    axerr.Code     `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	return env.Error.Code, ae.HTTPStatus(), env.Error.Details
}

var (
	traveller = middleware.Principal{ID: "u-1", Tenant: "acme", Roles: []string{"traveller"}}
	goodStay  = `{"hotel_id":"h-1","check_in":"2026-05-01","check_out":"2026-05-04","guests":2}`
)

func polWith(p middleware.Principal, f func(*middleware.Principal)) middleware.Principal {
	p.Roles = slices.Clone(p.Roles)
	f(&p)
	return p
}

// hostCarts is the host's own state: which carts its cart.validate tool has
// validated. The condition cart_validated is a check over it.
type hostCarts struct {
	mu        sync.Mutex
	validated map[string]bool
}

func (h *hostCarts) cartValidated(_ context.Context, call *middleware.Call) error {
	args, err := call.Args()
	if err != nil {
		return err
	}
	id, _ := args["cart_id"].(string)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.validated[id] {
		return errors.New("cart not validated")
	}
	return nil
}

// TestPolicyGates is the table of every policy gate through Enforcer.Wrap:
// the allowed call reaches the tool and returns its result; every refusal
// has its code, status and details, and a pre-execution refusal never
// invokes the tool.
func TestPolicyGates(t *testing.T) {
	hotel := polManifest(t, "hotel.json")
	shop := polManifest(t, "shop.json")
	carts := &hostCarts{validated: map[string]bool{"c-ready": true}}
	hotelEnf, err := axgate.New(hotel, axgate.WithAccess(gates.AccessOptions{UserOverrideRoles: []string{"support"}}))
	if err != nil {
		t.Fatal(err)
	}
	shopEnf, err := axgate.New(shop,
		axgate.WithPrecondition("cart_validated", carts.cartValidated), axgate.WithPostcondition("cart_validated", func(ctx context.Context, call *middleware.Call, _ middleware.Result) error {
			return carts.cartValidated(ctx, call)
		}),
		axgate.WithPostconditionExpr("order_created", `has(result.order_id) && result.order_id != ""`))
	if err != nil {
		t.Fatal(err)
	}
	shopper := middleware.Principal{ID: "u-1"}

	tests := []struct {
		name      string
		enf       *axgate.Enforcer
		tool      string
		args      string
		p         middleware.Principal
		claimed   string
		result    any // the tool's result; nil = {"ok": true}
		code      axerr.Code
		gate      string
		details   map[string]any
		toolCalls int32 // for a refusal: 0 unless the tool ran (postconditions)
	}{
		// Allowed.
		{name: "read, no scope claim", enf: hotelEnf, tool: "hotel_search", args: `{"city":"Lyon"}`, p: middleware.Principal{}},
		{name: "read, scope granted by type", enf: hotelEnf, tool: "hotel_search", args: `{"city":"Lyon"}`, p: middleware.Principal{Scopes: []string{"read"}}},
		{name: "write, all gates pass", enf: hotelEnf, tool: "booking_create", args: goodStay, p: traveller},
		{name: "write, own tenant named, claimed", enf: hotelEnf, tool: "booking_create", args: `{"hotel_id":"h-1","check_in":"2026-05-01","check_out":"2026-05-04","guests":2,"org_id":"acme"}`, p: traveller, claimed: "acme"},
		{name: "user scope, own id", enf: hotelEnf, tool: "booking_cancel", args: `{"booking_id":"b-1","user_id":"u-1"}`, p: traveller},
		{name: "user scope, override role", enf: hotelEnf, tool: "booking_cancel", args: `{"booking_id":"b-1","user_id":"u-2"}`, p: polWith(traveller, func(p *middleware.Principal) { p.Roles = append(p.Roles, "support") })},
		{name: "precondition holds", enf: shopEnf, tool: "order_place", args: `{"cart_id":"c-ready"}`, p: shopper, result: map[string]any{"order_id": "o-1"}},

		// Roles.
		{name: "role missing", enf: hotelEnf, tool: "booking_create", args: goodStay, p: middleware.Principal{ID: "u-1", Tenant: "acme"},
			code: axerr.CodeRoleInsufficient, gate: "access", details: map[string]any{"reason": "role_missing", "required_roles": []any{"traveller", "travel_admin"}}},
		// Granted scopes.
		{name: "scope not granted", enf: hotelEnf, tool: "booking_create", args: goodStay, p: polWith(traveller, func(p *middleware.Principal) { p.Scopes = []string{"read", "hotel.*"} }),
			code: axerr.CodeScopeViolation, gate: "access", details: map[string]any{"reason": "scope_not_granted", "granting_scopes": []any{"booking.create", "booking.*", "*", "write"}}},
		// scope: user.
		{name: "user scope, other user", enf: hotelEnf, tool: "booking_cancel", args: `{"booking_id":"b-1","user_id":"u-2"}`, p: traveller,
			code: axerr.CodeScopeViolation, gate: "access", details: map[string]any{"reason": "argument_names_other_user", "argument": "/user_id"}},
		// scope: tenant.
		{name: "tenant: caller has none", enf: hotelEnf, tool: "booking_create", args: goodStay, p: middleware.Principal{ID: "u-1", Roles: []string{"traveller"}},
			code: axerr.CodeTenantBoundary, gate: "access", details: map[string]any{"reason": "no_tenant"}},
		{name: "tenant: claimed other", enf: hotelEnf, tool: "booking_create", args: goodStay, p: traveller, claimed: "globex",
			code: axerr.CodeTenantBoundary, gate: "access", details: map[string]any{"reason": "claimed_tenant_mismatch"}},
		{name: "tenant: argument names other", enf: hotelEnf, tool: "booking_create", args: `{"hotel_id":"h-1","check_in":"2026-05-01","check_out":"2026-05-04","guests":2,"org_id":"globex"}`, p: traveller,
			code: axerr.CodeTenantBoundary, gate: "access", details: map[string]any{"reason": "argument_names_other_tenant", "argument": "/org_id"}},
		// Constraints.
		{name: "constraint: dates reversed", enf: hotelEnf, tool: "booking_create", args: `{"hotel_id":"h-1","check_in":"2026-05-04","check_out":"2026-05-01","guests":2}`, p: traveller,
			code: axerr.CodePreconditionFailed, gate: "constraints", details: map[string]any{"reason": "constraint_failed", "failed_constraint": "dates_ordered", "expression": "check_out > check_in"}},
		{name: "constraint: stay too long", enf: hotelEnf, tool: "booking_create", args: `{"hotel_id":"h-1","check_in":"2026-05-01","check_out":"2026-07-01","guests":2}`, p: traveller,
			code: axerr.CodePreconditionFailed, gate: "constraints", details: map[string]any{"failed_constraint": "stay_at_most_30_nights"}},
		{name: "constraint: over the rate cap", enf: hotelEnf, tool: "booking_create", args: `{"hotel_id":"h-1","check_in":"2026-05-01","check_out":"2026-05-04","guests":2,"max_rate":900}`, p: traveller,
			code: axerr.CodePreconditionFailed, gate: "constraints", details: map[string]any{"failed_constraint": "rate_cap"}},
		// Preconditions.
		{name: "precondition not met", enf: shopEnf, tool: "order_place", args: `{"cart_id":"c-new"}`, p: shopper,
			code: axerr.CodePreconditionFailed, gate: "preconditions", details: map[string]any{"reason": "precondition_failed", "failed_precondition": "cart_validated",
				"produced_by": []any{"cart.validate"}, "suggestion": `Call cart.validate first (its postconditions produce "cart_validated"), then call again.`}},
		// Postconditions and output schema: the tool ran, its result is withheld.
		{name: "postcondition not met", enf: shopEnf, tool: "order_place", args: `{"cart_id":"c-ready"}`, p: shopper, result: map[string]any{"status": "queued"},
			code: axerr.CodePostconditionFailed, gate: "postconditions", toolCalls: 1,
			details: map[string]any{"reason": "postcondition_failed", "failed_postcondition": "order_created", "side_effects": []any{"payment_charged"}}},
		{name: "output schema violated", enf: shopEnf, tool: "cart_validate", args: `{"cart_id":"c-ready"}`, p: shopper, result: map[string]any{"valid": true, "total": -3},
			code: axerr.CodePostconditionFailed, gate: "postconditions", toolCalls: 1, details: map[string]any{"reason": "output_schema"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := &polTool{value: tt.result}
			if tool.value == nil {
				tool.value = map[string]any{"ok": true}
			}
			call := middleware.NewCall(tt.tool, json.RawMessage(tt.args), tt.p)
			call.Credentials.ClaimedTenant = tt.claimed
			res, err := tt.enf.Wrap(tool).Invoke(context.Background(), call)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if tool.calls.Load() != 1 || !reflect.DeepEqual(res.Value, tool.value) {
					t.Fatalf("tool calls %d, result %#v", tool.calls.Load(), res.Value)
				}
				return
			}
			code, status, d := polDetails(t, err)
			if code != tt.code || status != tt.code.HTTPStatus() {
				t.Fatalf("got %s %d (%v), want %s %d", code, status, err, tt.code, tt.code.HTTPStatus())
			}
			if d["gate"] != tt.gate {
				t.Errorf("gate = %v, want %s", d["gate"], tt.gate)
			}
			for k, want := range tt.details {
				if !reflect.DeepEqual(d[k], want) {
					t.Errorf("details[%s] = %#v, want %#v", k, d[k], want)
				}
			}
			if got := tool.calls.Load(); got != tt.toolCalls {
				t.Errorf("tool invoked %d times, want %d", got, tt.toolCalls)
			}
			if res.Value != nil {
				t.Errorf("a refusal came with a result: %#v", res.Value)
			}
		})
	}
	for _, c := range []axerr.Code{axerr.CodeRoleInsufficient, axerr.CodeScopeViolation, axerr.CodeTenantBoundary} {
		if c.HTTPStatus() != http.StatusForbidden {
			t.Errorf("%s is %d, not 403", c, c.HTTPStatus())
		}
	}
}

// TestPolicyRefusalsNeverInvoke sends, for every pre-execution policy gate, a
// call it refuses, through both Wrap and Check, and proves that no refusal
// reaches the tool.
func TestPolicyRefusalsNeverInvoke(t *testing.T) {
	carts := &hostCarts{validated: map[string]bool{}}
	hotel, err := axgate.New(polManifest(t, "hotel.json"))
	if err != nil {
		t.Fatal(err)
	}
	shop, err := axgate.New(polManifest(t, "shop.json"), axgate.WithPrecondition("cart_validated", carts.cartValidated), axgate.WithPostcondition("cart_validated", func(ctx context.Context, call *middleware.Call, _ middleware.Result) error {
		return carts.cartValidated(ctx, call)
	}), axgate.WithUnboundConditions())
	if err != nil {
		t.Fatal(err)
	}
	tool := &polTool{value: map[string]any{"ok": true}}
	refused := map[string]bool{}
	for _, tc := range []struct {
		enf     *axgate.Enforcer
		tool    string
		args    string
		p       middleware.Principal
		claimed string
	}{
		{hotel, "booking_create", goodStay, middleware.Principal{ID: "u-1", Tenant: "acme"}, ""},
		{hotel, "booking_create", goodStay, polWith(traveller, func(p *middleware.Principal) { p.Scopes = []string{} }), ""},
		{hotel, "booking_cancel", `{"booking_id":"b","user_id":"u-9"}`, traveller, ""},
		{hotel, "booking_create", goodStay, traveller, "globex"},
		{hotel, "booking_create", `{"hotel_id":"h","check_in":"2026-05-04","check_out":"2026-05-01","guests":2}`, traveller, ""},
		{hotel, "booking_create", `{"hotel_id":"h","check_in":"2026-05-04","check_out":"2026-05-01","guests":2,"org_id":"globex"}`, traveller, ""},
		{shop, "order_place", `{"cart_id":"c-1"}`, traveller, ""},
	} {
		call := middleware.NewCall(tc.tool, json.RawMessage(tc.args), tc.p)
		call.Credentials.ClaimedTenant = tc.claimed
		_, err := tc.enf.Wrap(tool).Invoke(context.Background(), call)
		ae, ok := axerr.As(err)
		if !ok {
			t.Fatalf("%s %s: not refused: %v", tc.tool, tc.args, err)
		}
		refused[ae.Gate] = true
		check := middleware.NewCall(tc.tool, json.RawMessage(tc.args), tc.p)
		check.Credentials.ClaimedTenant = tc.claimed
		if cerr := tc.enf.Check(context.Background(), check); !errors.Is(cerr, ae.Code) {
			t.Errorf("Check = %v, Wrap = %v", cerr, err)
		}
	}
	if n := tool.calls.Load(); n != 0 {
		t.Fatalf("the tool ran %d times behind refusals", n)
	}
	for _, g := range []string{middleware.StageAccess, middleware.StageConstraints, middleware.StagePreconditions} {
		if !refused[g] {
			t.Errorf("no case was refused by %s", g)
		}
	}
}

// TestRelationalConstraintEndToEnd books hotel rooms: check_out must come
// after check_in, compared as the ISO dates the arguments carry.
func TestRelationalConstraintEndToEnd(t *testing.T) {
	enf, err := axgate.New(polManifest(t, "hotel.json"))
	if err != nil {
		t.Fatal(err)
	}
	var booked []string
	book := enf.Wrap(middleware.InvokerFunc(func(_ context.Context, call *middleware.Call) (middleware.Result, error) {
		args, _ := call.Args()
		booked = append(booked, args["check_in"].(string)+".."+args["check_out"].(string))
		return middleware.Result{Value: map[string]any{"booking_id": "b-1"}}, nil
	}))
	for _, tc := range []struct {
		in, out string
		ok      bool
	}{
		{"2026-05-01", "2026-05-02", true},
		{"2026-12-30", "2027-01-02", true},
		{"2026-05-02", "2026-05-01", false},
		{"2026-05-01", "2026-05-01", false},
		{"2026-09-30", "2026-10-01", true},
	} {
		args := `{"hotel_id":"h-1","check_in":"` + tc.in + `","check_out":"` + tc.out + `","guests":1}`
		_, err := book.Invoke(context.Background(), middleware.NewCall("booking_create", json.RawMessage(args), traveller))
		if tc.ok != (err == nil) {
			t.Errorf("%s..%s: err = %v", tc.in, tc.out, err)
		}
		if err != nil {
			if _, status, d := polDetails(t, err); status != http.StatusPreconditionFailed || d["failed_constraint"] != "dates_ordered" {
				t.Errorf("%s..%s: %d %v", tc.in, tc.out, status, d)
			}
		}
	}
	if want := []string{"2026-05-01..2026-05-02", "2026-12-30..2027-01-02", "2026-09-30..2026-10-01"}; !reflect.DeepEqual(booked, want) {
		t.Errorf("booked %q, want %q", booked, want)
	}
}

// TestConditionChain runs cart.validate → cart_validated → order.place: the
// order is refused until the host's cart.validate tool has recorded the
// cart as validated, which the postcondition confirms right after it runs,
// and the same check then lets order.place through.
func TestConditionChain(t *testing.T) {
	carts := &hostCarts{validated: map[string]bool{}}
	enf, err := axgate.New(polManifest(t, "shop.json"),
		axgate.WithPrecondition("cart_validated", carts.cartValidated), axgate.WithPostcondition("cart_validated", func(ctx context.Context, call *middleware.Call, _ middleware.Result) error {
			return carts.cartValidated(ctx, call)
		}),
		axgate.WithPostconditionExpr("order_created", `result.order_id != ""`))
	if err != nil {
		t.Fatal(err)
	}
	// The host's tools. validate records the cart unless told the cart is
	// out of stock; a bug that forgets to record is what the postcondition
	// catches.
	forget := false
	validate := enf.Wrap(middleware.InvokerFunc(func(_ context.Context, call *middleware.Call) (middleware.Result, error) {
		args, _ := call.Args()
		if !forget {
			carts.mu.Lock()
			carts.validated[args["cart_id"].(string)] = true
			carts.mu.Unlock()
		}
		return middleware.Result{Value: map[string]any{"valid": true, "total": 42.5}}, nil
	}))
	var orders atomic.Int32
	place := enf.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		orders.Add(1)
		return middleware.Result{Value: map[string]any{"order_id": "o-1"}}, nil
	}))
	ctx := context.Background()
	shopper := middleware.Principal{ID: "u-1"}
	args := json.RawMessage(`{"cart_id":"c-1"}`)

	_, err = place.Invoke(ctx, middleware.NewCall("order_place", args, shopper))
	if _, status, d := polDetails(t, err); status != 412 || d["failed_precondition"] != "cart_validated" || !strings.Contains(d["suggestion"].(string), "cart.validate") {
		t.Fatalf("order before validation: %d %v", status, d)
	}

	forget = true
	_, err = validate.Invoke(ctx, middleware.NewCall("cart_validate", args, shopper))
	if _, status, d := polDetails(t, err); status != 502 || d["failed_postcondition"] != "cart_validated" {
		t.Fatalf("validate that did not record: %d %v", status, d)
	}

	forget = false
	res, err := validate.Invoke(ctx, middleware.NewCall("cart_validate", args, shopper))
	if err != nil || res.Value.(map[string]any)["valid"] != true {
		t.Fatalf("validate: %v %v", res, err)
	}
	if err := enf.Check(ctx, middleware.NewCall("order_place", args, shopper)); err != nil {
		t.Fatalf("Check after validation: %v", err)
	}
	if _, err := place.Invoke(ctx, middleware.NewCall("order_place", args, shopper)); err != nil {
		t.Fatalf("order after validation: %v", err)
	}
	if orders.Load() != 1 {
		t.Errorf("orders placed: %d", orders.Load())
	}
	// Another cart is still not validated.
	if _, err := place.Invoke(ctx, middleware.NewCall("order_place", json.RawMessage(`{"cart_id":"c-2"}`), shopper)); !errors.Is(err, axerr.CodePreconditionFailed) {
		t.Errorf("unvalidated cart: %v", err)
	}
}

// TestNewRefusesUnboundConditions: an enforcer is not built while a
// precondition or postcondition is bound to nothing, unless allowed, and
// then every call records why it was not checked.
func TestNewRefusesUnboundConditions(t *testing.T) {
	m := polManifest(t, "shop.json")
	_, err := axgate.New(m)
	var ue *gates.UnboundError
	if !errors.As(err, &ue) {
		t.Fatalf("New = %v, want an *UnboundError", err)
	}
	// The error lists each unbound condition (the fixes are docs/policy.md's
	// and, for axgate serve and mcp, the CLI's).
	for _, want := range []string{`"cart_validated" (/actions/1/preconditions/0)`, `"order_created" (/actions/1/postconditions/0)`, `"cart_validated" (/actions/0/postconditions/0)`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not list %s: %v", want, err)
		}
	}
	enf, err := axgate.New(m, axgate.WithUnboundConditions())
	if err != nil {
		t.Fatal(err)
	}
	call := middleware.NewCall("order_place", json.RawMessage(`{"cart_id":"c-1"}`), middleware.Principal{ID: "u-1"})
	if _, err := enf.Wrap(&polTool{value: map[string]any{}}).Invoke(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	var unchecked []string
	for _, w := range call.Facts.Warnings {
		if strings.Contains(w, "is not checked") {
			unchecked = append(unchecked, w)
		}
	}
	if len(unchecked) != 2 {
		t.Errorf("warnings = %q, want one per unbound condition", call.Facts.Warnings)
	}
}

func TestNewRefusesBadExpressions(t *testing.T) {
	m, err := manifest.Parse([]byte(`{"version":"1.0.0","actions":[{"intent":"room.book","entity":"room","action_type":"write",
	  "description":"Book","risk_level":"low","idempotent":true,"scope":"global",
	  "required_parameters":[{"name":"check_in","type":"string","description":"In"}],
	  "preconditions":["open"],
	  "constraints":{"ordered":"check_out > check_in"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = axgate.New(m, axgate.WithPreconditionExpr("open", "principal.tenant ="))
	if err == nil {
		t.Fatal("built with bad expressions")
	}
	for _, want := range []string{"/actions/0/constraints/ordered", "check_out", "/actions/0/preconditions/0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}

// TestToolErrorsThroughPostconditions: a tool's error on an action with
// postconditions and an output schema passes the postcondition stage as the
// tool boundary mapped it: never checked as a result, never leaking.
func TestToolErrorsThroughPostconditions(t *testing.T) {
	carts := &hostCarts{validated: map[string]bool{}}
	enf, err := axgate.New(polManifest(t, "shop.json"), axgate.WithPrecondition("cart_validated", carts.cartValidated), axgate.WithPostcondition("cart_validated", func(ctx context.Context, call *middleware.Call, _ middleware.Result) error {
		return carts.cartValidated(ctx, call)
	}), axgate.WithUnboundConditions())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err     error
		code    axerr.Code
		message string
	}{
		{errors.New("pq: connection to 10.1.2.3 refused at /srv/app/cart.go:88"), axerr.CodeToolFailed, "the tool failed to complete the call"},
		{context.DeadlineExceeded, axerr.CodeToolFailed, "the tool did not finish in time"},
		{axerr.New(axerr.CodeStoreUnavailable, "cart store is down"), axerr.CodeStoreUnavailable, "cart store is down"},
	} {
		tool := &polTool{err: tc.err}
		_, err := enf.Wrap(tool).Invoke(context.Background(), middleware.NewCall("cart_validate", json.RawMessage(`{"cart_id":"c-1"}`), middleware.Principal{ID: "u-1"}))
		ae, ok := axerr.As(err)
		if !ok || ae.Code != tc.code || ae.Message != tc.message || ae.Gate != middleware.StageTool {
			t.Errorf("%v → %v (gate %v)", tc.err, err, ae)
			continue
		}
		raw, _ := json.Marshal(ae)
		if strings.Contains(string(raw), "10.1.2.3") || strings.Contains(string(raw), "/srv/") {
			t.Errorf("the caller sees the tool's internals: %s", raw)
		}
		if tc.code == axerr.CodeToolFailed && (ae.HTTPStatus() != 502 || !errors.Is(err, tc.err)) {
			t.Errorf("status %d, cause kept for logs: %v", ae.HTTPStatus(), errors.Is(err, tc.err))
		}
	}
}

func TestPolicyStageOrder(t *testing.T) {
	enf, err := axgate.New(polManifest(t, "hotel.json"))
	if err != nil {
		t.Fatal(err)
	}
	stages := enf.Stages()
	pos := func(name string) int {
		i := slices.Index(stages, name)
		if i < 0 {
			t.Fatalf("no stage %s in %q", name, stages)
		}
		return i
	}
	order := []string{"intent", middleware.StageAccess, "params", middleware.StageConstraints, middleware.StagePreconditions, middleware.StageCommit, middleware.StagePostconditions}
	for i := 1; i < len(order); i++ {
		if pos(order[i-1]) >= pos(order[i]) {
			t.Errorf("%s does not come before %s: %q", order[i-1], order[i], stages)
		}
	}
}

// TestPolicyOptions: the argument names and override roles are configurable.
func TestPolicyOptions(t *testing.T) {
	m := polManifest(t, "hotel.json")
	enf, err := axgate.New(m, axgate.WithAccess(gates.AccessOptions{TenantArgs: []string{"hotel_id"}, UserArgs: []string{"booking_id"}}))
	if err != nil {
		t.Fatal(err)
	}
	tool := &polTool{value: 1}
	// org_id is no longer a tenant argument; hotel_id now is.
	_, err = enf.Wrap(tool).Invoke(context.Background(), middleware.NewCall("booking_create",
		json.RawMessage(`{"hotel_id":"acme","check_in":"2026-05-01","check_out":"2026-05-04","guests":2,"org_id":"globex"}`), traveller))
	if err != nil {
		t.Errorf("configured names: %v", err)
	}
	_, err = enf.Wrap(tool).Invoke(context.Background(), middleware.NewCall("booking_create", json.RawMessage(goodStay), traveller))
	if !errors.Is(err, axerr.CodeTenantBoundary) {
		t.Errorf("hotel_id names another tenant: %v", err)
	}
	_, err = enf.Wrap(tool).Invoke(context.Background(), middleware.NewCall("booking_cancel", json.RawMessage(`{"booking_id":"b-1","user_id":"u-2"}`), traveller))
	if !errors.Is(err, axerr.CodeScopeViolation) {
		t.Errorf("booking_id names another user: %v", err)
	}
	if user, tenant := enf.IdentityArgs(); !slices.Equal(user, []string{"booking_id"}) || !slices.Equal(tenant, []string{"hotel_id"}) {
		t.Errorf("IdentityArgs = %v, %v", user, tenant)
	}

	// Empty lists name no argument: none is checked.
	none, err := axgate.New(m, axgate.WithAccess(gates.AccessOptions{UserArgs: []string{}, TenantArgs: []string{}}))
	if err != nil {
		t.Fatal(err)
	}
	if user, tenant := none.IdentityArgs(); len(user) != 0 || len(tenant) != 0 {
		t.Errorf("IdentityArgs with empty lists = %v, %v; want none", user, tenant)
	}
	_, err = none.Wrap(tool).Invoke(context.Background(), middleware.NewCall("booking_cancel", json.RawMessage(`{"booking_id":"b-1","user_id":"u-2"}`), traveller))
	if err != nil {
		t.Errorf("no user argument is checked, yet: %v", err)
	}
}
