package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/axgate/axgate/gates"
)

// TestIdempotencyStore checks a gates.IdempotencyStore. newStore returns a
// new, empty store for each subtest.
func TestIdempotencyStore(t *testing.T, newStore func(t *testing.T) gates.IdempotencyStore) {
	const ttl = time.Hour
	// The contracts below hold for records charged to a quota that is never
	// reached.
	owner := gates.IdempotencyOwner{Tenant: "acme", Principal: "alice", Quota: 1000}
	begin := func(t *testing.T, s gates.IdempotencyStore, key, args string, ttl time.Duration) (*gates.IdempotencyRecord, string) {
		t.Helper()
		rec, claim, err := s.Begin(ctx(t), owner, key, args, ttl)
		if err != nil {
			t.Fatalf("Begin(%q): %v", key, err)
		}
		if (claim != "") != (rec == nil) {
			t.Fatalf("Begin(%q) = (%+v, claim %q): a claim returns no record, a refusal returns the holder and no claim", key, rec, claim)
		}
		return rec, claim
	}
	claim := func(t *testing.T, s gates.IdempotencyStore, key, args string, ttl time.Duration) string {
		t.Helper()
		rec, c := begin(t, s, key, args, ttl)
		if c == "" {
			t.Fatalf("Begin(%q) on a free key did not claim it: %+v", key, rec)
		}
		return c
	}
	result := gates.IdempotencyOutcome{Result: json.RawMessage(`{"order_id":"o-1","total":12.5}`)}

	t.Run("FirstBeginClaims", func(t *testing.T) {
		s := newStore(t)
		claim(t, s, "k", "args-1", ttl)
	})

	t.Run("ClaimsAreUnique", func(t *testing.T) {
		s := newStore(t)
		a := claim(t, s, "a", "args-1", ttl)
		b := claim(t, s, "b", "args-1", ttl)
		if a == b {
			t.Fatalf("two claims are both %q", a)
		}
	})

	t.Run("InFlightKeyIsHeld", func(t *testing.T) {
		s := newStore(t)
		claim(t, s, "k", "args-1", ttl)
		for _, args := range []string{"args-1", "args-2"} {
			rec, c := begin(t, s, "k", args, ttl)
			if c != "" {
				t.Fatalf("Begin(k, %s) claimed a key in flight", args)
			}
			if rec.State != gates.IdempotencyInFlight || rec.ArgsSHA256 != "args-1" {
				t.Fatalf("Begin(k, %s) = %+v, want the first call's in-flight record", args, rec)
			}
		}
	})

	t.Run("CompleteStoresResult", func(t *testing.T) {
		s := newStore(t)
		c := claim(t, s, "k", "args-1", ttl)
		if err := s.Complete(ctx(t), owner, "k", c, result, ttl); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		rec, other := begin(t, s, "k", "args-1", ttl)
		if other != "" {
			t.Fatal("Begin claimed a completed key")
		}
		if rec.State != gates.IdempotencyDone || rec.ArgsSHA256 != "args-1" || !bytes.Equal(rec.Result, result.Result) || len(rec.Refusal) != 0 {
			t.Fatalf("record after Complete = {%s %s %s %s}, want {args-1 done %s}", rec.ArgsSHA256, rec.State, rec.Result, rec.Refusal, result.Result)
		}
	})

	t.Run("CompleteStoresRefusal", func(t *testing.T) {
		s := newStore(t)
		c := claim(t, s, "k", "args-1", ttl)
		refusal := json.RawMessage(`{"error":{"code":"AXGATE_TOOL_FAILED","type":"execution_error","message":"the tool failed to complete the call","details":{}}}`)
		if err := s.Complete(ctx(t), owner, "k", c, gates.IdempotencyOutcome{Refusal: refusal}, ttl); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		rec, _ := begin(t, s, "k", "args-1", ttl)
		if rec.State != gates.IdempotencyDone || !bytes.Equal(rec.Refusal, refusal) || len(rec.Result) != 0 {
			t.Fatalf("record after Complete with a refusal = {%s %s result %s refusal %s}, want done with the refusal", rec.ArgsSHA256, rec.State, rec.Result, rec.Refusal)
		}
	})

	t.Run("ReleaseFreesKey", func(t *testing.T) {
		s := newStore(t)
		c := claim(t, s, "k", "args-1", ttl)
		if err := s.Release(ctx(t), owner, "k", c); err != nil {
			t.Fatalf("Release: %v", err)
		}
		claim(t, s, "k", "args-2", ttl)
	})

	t.Run("CompletedKeyCannotBeReleased", func(t *testing.T) {
		s := newStore(t)
		c := claim(t, s, "k", "args-1", ttl)
		if err := s.Complete(ctx(t), owner, "k", c, result, ttl); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if err := s.Release(ctx(t), owner, "k", c); !errors.Is(err, gates.ErrNotFound) {
			t.Fatalf("Release of a completed key = %v, want gates.ErrNotFound", err)
		}
		if rec, _ := begin(t, s, "k", "args-1", ttl); rec == nil || rec.State != gates.IdempotencyDone {
			t.Fatalf("record after the refused Release = %+v, want it still done", rec)
		}
	})

	t.Run("OtherClaimCannotCompleteOrRelease", func(t *testing.T) {
		s := newStore(t)
		c := claim(t, s, "k", "args-1", ttl)
		wrong := c + "-not"
		if err := s.Complete(ctx(t), owner, "k", wrong, result, ttl); !errors.Is(err, gates.ErrNotFound) {
			t.Fatalf("Complete with another claim = %v, want gates.ErrNotFound", err)
		}
		if err := s.Release(ctx(t), owner, "k", wrong); !errors.Is(err, gates.ErrNotFound) {
			t.Fatalf("Release with another claim = %v, want gates.ErrNotFound", err)
		}
		if err := s.Complete(ctx(t), owner, "never-claimed", c, result, ttl); !errors.Is(err, gates.ErrNotFound) {
			t.Fatalf("Complete of a key never claimed = %v, want gates.ErrNotFound", err)
		}
		if rec, _ := begin(t, s, "k", "args-1", ttl); rec == nil || rec.State != gates.IdempotencyInFlight {
			t.Fatalf("record after the refused Complete and Release = %+v, want it still in flight", rec)
		}
		if err := s.Complete(ctx(t), owner, "k", c, result, ttl); err != nil {
			t.Fatalf("Complete with the right claim: %v", err)
		}
	})

	t.Run("KeysAreIndependent", func(t *testing.T) {
		s := newStore(t)
		claim(t, s, "a", "args-1", ttl)
		claim(t, s, "b", "args-1", ttl)
	})

	t.Run("InFlightMarkerExpires", func(t *testing.T) {
		s := newStore(t)
		claim(t, s, "k", "args-1", 100*time.Millisecond)
		eventually(t, "the key claimable once its in-flight marker expired", func() bool {
			_, c := begin(t, s, "k", "args-2", ttl)
			return c != ""
		})
	})

	// A call that outlived its lease must not touch the claim of the call
	// that took the key over: completing or releasing it would let a third
	// call run.
	t.Run("StaleClaimLeavesTheNewOneAlone", func(t *testing.T) {
		s := newStore(t)
		stale := claim(t, s, "k", "args-1", 100*time.Millisecond)
		var fresh string
		eventually(t, "the key claimable once its in-flight marker expired", func() bool {
			_, fresh = begin(t, s, "k", "args-1", ttl)
			return fresh != ""
		})
		if fresh == stale {
			t.Fatalf("the new claim equals the stale one (%q)", fresh)
		}
		if err := s.Release(ctx(t), owner, "k", stale); !errors.Is(err, gates.ErrNotFound) {
			t.Fatalf("Release with the stale claim = %v, want gates.ErrNotFound", err)
		}
		if err := s.Complete(ctx(t), owner, "k", stale, result, ttl); !errors.Is(err, gates.ErrNotFound) {
			t.Fatalf("Complete with the stale claim = %v, want gates.ErrNotFound", err)
		}
		if rec, c := begin(t, s, "k", "args-1", ttl); c != "" || rec.State != gates.IdempotencyInFlight {
			t.Fatalf("after the stale claim's Release and Complete: %+v, claimed %v; want the new claim still in flight", rec, c != "")
		}
		if err := s.Complete(ctx(t), owner, "k", fresh, result, ttl); err != nil {
			t.Fatalf("Complete with the new claim: %v", err)
		}
	})

	t.Run("ConcurrentBeginOneClaims", func(t *testing.T) {
		s := newStore(t)
		claims := make([]string, Concurrency)
		errs := race(Concurrency, func(i int) error {
			_, c, err := s.Begin(ctx(t), owner, "k", "args-1", ttl)
			claims[i] = c
			return err
		})
		if _, _, other := count(errs, nil); other != nil {
			t.Fatal(other)
		}
		n := 0
		for _, c := range claims {
			if c != "" {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d concurrent Begin of one key: %d claimed, want exactly 1", Concurrency, n)
		}
	})

	testIdempotencyQuota(t, newStore)
}

// testIdempotencyQuota checks that an owner holds at most its quota of live
// records, and that the quota is its own.
func testIdempotencyQuota(t *testing.T, newStore func(t *testing.T) gates.IdempotencyStore) {
	const ttl = time.Hour
	result := gates.IdempotencyOutcome{Result: json.RawMessage(`{}`)}
	begin := func(t *testing.T, s gates.IdempotencyStore, o gates.IdempotencyOwner, key string, ttl time.Duration) (string, error) {
		t.Helper()
		_, c, err := s.Begin(ctx(t), o, o.Tenant+"/"+o.Principal+"/"+key, "args", ttl)
		return c, err
	}
	mustClaim := func(t *testing.T, s gates.IdempotencyStore, o gates.IdempotencyOwner, key string, ttl time.Duration) string {
		t.Helper()
		c, err := begin(t, s, o, key, ttl)
		if err != nil || c == "" {
			t.Fatalf("Begin(%s/%s/%s) = claim %q, %v; want a claim", o.Tenant, o.Principal, key, c, err)
		}
		return c
	}
	mustRefuse := func(t *testing.T, s gates.IdempotencyStore, o gates.IdempotencyOwner, key string) {
		t.Helper()
		c, err := begin(t, s, o, key, ttl)
		var qe *gates.QuotaError
		if !isQuota(err) || !errors.As(err, &qe) || c != "" {
			t.Fatalf("Begin(%s/%s/%s) over the quota = claim %q, %v; want a *gates.QuotaError", o.Tenant, o.Principal, key, c, err)
		}
		if qe.RetryAfter <= 0 || qe.RetryAfter > ttl {
			t.Fatalf("QuotaError.RetryAfter = %s, want in (0, %s]: when the oldest record expires", qe.RetryAfter, ttl)
		}
	}

	t.Run("QuotaBoundsLiveRecords", func(t *testing.T) {
		s := newStore(t)
		alice := gates.IdempotencyOwner{Tenant: "acme", Principal: "alice", Quota: 3}
		first := mustClaim(t, s, alice, "k1", ttl)
		mustClaim(t, s, alice, "k2", ttl)
		c3 := mustClaim(t, s, alice, "k3", ttl)
		mustRefuse(t, s, alice, "k4")
		// The refusal recorded nothing: the key is still free once a slot
		// is.
		if err := s.Release(ctx(t), alice, "acme/alice/k3", c3); err != nil {
			t.Fatalf("Release: %v", err)
		}
		mustClaim(t, s, alice, "k4", ttl)
		mustRefuse(t, s, alice, "k5")
		// A completed record is live, and still counts.
		if err := s.Complete(ctx(t), alice, "acme/alice/k1", first, result, ttl); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		mustRefuse(t, s, alice, "k5")
		// A key the owner holds is answered at the quota: that is a retry,
		// not a new record.
		rec, c, err := s.Begin(ctx(t), alice, "acme/alice/k1", "args", ttl)
		if err != nil || c != "" || rec == nil || rec.State != gates.IdempotencyDone {
			t.Fatalf("Begin of a held key at the quota = %+v, claim %q, %v; want the stored record", rec, c, err)
		}
	})

	t.Run("QuotaIsPerPrincipalAndTenant", func(t *testing.T) {
		s := newStore(t)
		alice := gates.IdempotencyOwner{Tenant: "acme", Principal: "alice", Quota: 2}
		mustClaim(t, s, alice, "k1", ttl)
		mustClaim(t, s, alice, "k2", ttl)
		mustRefuse(t, s, alice, "k3")
		for _, o := range []gates.IdempotencyOwner{
			{Tenant: "acme", Principal: "bob", Quota: 2},
			{Tenant: "globex", Principal: "alice", Quota: 2},
			{Tenant: "", Principal: "alice", Quota: 2},
			// The gate charges a caller's duplicate markers to an owner
			// whose principal is the caller's id behind a NUL prefix: it
			// must be an owner apart from the caller.
			{Tenant: "acme", Principal: "\x00dup\x00alice", Quota: 2},
		} {
			mustClaim(t, s, o, "k1", ttl)
			mustClaim(t, s, o, "k2", ttl)
		}
	})

	t.Run("UnchargedRecordsDoNotCount", func(t *testing.T) {
		s := newStore(t)
		free := gates.IdempotencyOwner{Tenant: "acme", Principal: "alice"}
		for i := range 5 {
			mustClaim(t, s, free, fmt.Sprint("dup-", i), ttl)
		}
		mustClaim(t, s, gates.IdempotencyOwner{Tenant: "acme", Principal: "alice", Quota: 1}, "k1", ttl)
	})

	t.Run("QuotaFreedAsRecordsExpire", func(t *testing.T) {
		s := newStore(t)
		alice := gates.IdempotencyOwner{Tenant: "acme", Principal: "alice", Quota: 1}
		mustClaim(t, s, alice, "k1", 100*time.Millisecond)
		eventually(t, "a new key claimable once the owner's record expired", func() bool {
			c, err := begin(t, s, alice, "k2", ttl)
			if err != nil && !isQuota(err) {
				t.Fatalf("Begin: %v", err)
			}
			return c != ""
		})
		// A completed record counts for as long as it is kept.
		s2 := newStore(t)
		c := mustClaim(t, s2, alice, "k1", 100*time.Millisecond)
		if err := s2.Complete(ctx(t), alice, "acme/alice/k1", c, result, ttl); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // past the lease, not the window
		mustRefuse(t, s2, alice, "k2")
	})

	// 8 owners, 100 goroutines each, each with a key of its own: exactly
	// Quota of each owner's claims succeed, never more.
	t.Run("ConcurrentQuotaExact", func(t *testing.T) {
		s := newStore(t)
		const owners, quota = 8, 10
		per := Concurrency
		errs := race(owners*per, func(i int) error {
			o := gates.IdempotencyOwner{Tenant: fmt.Sprint("t", i%2), Principal: fmt.Sprint("p", i%owners), Quota: quota}
			c, err := begin(t, s, o, fmt.Sprint("k", i), ttl)
			if err == nil && c == "" {
				return errors.New("a fresh key was not claimed")
			}
			return err
		})
		claimed := make([]int, owners)
		for i, err := range errs {
			switch {
			case err == nil:
				claimed[i%owners]++
			case isQuota(err):
			default:
				t.Fatalf("Begin: %v", err)
			}
		}
		for o, n := range claimed {
			if n != quota {
				t.Errorf("owner %d: %d of %d concurrent claims succeeded, want exactly the quota %d", o, n, per, quota)
			}
		}
	})
}
