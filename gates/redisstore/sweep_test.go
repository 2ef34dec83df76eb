package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/gates/redisstore/internal/redistest"
)

// TestInboxIndexesSweptWithoutList: the inbox indexes (every tenant's, and
// a tenant's) lose the members of gone requests though nobody lists them.
// Nothing in the library lists every tenant's inbox, and a tenant's
// approvers may never read theirs; under steady traffic the creates push the
// indexes' TTL forward, so without the creates' sweep they would grow with
// every request ever created. A replaced request's member leaves at once.
func TestInboxIndexesSweptWithoutList(t *testing.T) {
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	s := redisstore.NewApprovalStore(c, redisstore.Options{Prefix: prefix, Timeout: testTimeout, ApprovalRetention: time.Millisecond})
	ctx := t.Context()
	live := func(id string) gates.ApprovalRequest {
		now := time.Now()
		return gates.ApprovalRequest{ID: id, Tenant: "busy", Requester: "x", CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	}
	// A request that lives a day keeps the indexes alive meanwhile.
	if _, _, err := s.Create(ctx, live("apr_first"), 0); err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		tenant := "busy"
		if i%2 == 1 {
			tenant = fmt.Sprintf("tenant-%d", i)
		}
		now := time.Now()
		_, created, err := s.Create(ctx, gates.ApprovalRequest{ID: fmt.Sprintf("apr_%d", i), Tenant: tenant, Requester: "mallory",
			CreatedAt: now, ExpiresAt: now.Add(20 * time.Millisecond)}, 0)
		if err != nil || !created {
			t.Fatal(created, err)
		}
	}
	// Wait until Redis has let every short request go.
	deadline := time.Now().Add(10 * time.Second)
	for {
		keys, err := c.Keys(ctx, prefix+"apr:req:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) <= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests are still stored", len(keys))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Steady traffic of tenant busy, no List: each create sweeps a step of
	// each index, so two full rounds of the indexes clean them.
	const more = 2*(n+redisstore.SweepStep)/redisstore.SweepStep + 2
	for i := range more {
		if _, _, err := s.Create(ctx, live(fmt.Sprintf("apr_more_%d", i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	// The same call asked again after it was cancelled: its request is
	// replaced, and its old member leaves the indexes with it.
	if _, err := s.Update(ctx, "apr_first", func(r *gates.ApprovalRequest) error { r.State = gates.ApprovalCancelled; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, created, err := s.Create(ctx, live("apr_first"), 0); err != nil || !created {
		t.Fatalf("Create over the cancelled request = %v, %v", created, err)
	}
	want := int64(1 + more)
	all, busy := c.ZCard(ctx, prefix+"apr:inbox:all").Val(), c.ZCard(ctx, prefix+"apr:inbox:t:busy").Val()
	if all != want || busy != want {
		t.Errorf("%d live requests; the index of every tenant holds %d members, tenant busy's %d (ttl %s)", want, all, busy, c.PTTL(ctx, prefix+"apr:inbox:all").Val())
	}
}
