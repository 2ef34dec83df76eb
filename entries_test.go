package axgate_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// TestResourceActionPassesTheChain: a manifest resource's read action is
// checked by the enforcer's chain (roles, rate limit) like a tool's, though
// no tool of that name exists.
func TestResourceActionPassesTheChain(t *testing.T) {
	m, err := manifest.Parse([]byte(`{"version": "1.0.0", "actions": [
	  {"intent": "payroll.get", "entity": "payroll", "action_type": "read", "description": "Payroll", "operation_id": "payroll", "required_roles": ["hr"]}],
	 "resources": [{"intent": "payroll.file", "entity": "payroll", "description": "The payroll file", "uri": "payroll://all",
	   "required_roles": ["hr"], "rate_limit": "1/hour"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	var ran int
	inv := enf.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		ran++
		return middleware.Result{Value: "data"}, nil
	}))
	r, _ := m.Resource("payroll://all")
	call := func(p middleware.Principal) error {
		c := middleware.NewCall("resources/read", json.RawMessage(`{}`), p)
		c.Action = r.Action
		_, err := inv.Invoke(context.Background(), c)
		return err
	}
	if err := call(middleware.Principal{ID: "eve", Tenant: "t"}); !axerr.Is(err, axerr.CodeRoleInsufficient) {
		t.Fatalf("a caller without the role: %v; want AXAG_ROLE_INSUFFICIENT", err)
	}
	hr := middleware.Principal{ID: "ann", Tenant: "t", Roles: []string{"hr"}}
	if err := call(hr); err != nil {
		t.Fatalf("a caller with the role: %v", err)
	}
	if err := call(hr); !axerr.Is(err, axerr.CodeRateLimited) {
		t.Fatalf("a second read within the hour: %v; want AXAG_RATE_LIMITED", err)
	}
	if ran != 1 {
		t.Errorf("the resource was read %d times; want 1", ran)
	}
	// The resource is no tool: a tools/call of its intent's name is not found.
	c := middleware.NewCall("payroll_file", json.RawMessage(`{}`), hr)
	if _, err := inv.Invoke(context.Background(), c); !axerr.Is(err, axerr.CodeIntentNotFound) {
		t.Errorf("a call of the resource as a tool: %v; want AXAG_INTENT_NOT_FOUND", err)
	}
}
