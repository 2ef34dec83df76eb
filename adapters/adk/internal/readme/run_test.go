package main

import (
	"os"
	"testing"

	"github.com/axgate/axgate/middleware"
)

// TestREADMEProgramRuns builds the README's runner on a manifest that
// declares order_place (no model: the runner is built, not run).
func TestREADMEProgramRuns(t *testing.T) {
	t.Chdir(t.TempDir())
	m := `{"version":"1.0.0","actions":[{"intent":"order.place","entity":"order","action_type":"write","description":"Place an order",
	  "risk_level":"high","confirmation_required":true,"idempotent":false}]}`
	if err := os.WriteFile("axag.json", []byte(m), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := newRunner(nil, map[string]middleware.Principal{"alice": {ID: "alice", Tenant: "acme"}})
	if err != nil || r == nil {
		t.Fatalf("newRunner: %v, %v", r, err)
	}
}
