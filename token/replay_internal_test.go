package token

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/axgate/axgate/middleware"
)

// TestMemoryReplayStorePurgeGivesMemoryBack fills the store with 200,000
// ids that then expire, and keeps calling: each call purges at most
// replayPurgeBatch of them (no call pays for the whole expiry), and once
// they are purged the heap is back near where it started (the heap's
// backing array kept every purged id before, and the map its buckets: 32.6
// MB stayed).
func TestMemoryReplayStorePurgeGivesMemoryBack(t *testing.T) {
	const n = 200_000
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := NewMemoryReplayStore(MemoryReplayOptions{Now: func() time.Time { return now }}).(*memoryReplayStore)
	ctx := t.Context()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	for i := range n {
		id := middleware.DigestCanonical([]byte("fill-" + strconv.Itoa(i))) // a 43-character id, as the gates record
		if err := s.Consume(ctx, []Use{{ID: id, Expires: now.Add(time.Minute), Tenant: "acme"}}); err != nil {
			t.Fatalf("fill %d: %v", i, err)
		}
	}
	now = now.Add(2 * time.Minute)

	calls := 0
	for s.Len() > 2*n/replayPurgeBatch+10 {
		calls++
		if calls > n {
			t.Fatalf("after %d calls the store still holds %d ids", calls, s.Len())
		}
		id := middleware.DigestCanonical([]byte("new-" + strconv.Itoa(calls))) // a 43-character id, as the gates record
		if err := s.Consume(ctx, []Use{{ID: id, Expires: now.Add(time.Hour), Tenant: "acme"}}); err != nil {
			t.Fatalf("call %d: %v", calls, err)
		}
		if s.purged > replayPurgeBatch {
			t.Fatalf("call %d purged %d expired ids; at most %d per call", calls, s.purged, replayPurgeBatch)
		}
	}
	if calls < n/(2*replayPurgeBatch) {
		t.Fatalf("the expired ids were gone after %d calls: the purge was not bounded", calls)
	}

	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if grown > 4<<20 {
		t.Fatalf("heap after the purge is %d KB above where it started, holding %d ids; want it given back (< 4 MB)", grown>>10, s.Len())
	}
	runtime.KeepAlive(s)
}
