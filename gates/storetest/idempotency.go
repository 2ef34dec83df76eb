package storetest

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/axgate/axgate/gates"
)

// TestIdempotencyStore checks a gates.IdempotencyStore. newStore returns a
// new, empty store for each subtest.
func TestIdempotencyStore(t *testing.T, newStore func(t *testing.T) gates.IdempotencyStore) {
	const ttl = time.Hour
	begin := func(t *testing.T, s gates.IdempotencyStore, key, args string, ttl time.Duration) (*gates.IdempotencyRecord, bool) {
		t.Helper()
		rec, claimed, err := s.Begin(ctx(t), key, args, ttl)
		if err != nil {
			t.Fatalf("Begin(%q): %v", key, err)
		}
		if claimed != (rec == nil) {
			t.Fatalf("Begin(%q) = (%+v, claimed %v): a claim returns no record, a refusal returns the holder", key, rec, claimed)
		}
		return rec, claimed
	}

	t.Run("FirstBeginClaims", func(t *testing.T) {
		s := newStore(t)
		if _, claimed := begin(t, s, "k", "args-1", ttl); !claimed {
			t.Fatal("Begin on a fresh key did not claim it")
		}
	})

	t.Run("InFlightKeyIsHeld", func(t *testing.T) {
		s := newStore(t)
		begin(t, s, "k", "args-1", ttl)
		for _, args := range []string{"args-1", "args-2"} {
			rec, claimed := begin(t, s, "k", args, ttl)
			if claimed {
				t.Fatalf("Begin(k, %s) claimed a key in flight", args)
			}
			if rec.State != gates.IdempotencyInFlight || rec.ArgsSHA256 != "args-1" {
				t.Fatalf("Begin(k, %s) = %+v, want the first call's in-flight record", args, rec)
			}
		}
	})

	t.Run("CompleteStoresResult", func(t *testing.T) {
		s := newStore(t)
		begin(t, s, "k", "args-1", ttl)
		result := json.RawMessage(`{"order_id":"o-1","total":12.5}`)
		if err := s.Complete(ctx(t), "k", result, ttl); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		rec, claimed := begin(t, s, "k", "args-1", ttl)
		if claimed {
			t.Fatal("Begin claimed a completed key")
		}
		if rec.State != gates.IdempotencyDone || rec.ArgsSHA256 != "args-1" || !bytes.Equal(rec.Result, result) {
			t.Fatalf("record after Complete = {%s %s %s}, want {args-1 done %s}", rec.ArgsSHA256, rec.State, rec.Result, result)
		}
	})

	t.Run("ReleaseFreesKey", func(t *testing.T) {
		s := newStore(t)
		begin(t, s, "k", "args-1", ttl)
		if err := s.Release(ctx(t), "k"); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if _, claimed := begin(t, s, "k", "args-2", ttl); !claimed {
			t.Fatal("Begin after Release did not claim the key")
		}
	})

	t.Run("KeysAreIndependent", func(t *testing.T) {
		s := newStore(t)
		begin(t, s, "a", "args-1", ttl)
		if _, claimed := begin(t, s, "b", "args-1", ttl); !claimed {
			t.Fatal("Begin(b) refused because a is held")
		}
	})

	t.Run("InFlightMarkerExpires", func(t *testing.T) {
		s := newStore(t)
		begin(t, s, "k", "args-1", 100*time.Millisecond)
		eventually(t, "the key claimable once its in-flight marker expired", func() bool {
			_, claimed := begin(t, s, "k", "args-2", ttl)
			return claimed
		})
	})

	t.Run("ConcurrentBeginOneClaims", func(t *testing.T) {
		s := newStore(t)
		claims := make([]bool, Concurrency)
		errs := race(Concurrency, func(i int) error {
			_, claimed, err := s.Begin(ctx(t), "k", "args-1", ttl)
			claims[i] = claimed
			return err
		})
		if _, _, other := count(errs, nil); other != nil {
			t.Fatal(other)
		}
		n := 0
		for _, c := range claims {
			if c {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d concurrent Begin of one key: %d claimed, want exactly 1", Concurrency, n)
		}
	})
}
