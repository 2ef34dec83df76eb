package gate_test

import (
	"net/http"
	"testing"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
)

// foldManifest: a tenant-scoped action with no declared parameters, a
// user-scoped one, and a search whose declared limit is bounded, with a
// nested filter and a list of lines whose members are declared.
const foldManifest = `{"version": "1.0.0", "entities": [
  {"name": "invoice", "actions": [
    {"intent": "invoice.export", "action_type": "read", "description": "Export invoices",
     "risk_level": "low", "idempotent": true, "scope": "tenant"}]},
  {"name": "cart", "actions": [
    {"intent": "cart.add", "action_type": "write", "description": "Add to a cart",
     "parameters": {"sku": {"type": "string", "description": "Product"}},
     "risk_level": "low", "idempotent": true, "scope": "user"}]},
  {"name": "product", "actions": [
    {"intent": "product.search", "action_type": "read", "description": "Search",
     "parameters": {"query": {"type": "string", "required": true, "description": "Query"},
        "limit": {"type": "integer", "maximum": 100, "description": "Page size"},
        "filter": {"type": "object", "description": "Filter", "properties": {
          "maxPrice": {"type": "number", "maximum": 1000, "description": "Price cap"}}},
        "lines": {"type": "array", "description": "Lines", "items": {"type": "object", "description": "Line", "properties": {
          "qty": {"type": "integer", "maximum": 10, "description": "Quantity"}}}},
        "free": {"type": "object", "description": "Anything"}},
     "risk_level": "none", "idempotent": true, "scope": "global"}]}
]}`

