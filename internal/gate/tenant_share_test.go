package gate_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/token"
)

// The memory stores keep their capacity per tenant: one tenant filling its
// share never refuses another tenant's calls. Before, one shared bound held
// every tenant: 100,000 new idempotency keys of one caller made every
// tenant's non-idempotent calls 503.

func TestMemoryIdempotencyStoreSharePerTenant(t *testing.T) {
	s := gate.NewMemoryIdempotencyStore(10)
	ctx := t.Context()
	// Many principals of one tenant, each within its quota, fill the
	// tenant's share.
	for i := range 10 {
		o := gate.IdempotencyOwner{Tenant: "flood", Principal: fmt.Sprint("p", i), Quota: 5}
		if _, c, err := s.Begin(ctx, o, fmt.Sprint("flood/", i), "d", time.Hour); err != nil || c == "" {
			t.Fatalf("Begin %d: claim %q, %v", i, c, err)
		}
	}
	if _, _, err := s.Begin(ctx, gate.IdempotencyOwner{Tenant: "flood", Principal: "p-new", Quota: 5}, "flood/x", "d", time.Hour); !errors.Is(err, gate.ErrStoreFull) {
		t.Fatalf("Begin over the tenant's share = %v, want gate.ErrStoreFull", err)
	}
	for _, tenant := range []string{"other", ""} {
		for i := range 10 {
			o := gate.IdempotencyOwner{Tenant: tenant, Principal: "p"}
			if _, c, err := s.Begin(ctx, o, fmt.Sprint(tenant, "/dup/", i), "d", time.Hour); err != nil || c == "" {
				t.Fatalf("tenant %q, Begin %d while another tenant is full: claim %q, %v", tenant, i, c, err)
			}
		}
	}
}

func TestMemoryLimiterSharePerTenant(t *testing.T) {
	l := gate.NewMemoryLimiter(4)
	ctx := t.Context()
	limit := gate.Limit{Count: 1, Per: time.Hour}
	take := func(tenant, key string) error {
		d, err := l.AllowN(ctx, []gate.LimitKey{{Key: tenant + "/" + key, Limit: limit, Tenant: tenant}}, 1)
		if err == nil && !d.Allowed {
			err = errors.New("refused")
		}
		return err
	}
	for i := range 4 {
		if err := take("flood", fmt.Sprint(i)); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	if err := take("flood", "x"); !errors.Is(err, gate.ErrStoreFull) {
		t.Fatalf("a new key over the tenant's share = %v, want gate.ErrStoreFull", err)
	}
	for i := range 4 {
		if err := take("other", fmt.Sprint(i)); err != nil {
			t.Fatalf("another tenant's key %d while the first is full: %v", i, err)
		}
	}
}

func TestMemoryReplayStoreSharePerTenant(t *testing.T) {
	s := token.NewMemoryReplayStore(token.MemoryReplayOptions{MaxEntries: 3})
	ctx := t.Context()
	exp := time.Now().Add(time.Hour)
	for i := range 3 {
		if err := s.Consume(ctx, []token.Use{{ID: fmt.Sprint("flood-", i), Expires: exp, Tenant: "flood"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Consume(ctx, []token.Use{{ID: "flood-x", Expires: exp, Tenant: "flood"}}); !errors.Is(err, token.ErrReplayStoreFull) {
		t.Fatalf("Consume over the tenant's share = %v, want token.ErrReplayStoreFull", err)
	}
	if err := s.Consume(ctx, []token.Use{{ID: "o-1", Expires: exp, Tenant: "other"}, {ID: "o-2", Expires: exp, Tenant: "other"}, {ID: "o-3", Expires: exp, Tenant: "other"}}); err != nil {
		t.Fatalf("another tenant's tokens while the first is full: %v", err)
	}
	// A batch that would overfill one tenant records none of its ids.
	if err := s.Consume(ctx, []token.Use{{ID: "n-1", Expires: exp}, {ID: "o-4", Expires: exp, Tenant: "other"}}); !errors.Is(err, token.ErrReplayStoreFull) {
		t.Fatalf("a batch over one tenant's share = %v, want token.ErrReplayStoreFull", err)
	}
	if used, _ := s.Used(ctx, "n-1"); used {
		t.Fatal("a refused batch recorded an id")
	}
}
