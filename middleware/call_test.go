package middleware_test

import (
	"testing"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
)

// TestLimitsOr: a transport that sets one limit keeps the enforcer's others.
func TestLimitsOr(t *testing.T) {
	got := middleware.Limits{MaxDepth: 3}.Or(middleware.Limits{MaxBytes: 100, MaxDepth: 8, MaxMembers: 2, MaxItems: 5})
	if want := (middleware.Limits{MaxBytes: 100, MaxDepth: 3, MaxMembers: 2, MaxItems: 5}); got != want {
		t.Fatalf("Or = %+v, want %+v", got, want)
	}
	call := middleware.NewCall("t", []byte(`{"a":1,"b":2,"c":3}`), middleware.Principal{})
	call.Limits = got
	_, err := call.Value()
	if e, ok := axerr.As(err); !ok || e.Details["reason"] != string(reasons.TooManyMembers) {
		t.Fatalf("an object over the enforcer's member limit under a transport's depth limit: %v, want too_many_members", err)
	}
	if r := (middleware.Limits{}).Resolved(); r.MaxItems != middleware.DefaultMaxArgItems {
		t.Fatalf("Resolved().MaxItems = %d, want %d", r.MaxItems, middleware.DefaultMaxArgItems)
	}
}