// TestAccessRefusesCaseFoldedIdentityArgs: a top-level key that differs from
// a tenant or user argument name only in letter case (TENANT_ID, User_Id, or
// with the Kelvin sign) is not the argument the gate checks, but a tool that
// decodes into a struct with encoding/json reads it as that argument. The
// gate refuses it, also for an action that declares no parameters at all.
func TestAccessRefusesCaseFoldedIdentityArgs(t *testing.T) {
	m := mustParse(t, foldManifest)
	g := gate.NewAccess(m, gate.AccessOptions{})
	alice := middleware.Principal{ID: "alice", Tenant: "acme"}
	for _, tc := range []struct{ name, intent, args, path string }{
		{"tenant upper case", "invoice.export", `{"TENANT_ID":"globex"}`, "/TENANT_ID"},
		{"tenant mixed case", "invoice.export", `{"Tenant_Id":"globex"}`, "/Tenant_Id"},
		{"tenant naming the caller's own", "invoice.export", `{"TENANT_ID":"acme"}`, "/TENANT_ID"},
		{"org id", "invoice.export", `{"x":1,"ORG_ID":"globex"}`, "/ORG_ID"},
		{"user upper case", "cart.add", `{"sku":"a","USER_ID":"bob"}`, "/USER_ID"},
		{"account", "cart.add", `{"Account_ID":"bob"}`, "/Account_ID"},
		{"nested key is no identity argument", "cart.add", `{"owner_id":"alice","x":{"OWNER_ID":1}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := g.Check(call(t, m, tc.intent, tc.args, alice))
			if tc.path == "" {
				if err != nil {
					t.Fatalf("a nested key is no identity argument: %v", err)
				}
				return
			}
			d := refusal(t, err, axerr.CodeInvalidArguments, http.StatusBadRequest)
			e, _ := axerr.As(err)
			if d["reason"] != string(reasons.AmbiguousKeys) || d["argument"] != tc.path || len(e.Violations) != 1 || e.Violations[0].Path != tc.path || e.Suggestion == "" {
				t.Fatalf("details %v, violations %+v; want reason ambiguous_keys at %s", d, e.Violations, tc.path)
			}
		})
	}
	if err := g.Check(call(t, m, "invoice.export", `{"tenant_id":"acme","Tenants":"x"}`, alice)); err != nil {
		t.Fatalf("exact names and keys that fold onto no identity name pass: %v", err)
	}
	// An action that checks no identity argument has nothing to confuse.
	if err := g.Check(call(t, m, "product.search", `{"query":"x","TENANT_ID":"globex"}`, alice)); err != nil {
		t.Fatalf("global action: %v", err)
	}
}

// TestParamsRefusesCaseFoldedKeys: where the schema accepts undeclared
// members (WithUnknownParams, or an object parameter without declared
// properties), a key that differs from a declared name only in letter case
// would escape every bound on that name (LIMIT: 100000 beside limit, max
// 100) while a case-insensitive decoder reads it as the declared one. It is
// refused at every depth where properties are declared, in the Validation
// API's violations as well.
func TestParamsRefusesCaseFoldedKeys(t *testing.T) {
	m := mustParse(t, foldManifest)
	a := m.Action("product.search")
	for _, allowUnknown := range []bool{true, false} {
		p, err := gate.NewParams(m, allowUnknown)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ name, args, path string }{
			{"top level", `{"query":"x","LIMIT":100000}`, "/LIMIT"},
			{"escaped capital", `{"query":"x","\u004cimit":5000}`, "/Limit"},
			{"nested object", `{"query":"x","filter":{"maxprice":5000}}`, "/filter/maxprice"},
			{"array items", `{"query":"x","lines":[{"qty":1},{"QTY":500}]}`, "/lines/1/QTY"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := p.Check(call(t, m, "product.search", tc.args, middleware.Principal{}))
				e, ok := axerr.As(err)
				if !ok {
					t.Fatalf("allowUnknown=%v: %s passed", allowUnknown, tc.args)
				}
				if !allowUnknown {
					// The closed schema refuses the stray key as unknown.
					if e.Code != axerr.CodeUnknownParam {
						t.Fatalf("closed schema: %v", err)
					}
					return
				}
				if e.Code != axerr.CodeInvalidArguments || e.Details["reason"] != string(reasons.AmbiguousKeys) || len(e.Violations) != 1 ||
					e.Violations[0].Path != tc.path || e.Violations[0].Keyword != gate.KeywordAmbiguousKey || e.Suggestion == "" {
					t.Fatalf("got %#v; want ambiguous_keys at %s", e, tc.path)
				}
				v, _ := middleware.NewCall("t", []byte(tc.args), middleware.Principal{}).Value()
				vs, _, _ := p.Violations(a, v)
				if len(vs) != 1 || vs[0].Path != tc.path {
					t.Fatalf("Violations = %+v", vs)
				}
			})
		}
		for _, ok := range []string{
			`{"query":"x","limit":100,"filter":{"maxPrice":5}}`,
			`{"query":"x","free":{"LIMIT":1,"Query":2}}`,
		} {
			if err := p.Check(call(t, m, "product.search", ok, middleware.Principal{})); err != nil && allowUnknown {
				t.Fatalf("%s: %v", ok, err)
			}
		}
	}
	p, _ := gate.NewParams(m, true)
	if err := p.Check(call(t, m, "product.search", `{"query":"x","Extra":1,"other":{"LIMIT":1}}`, middleware.Principal{})); err != nil {
		t.Fatalf("undeclared keys that fold onto no declared name: %v", err)
	}
}

// TestAccessFoldCheckAllowPathAllocatesNothing: the check of identity
// argument spellings keeps the access gate's allow path free of
// allocations, also for keys with capitals.
func TestAccessFoldCheckAllowPathAllocatesNothing(t *testing.T) {
	m := mustParse(t, foldManifest)
	g := gate.NewAccess(m, gate.AccessOptions{})
	c := call(t, m, "invoice.export", `{"tenant_id":"acme","Format":"csv","Émis":"2026"}`, middleware.Principal{ID: "alice", Tenant: "acme"})
	if n := testing.AllocsPerRun(100, func() {
		if err := g.Check(c); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Check allocates %v times", n)
	}
}
