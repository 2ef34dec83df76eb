package gate

import (
	"fmt"
	"testing"
	"time"
)

// TestNotifyCapBoundsTenants: the per-tenant notification windows are
// bounded: past maxNotifyTenants tenants notified within a minute, a new
// tenant's notification is held back rather than tracked, and once windows
// are a minute old they make room.
func TestNotifyCapBoundsTenants(t *testing.T) {
	c := notifyCap{perMinute: 1}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for i := range maxNotifyTenants + 100 {
		_, ok := c.admit(fmt.Sprint("t", i), now)
		if ok != (i < maxNotifyTenants) {
			t.Fatalf("tenant %d: admitted %v", i, ok)
		}
	}
	if len(c.tenants) > maxNotifyTenants {
		t.Errorf("%d windows kept, bound %d", len(c.tenants), maxNotifyTenants)
	}
	now = now.Add(2 * time.Minute)
	if _, ok := c.admit("late", now); !ok {
		t.Error("a new tenant's notification is held back though every window is stale")
	}
	if len(c.tenants) != 1 {
		t.Errorf("%d windows kept after the stale ones were dropped, want 1", len(c.tenants))
	}
}
