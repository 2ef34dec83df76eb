package gate_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

const accessManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "product.search", "entity": "product", "action_type": "read", "description": "Search products",
     "required_parameters": [{"name": "query", "type": "string", "description": "Query"}],
     "risk_level": "none", "idempotent": true, "scope": "global"},
    {"intent": "report.export", "entity": "report", "action_type": "read", "description": "Export a report",
     "risk_level": "low", "idempotent": true, "scope": "global", "required_roles": ["analyst", "admin"]},
    {"intent": "profile.update", "entity": "profile", "action_type": "write", "description": "Update a profile",
     "required_parameters": [{"name": "user_id", "type": "string", "description": "Whose profile"}],
     "optional_parameters": [{"name": "owner_id", "type": "number", "description": "Numeric owner"},
                             {"name": "tenant_id", "type": "string", "description": "Tenant"}],
     "risk_level": "low", "idempotent": true, "scope": "user", "cross_tenant": false},
    {"intent": "invoice.list", "entity": "invoice", "action_type": "read", "description": "List invoices",
     "optional_parameters": [{"name": "tenant_id", "type": "string", "description": "Tenant"},
                             {"name": "org_id", "type": "string", "description": "Organization"}],
     "risk_level": "low", "idempotent": true, "scope": "tenant"},
    {"intent": "invoice.share", "entity": "invoice", "action_type": "write", "description": "Share an invoice",
     "optional_parameters": [{"name": "tenant_id", "type": "string", "description": "Target tenant"}],
     "risk_level": "low", "idempotent": true, "scope": "tenant", "tenant_boundary": "relaxed"},
    {"intent": "invoice.move", "entity": "invoice", "action_type": "write", "description": "Move an invoice",
     "optional_parameters": [{"name": "tenant_id", "type": "string", "description": "Target tenant"}],
     "risk_level": "low", "idempotent": true, "scope": "tenant", "tenant_boundary": "relaxed", "cross_tenant": false}
  ]
}`

func mustParse(t testing.TB, doc string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// call returns a call of intent in m, resolved as the intent gate would.
func call(t testing.TB, m *manifest.Manifest, intent, args string, p middleware.Principal) *middleware.Call {
	t.Helper()
	a := m.Action(intent)
	if a == nil {
		t.Fatalf("no action %s", intent)
	}
	c := middleware.NewCall(a.ToolName(), json.RawMessage(args), p)
	c.Action = a
	return c
}

// refusal asserts that err is an *axerr.Error with code and status and
// returns its envelope details as JSON values (what a caller sees).
func refusal(t *testing.T, err error, code axerr.Code, status int) map[string]any {
	t.Helper()
	e, ok := axerr.As(err)
	if !ok {
		t.Fatalf("err = %v, want %s", err, code)
	}
	if e.Code != code || e.HTTPStatus() != status {
		t.Fatalf("got %s (%d) %q, want %s (%d)", e.Code, e.HTTPStatus(), e.Message, code, status)
	}
	raw, _ := json.Marshal(e)
	var env struct {
		Error struct {
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	return env.Error.Details
}

func TestAccess(t *testing.T) {
	m := mustParse(t, accessManifest)
	g := gate.NewAccess(m, gate.AccessOptions{UserOverrideRoles: []string{"support"}})
	alice := middleware.Principal{ID: "alice", Tenant: "acme"}
	with := func(f func(p *middleware.Principal)) middleware.Principal {
		p := alice
		f(&p)
		return p
	}
	tests := []struct {
		name    string
		intent  string
		args    string
		p       middleware.Principal
		claimed string
		code    axerr.Code // "" = allowed
		details map[string]any
	}{
		{name: "global read, no scope claim", intent: "product.search", args: `{"query":"x"}`, p: alice},
		{name: "role held", intent: "report.export", p: with(func(p *middleware.Principal) { p.Roles = []string{"admin"} })},
		{name: "role missing", intent: "report.export", p: alice, code: axerr.CodeRoleInsufficient,
			details: map[string]any{"reason": "role_missing", "required_roles": []any{"analyst", "admin"}}},
		{name: "scope exact intent", intent: "product.search", p: with(func(p *middleware.Principal) { p.Scopes = []string{"product.search"} })},
		{name: "scope entity wildcard", intent: "product.search", p: with(func(p *middleware.Principal) { p.Scopes = []string{"x", "product.*"} })},
		{name: "scope star", intent: "product.search", p: with(func(p *middleware.Principal) { p.Scopes = []string{"*"} })},
		{name: "scope action type", intent: "product.search", p: with(func(p *middleware.Principal) { p.Scopes = []string{"read"} })},
		{name: "scope wrong type", intent: "invoice.share", p: with(func(p *middleware.Principal) { p.Scopes = []string{"read", "invoice.list"} }),
			code: axerr.CodeScopeViolation, details: map[string]any{"reason": "scope_not_granted",
				"granting_scopes": []any{"invoice.share", "invoice.*", "*", "write"}}},
		{name: "scope empty grant", intent: "product.search", p: with(func(p *middleware.Principal) { p.Scopes = []string{} }),
			code: axerr.CodeScopeViolation},
		{name: "scope prefix is not a wildcard", intent: "product.search", p: with(func(p *middleware.Principal) { p.Scopes = []string{"product", "prod.*", "product.s*"} }),
			code: axerr.CodeScopeViolation},
		{name: "user names caller", intent: "profile.update", args: `{"user_id":"alice"}`, p: alice},
		{name: "user numeric id", intent: "profile.update", args: `{"user_id":"42","owner_id":42}`, p: with(func(p *middleware.Principal) { p.ID = "42" })},
		// Ids are compared as exact decimal text, never as floats: the
		// caller 1234567890123456768 may not act on 1234567890123456800
		// (one double), and the number is refused before any comparison.
		{name: "user id above 2^53", intent: "profile.update", args: `{"user_id":"1234567890123456768","owner_id":1234567890123456800}`,
			p: with(func(p *middleware.Principal) { p.ID = "1234567890123456768" }), code: axerr.CodeInvalidType,
			details: map[string]any{"reason": "number_not_interoperable"}},
		{name: "user id above 2^53 reversed", intent: "profile.update", args: `{"user_id":"1234567890123456800","owner_id":1234567890123456768}`,
			p: with(func(p *middleware.Principal) { p.ID = "1234567890123456800" }), code: axerr.CodeInvalidType},
		{name: "user numeric id other spelling", intent: "profile.update", args: `{"user_id":"42","owner_id":4.2e1}`, p: with(func(p *middleware.Principal) { p.ID = "42" })},
		{name: "user numeric id largest safe", intent: "profile.update", args: `{"user_id":"9007199254740991","owner_id":9007199254740991}`, p: with(func(p *middleware.Principal) { p.ID = "9007199254740991" })},
		{name: "user numeric id not canonical text", intent: "profile.update", args: `{"user_id":"042","owner_id":42}`, p: with(func(p *middleware.Principal) { p.ID = "042" }),
			code: axerr.CodeScopeViolation, details: map[string]any{"argument": "/owner_id"}},
		{name: "user names other", intent: "profile.update", args: `{"user_id":"bob"}`, p: alice, code: axerr.CodeScopeViolation,
			details: map[string]any{"reason": "argument_names_other_user", "argument": "/user_id"}},
		{name: "user other numeric", intent: "profile.update", args: `{"user_id":"alice","owner_id":7}`, p: alice, code: axerr.CodeScopeViolation,
			details: map[string]any{"argument": "/owner_id"}},
		{name: "user override role", intent: "profile.update", args: `{"user_id":"bob"}`, p: with(func(p *middleware.Principal) { p.Roles = []string{"support"} })},
		{name: "user caller without id", intent: "profile.update", args: `{"user_id":"bob"}`, p: middleware.Principal{Tenant: "acme"}, code: axerr.CodeScopeViolation,
			details: map[string]any{"reason": "no_caller_id"}},
		{name: "cross_tenant false on user scope", intent: "profile.update", args: `{"user_id":"alice","tenant_id":"globex"}`, p: alice, code: axerr.CodeTenantBoundary,
			details: map[string]any{"reason": "argument_names_other_tenant", "argument": "/tenant_id"}},
		{name: "tenant own", intent: "invoice.list", args: `{"tenant_id":"acme","org_id":"acme"}`, p: alice},
		{name: "tenant no args", intent: "invoice.list", args: `{}`, p: alice},
		{name: "tenant claimed own", intent: "invoice.list", args: `{}`, p: alice, claimed: "acme"},
		{name: "tenant caller has none", intent: "invoice.list", args: `{}`, p: middleware.Principal{ID: "alice"}, code: axerr.CodeTenantBoundary,
			details: map[string]any{"reason": "no_tenant"}},
		{name: "tenant claimed other", intent: "invoice.list", args: `{}`, p: alice, claimed: "globex", code: axerr.CodeTenantBoundary,
			details: map[string]any{"reason": "claimed_tenant_mismatch"}},
		{name: "claimed other on global action", intent: "product.search", args: `{}`, p: alice, claimed: "globex", code: axerr.CodeTenantBoundary},
		{name: "tenant strict arg other", intent: "invoice.list", args: `{"tenant_id":"acme","org_id":"globex"}`, p: alice, code: axerr.CodeTenantBoundary,
			details: map[string]any{"reason": "argument_names_other_tenant", "argument": "/org_id"}},
		{name: "tenant strict arg not a string", intent: "invoice.list", args: `{"tenant_id":["acme"]}`, p: alice, code: axerr.CodeTenantBoundary},
		{name: "tenant relaxed arg other", intent: "invoice.share", args: `{"tenant_id":"globex"}`, p: alice},
		{name: "tenant relaxed claimed other", intent: "invoice.share", args: `{}`, p: alice, claimed: "globex", code: axerr.CodeTenantBoundary},
		{name: "cross_tenant false forces strict", intent: "invoice.move", args: `{"tenant_id":"globex"}`, p: alice, code: axerr.CodeTenantBoundary},
		{name: "arguments not an object", intent: "invoice.list", args: `[1]`, p: alice, code: axerr.CodeInvalidArguments},
		{name: "arguments not JSON", intent: "profile.update", args: `{"user_id":`, p: alice, code: axerr.CodeInvalidArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := call(t, m, tt.intent, tt.args, tt.p)
			c.Credentials.ClaimedTenant = tt.claimed
			err := g.Check(c)
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
			if d["intent"] != tt.intent {
				t.Errorf("details.intent = %v", d["intent"])
			}
		})
	}
}

// TestAccessNamesNoForeignTenant proves a tenant refusal never echoes the
// other tenant's name, whichever way the request names it.
func TestAccessNamesNoForeignTenant(t *testing.T) {
	m := mustParse(t, accessManifest)
	g := gate.NewAccess(m, gate.AccessOptions{})
	alice := middleware.Principal{ID: "alice", Tenant: "acme"}
	for _, tc := range []struct{ args, claimed string }{
		{`{"tenant_id":"globex-secret"}`, ""},
		{`{}`, "globex-secret"},
	} {
		c := call(t, m, "invoice.list", tc.args, alice)
		c.Credentials.ClaimedTenant = tc.claimed
		err := g.Check(c)
		e, ok := axerr.As(err)
		if !ok || e.Code != axerr.CodeTenantBoundary {
			t.Fatalf("err = %v", err)
		}
		raw, _ := json.Marshal(e)
		if strings.Contains(string(raw), "globex") || strings.Contains(e.Error(), "globex") {
			t.Errorf("refusal names the other tenant: %s", raw)
		}
	}
}

func TestAccessConfiguredArgNames(t *testing.T) {
	m := mustParse(t, `{"version":"1.0.0","actions":[
	  {"intent":"doc.read","entity":"doc","action_type":"read","description":"Read a doc","risk_level":"none","idempotent":true,"scope":"tenant",
	   "optional_parameters":[{"name":"space","type":"string","description":"Space"},{"name":"tenant_id","type":"string","description":"Tenant"}]},
	  {"intent":"doc.mine","entity":"doc","action_type":"read","description":"My doc","risk_level":"none","idempotent":true,"scope":"user",
	   "optional_parameters":[{"name":"author","type":"string","description":"Author"},{"name":"user_id","type":"string","description":"User"}]}]}`)
	g := gate.NewAccess(m, gate.AccessOptions{TenantArgs: []string{"space"}, UserArgs: []string{"author"}})
	p := middleware.Principal{ID: "alice", Tenant: "acme"}
	if err := g.Check(call(t, m, "doc.read", `{"space":"other"}`, p)); err == nil {
		t.Error("configured tenant argument not checked")
	}
	if err := g.Check(call(t, m, "doc.read", `{"tenant_id":"other"}`, p)); err != nil {
		t.Errorf("default tenant argument still checked after configuring others: %v", err)
	}
	if err := g.Check(call(t, m, "doc.mine", `{"author":"bob"}`, p)); err == nil {
		t.Error("configured user argument not checked")
	}
	if err := g.Check(call(t, m, "doc.mine", `{"user_id":"bob"}`, p)); err != nil {
		t.Errorf("default user argument still checked after configuring others: %v", err)
	}
}

func TestScopeGrants(t *testing.T) {
	m := mustParse(t, `{"version":"1.0.0","actions":[{"intent":"billing.create","entity":"invoice","action_type":"write","description":"Create","risk_level":"low","idempotent":false,"scope":"global"}]}`)
	got := gate.ScopeGrants(m.Actions[0])
	want := []string{"billing.create", "billing.*", "invoice.*", "*", "write"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ScopeGrants = %q, want %q", got, want)
	}
}

func TestAccessStatusCodes(t *testing.T) {
	for _, c := range []axerr.Code{axerr.CodeRoleInsufficient, axerr.CodeScopeViolation, axerr.CodeTenantBoundary} {
		if c.HTTPStatus() != http.StatusForbidden {
			t.Errorf("%s → %d", c, c.HTTPStatus())
		}
	}
}
