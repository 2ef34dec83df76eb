package gate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/middleware"
)

// pendingReq is a pending request of tenant by requester, created at now.
func pendingReq(id, tenant, requester string, args []byte, now time.Time) gate.ApprovalRequest {
	return gate.ApprovalRequest{ID: id, Tenant: tenant, Requester: requester, Roles: []string{"finance"},
		Arguments: args, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
}

// TestMemoryApprovalCancelledLeavesShare: the per-requester quota counts
// pending requests only, so a requester that cancels each request it opens
// (open, cancel, open another) must not fill its tenant's share and refuse
// the tenant's other principals: a cancelled request that voids nothing
// leaves the share at once.
func TestMemoryApprovalCancelledLeavesShare(t *testing.T) {
	const share = 300
	a := newTkApproval(t)
	store := gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{MaxRequests: share})
	g, err := gate.NewApproval(gate.ApprovalConfig{Replay: a.replay, Store: store, Issuer: a.issuer})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 2 * share {
		c := a.call("payout.send", fmt.Sprintf(`{"amount":%d}`, i))
		_, err := g.Stage().Interceptor(ctx, c, middleware.InvokerFunc(tkOK))
		if e, _ := axerr.As(err); e == nil || e.Code != axerr.CodeApprovalMissing {
			t.Fatalf("alice's call %d (never more than one pending): %v", i, err)
		}
		if err := g.Cancel(ctx, a.alice, c.Facts.ApprovalRequestID); err != nil {
			t.Fatal(err)
		}
	}
	bob := middleware.Principal{ID: "bob", Tenant: "acme", Roles: []string{"clerk"}}
	act := a.m.Action("payout.send")
	c := middleware.NewCall(act.ToolName(), []byte(`{"amount":5}`), bob)
	c.Action = act
	_, err = g.Stage().Interceptor(ctx, c, middleware.InvokerFunc(tkOK))
	if e, _ := axerr.As(err); e == nil || e.Code != axerr.CodeApprovalMissing {
		t.Errorf("bob's call after alice's cancel cycles: %v, want a new approval request", err)
	}
}

// TestMemoryApprovalArgumentBytesBounded: the tenant's share is bounded in
// bytes of arguments too, so requests with large arguments fill it long
// before the process runs out of memory; another tenant is unaffected.
func TestMemoryApprovalArgumentBytesBounded(t *testing.T) {
	s := gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{MaxBytes: 1 << 20})
	ctx := context.Background()
	now := time.Now()
	args := []byte(`{"v":"` + strings.Repeat("x", 128<<10) + `"}`)
	n := 0
	for ; n < 100; n++ {
		_, _, err := s.Create(ctx, pendingReq(fmt.Sprint("big-", n), "evil", fmt.Sprint("p", n), args, now), 20)
		if errors.Is(err, gate.ErrApprovalStoreFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n*len(args) > 1<<20 || n == 100 {
		t.Fatalf("tenant evil holds %d requests of %d bytes under a bound of 1 MiB", n, len(args))
	}
	if _, created, err := s.Create(ctx, pendingReq("good-1", "good", "g", args, now), 20); err != nil || !created {
		t.Fatalf("another tenant's request: %v, %v", created, err)
	}
}

// TestMemoryApprovalSettledKeepsNoArguments: a request decided for good
// keeps what its veto or void needs, not the call's arguments (which would
// otherwise stay in memory for the veto's whole lifetime).
func TestMemoryApprovalSettledKeepsNoArguments(t *testing.T) {
	s := gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{})
	ctx := context.Background()
	now := time.Now()
	for _, final := range []gate.ApprovalState{gate.ApprovalDenied, gate.ApprovalExecuted} {
		id := "r-" + string(final)
		if _, _, err := s.Create(ctx, pendingReq(id, "acme", "alice", []byte(`{"amount":1}`), now), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, id, func(r *gate.ApprovalRequest) error {
			r.State, r.VoidBefore, r.KeepUntil = final, now, now.Add(2*time.Hour)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, id)
		if err != nil || got.State != final || !got.VoidBefore.Equal(now) {
			t.Fatalf("%s: %+v, %v; want the request with its void", final, got, err)
		}
		if got.Arguments != nil {
			t.Errorf("a %s request keeps its arguments %s", final, got.Arguments)
		}
	}
}

// TestMemoryApprovalLapsedDropped: requests past their retention are
// dropped as the store is used, not only once the tenant's share is full
// (one principal within its quota would otherwise add a quota's worth of
// requests, arguments included, per request lifetime, forever).
func TestMemoryApprovalLapsedDropped(t *testing.T) {
	clock := &tkClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	s := gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{Now: clock.Now})
	ctx := context.Background()
	for i := range 5 {
		if _, _, err := s.Create(ctx, pendingReq(fmt.Sprint("old-", i), "acme", "alice", []byte(`{}`), clock.now), 20); err != nil {
			t.Fatal(err)
		}
	}
	clock.now = clock.now.Add(2 * time.Hour)
	for i := range 5 {
		if _, _, err := s.Create(ctx, pendingReq(fmt.Sprint("new-", i), "acme", "alice", []byte(`{}`), clock.now), 20); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if r, err := s.Get(ctx, fmt.Sprint("old-", i)); !errors.Is(err, gate.ErrNotFound) {
			t.Errorf("old-%d, past its retention, is still held: %s, %v", i, r.State, err)
		}
	}
}

// TestMemoryApprovalInboxPageCost: an inbox page costs the records it
// returns, not a walk of the tenant's whole share (which the store's lock
// would make every caller wait for).
func TestMemoryApprovalInboxPageCost(t *testing.T) {
	s := gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{})
	ctx := context.Background()
	now := time.Now()
	const n = 5000
	for i := range n {
		if _, _, err := s.Create(ctx, pendingReq(fmt.Sprintf("apr_%05d", i), "evil", fmt.Sprint("p", i), []byte(`{}`), now), 20); err != nil {
			t.Fatal(err)
		}
	}
	f := gate.ApprovalFilter{Tenant: "evil", Roles: []string{"finance"}, State: gate.ApprovalPending}
	cursor := ""
	for page := range 3 {
		before := gate.ApprovalListed(s)
		got, next, err := s.List(ctx, f, cursor, 1)
		if err != nil || len(got) != 1 || next == "" {
			t.Fatalf("page %d: %d, %q, %v", page, len(got), next, err)
		}
		if want := fmt.Sprintf("apr_%05d", page); got[0].ID != want {
			t.Errorf("page %d is %s, want %s", page, got[0].ID, want)
		}
		if cost := gate.ApprovalListed(s) - before; cost > 2 {
			t.Errorf("a page of 1 over %d requests examined %d records", n, cost)
		}
		cursor = next
	}
}

// TestMemoryApprovalTenantsIndependent: each tenant has its own lock: while
// a call holds tenant evil's (an Update's fn runs under it), tenant good's
// calls go on. On a store with one lock for all tenants the calls inside fn
// wait for themselves.
func TestMemoryApprovalTenantsIndependent(t *testing.T) {
	s := gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{})
	ctx := context.Background()
	now := time.Now()
	if _, _, err := s.Create(ctx, pendingReq("evil-1", "evil", "e", nil, now), 0); err != nil {
		t.Fatal(err)
	}
	_, err := s.Update(ctx, "evil-1", func(*gate.ApprovalRequest) error {
		if _, created, err := s.Create(ctx, pendingReq("good-1", "good", "g", nil, now), 0); err != nil || !created {
			t.Errorf("good's Create under evil's lock: %v, %v", created, err)
		}
		if page, _, err := s.List(ctx, gate.ApprovalFilter{Tenant: "good"}, "", 10); err != nil || len(page) != 1 {
			t.Errorf("good's List under evil's lock: %d, %v", len(page), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMemoryApprovalTenantsDropped: a tenant holding no record takes no
// memory, so the number of tenants the store tracks is bounded by its live
// records, not by every tenant ever seen.
func TestMemoryApprovalTenantsDropped(t *testing.T) {
	s := gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{MaxRequests: 1})
	ctx := context.Background()
	now := time.Now()
	for i := range 1000 {
		tn := fmt.Sprint("t", i)
		if _, _, err := s.Create(ctx, pendingReq("apr_"+tn, tn, "x", nil, now), 20); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, "apr_"+tn, func(r *gate.ApprovalRequest) error { r.State = gate.ApprovalCancelled; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n := gate.ApprovalShards(s); n != 0 {
		t.Errorf("the store tracks %d tenants with no record", n)
	}
}

// TestMemoryApprovalConcurrentTenants: creates, cancels, reads and pages of
// a few tenants at once, shards dropped when emptied and made again while
// others use them: every request created is found until cancelled, and no
// tenant is left behind (run with -race).
func TestMemoryApprovalConcurrentTenants(t *testing.T) {
	s := gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{})
	ctx := context.Background()
	now := time.Now()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tn := fmt.Sprint("t", w%3)
			for i := range 200 {
				id := fmt.Sprintf("apr_%d_%d", w, i)
				if _, created, err := s.Create(ctx, pendingReq(id, tn, fmt.Sprint("p", w), []byte(`{}`), now), 0); err != nil || !created {
					t.Errorf("Create(%s): %v, %v", id, created, err)
					return
				}
				if r, err := s.Get(ctx, id); err != nil || r.State != gate.ApprovalPending {
					t.Errorf("Get(%s): %s, %v", id, r.State, err)
					return
				}
				if _, _, err := s.List(ctx, gate.ApprovalFilter{Tenant: tn}, "", 5); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Update(ctx, id, func(r *gate.ApprovalRequest) error { r.State = gate.ApprovalCancelled; return nil }); err != nil {
					t.Errorf("cancel %s: %v", id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := gate.ApprovalShards(s); n != 0 {
		t.Errorf("%d tenants left with nothing held", n)
	}
}
