package redisstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/axgate/axgate/internal/gate"

	"github.com/redis/go-redis/v9"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/gates/redisstore/internal/redistest"
	"github.com/axgate/axgate/gates/storetest"
	"github.com/axgate/axgate/token"
)

// testTimeout bounds store operations in the tests that check behaviour, not
// timeouts: generous, so that a loaded machine does not fail them.
const testTimeout = 5 * time.Second

// stores returns stores on the shared test Redis under a prefix of the
// test's own.
func stores(t *testing.T, c *redis.Client, opts redisstore.Options) *redisstore.Stores {
	opts.Prefix = redistest.Prefix(t, c)
	if opts.Timeout == 0 {
		opts.Timeout = testTimeout
	}
	return redisstore.New(c, opts)
}

func TestReplayStoreConformance(t *testing.T) {
	c := redistest.Client(t)
	storetest.TestReplayStore(t, func(t *testing.T) token.ReplayStore { return stores(t, c, redisstore.Options{}).Replay })
}

func TestLimiterConformance(t *testing.T) {
	c := redistest.Client(t)
	storetest.TestLimiter(t, func(t *testing.T) gates.Limiter { return stores(t, c, redisstore.Options{}).Limiter })
}

func TestIdempotencyStoreConformance(t *testing.T) {
	c := redistest.Client(t)
	storetest.TestIdempotencyStore(t, func(t *testing.T) gates.IdempotencyStore {
		return stores(t, c, redisstore.Options{}).Idempotency
	})
}

func TestApprovalStoreConformance(t *testing.T) {
	c := redistest.Client(t)
	storetest.TestApprovalStore(t, func(t *testing.T) gates.ApprovalStore { return stores(t, c, redisstore.Options{}).Approvals })
}

// TestOneRoundTripPerGateCall counts the commands and pipelines each
// operation sends: the operations a gate makes on every call must cost one
// round trip (scripts run with EVALSHA once Redis knows them).
func TestOneRoundTripPerGateCall(t *testing.T) {
	c := redistest.Client(t)
	counter := &redistest.Counter{}
	c.AddHook(counter)
	s := stores(t, c, redisstore.Options{})
	ctx := t.Context()
	exp := time.Now().Add(time.Minute)
	req := gates.ApprovalRequest{ID: "r1", Tenant: "acme", Roles: []string{"manager"}, State: gates.ApprovalPending, CreatedAt: time.Now(), ExpiresAt: exp}
	limit := gates.Limit{Count: 10, Per: time.Minute}

	// Warm up: the first run of each script may load it (EVALSHA, then EVAL).
	s.Replay.Consume(ctx, []token.Use{{ID: "warm-1", Expires: exp}, {ID: "warm-2", Expires: exp}})
	s.Limiter.AllowN(ctx, []gates.LimitKey{{Key: "warm", Limit: limit}}, 1)
	_, warm, _ := s.Idempotency.Begin(ctx, owner, "warm", "a", time.Minute)
	s.Idempotency.Complete(ctx, owner, "warm", warm, gates.IdempotencyOutcome{Result: json.RawMessage(`1`)}, time.Minute)
	_, warm, _ = s.Idempotency.Begin(ctx, owner, "warm-2", "a", time.Minute)
	s.Idempotency.Release(ctx, owner, "warm-2", warm)
	var claim string
	two := []gates.LimitKey{{Key: "cooldown", Limit: gates.Limit{Count: 1, Per: time.Millisecond}}, {Key: "k", Limit: limit}}
	s.Approvals.Create(ctx, gates.ApprovalRequest{ID: "warm", ExpiresAt: exp}, 0)
	s.Approvals.Update(ctx, "warm", func(*gates.ApprovalRequest) error { return nil })

	for _, tc := range []struct {
		name string
		want int64
		op   func() error
	}{
		{"ReplayStore.Consume one id", 1, func() error {
			return s.Replay.Consume(ctx, []token.Use{{ID: "t1", Expires: exp}})
		}},
		{"ReplayStore.Consume three ids", 1, func() error {
			return s.Replay.Consume(ctx, []token.Use{{ID: "t2", Expires: exp}, {ID: "t3", Expires: exp}, {ID: "t4", Expires: exp}})
		}},
		{"ReplayStore.Consume replayed", 1, func() error {
			if err := s.Replay.Consume(ctx, []token.Use{{ID: "t1", Expires: exp}}); !errors.Is(err, token.ErrReplayed) {
				return fmt.Errorf("want ErrReplayed, got %v", err)
			}
			return nil
		}},
		{"ReplayStore.Used", 1, func() error { _, err := s.Replay.Used(ctx, "t1"); return err }},
		{"Limiter.AllowN", 1, func() error { _, err := s.Limiter.AllowN(ctx, two[1:], 1); return err }},
		{"Limiter.AllowN peek", 1, func() error { _, err := s.Limiter.AllowN(ctx, two[1:], 0); return err }},
		{"Limiter.AllowN cooldown and rate", 1, func() error { _, err := s.Limiter.AllowN(ctx, two, 1); return err }},
		{"Limiter.AllowN cooldown and rate peek", 1, func() error { _, err := s.Limiter.AllowN(ctx, two, 0); return err }},
		{"IdempotencyStore.Begin", 1, func() error {
			var err error
			_, claim, err = s.Idempotency.Begin(ctx, owner, "i1", "a", time.Minute)
			return err
		}},
		{"IdempotencyStore.Begin held", 1, func() error { _, _, err := s.Idempotency.Begin(ctx, owner, "i1", "a", time.Minute); return err }},
		{"IdempotencyStore.Complete", 1, func() error {
			return s.Idempotency.Complete(ctx, owner, "i1", claim, gates.IdempotencyOutcome{Result: json.RawMessage(`{}`)}, time.Minute)
		}},
		{"IdempotencyStore.Begin again", 1, func() error {
			var err error
			_, claim, err = s.Idempotency.Begin(ctx, owner, "i2", "a", time.Minute)
			return err
		}},
		{"IdempotencyStore.Release", 1, func() error { return s.Idempotency.Release(ctx, owner, "i2", claim) }},
		{"IdempotencyStore.Begin over the quota", 1, func() error {
			full := gates.IdempotencyOwner{Tenant: "acme", Principal: "user-1", Quota: 1} // holds i1
			var qe *gates.QuotaError
			if _, _, err := s.Idempotency.Begin(ctx, full, "i3", "a", time.Minute); !errors.As(err, &qe) {
				return fmt.Errorf("Begin over the quota = %v", err)
			}
			return nil
		}},
		{"ApprovalStore.Create", 1, func() error { _, _, err := s.Approvals.Create(ctx, req, 0); return err }},
		{"ApprovalStore.Create existing", 1, func() error { _, _, err := s.Approvals.Create(ctx, req, 0); return err }},
		{"ApprovalStore.Get", 1, func() error { _, err := s.Approvals.Get(ctx, "r1"); return err }},
		{"ApprovalStore.Update", 2, func() error {
			_, err := s.Approvals.Update(ctx, "r1", func(r *gates.ApprovalRequest) error { r.State = gates.ApprovalApproved; return nil })
			return err
		}},
		{"ApprovalStore.List", 2, func() error {
			_, _, err := s.Approvals.List(ctx, gates.ApprovalFilter{Tenant: "acme"}, "", 0)
			return err
		}},
	} {
		counter.Reset()
		if err := tc.op(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := counter.Count(); got != tc.want {
			t.Errorf("%s: %d round trips, want %d", tc.name, got, tc.want)
		}
	}
}

// TestKeysUnderPrefix checks that every key the stores write starts with the
// prefix, including the rate limiter's (redis_rate prefixes keys of its own).
func TestKeysUnderPrefix(t *testing.T) {
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	s := redisstore.New(c, redisstore.Options{Prefix: prefix, Timeout: testTimeout})
	ctx := t.Context()
	exp := time.Now().Add(time.Minute)
	if err := s.Replay.Consume(ctx, []token.Use{{ID: "j1", Expires: exp}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Limiter.AllowN(ctx, []gates.LimitKey{{Key: "acme/user-1/orders.cancel", Limit: gates.Limit{Count: 5, Per: time.Minute}}}, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Idempotency.Begin(ctx, owner, "acme/user-1/key-1", "digest", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Approvals.Create(ctx, gates.ApprovalRequest{ID: "r1", Tenant: "acme", ExpiresAt: exp}, 0); err != nil {
		t.Fatal(err)
	}
	want := []string{
		prefix + "jti:j1",
		prefix + "rate:acme/user-1/orders.cancel",
		prefix + "idem:acme/user-1/key-1",
		prefix + "apr:req:r1",
		prefix + "apr:inbox:t:acme",
		prefix + "apr:inbox:all",
		prefix + "apr:pend:" + gate.StateKey("r", "acme", ""),
	}
	for _, k := range want {
		if n, err := c.Exists(ctx, k).Result(); err != nil || n != 1 {
			t.Errorf("key %q: exists = %d, %v; want it written", k, n, err)
		}
	}
	if n, _ := c.Exists(ctx, "rate:"+prefix+"rate:acme/user-1/orders.cancel").Result(); n != 0 {
		t.Error("the rate limiter wrote a key outside the prefix")
	}
}

// TestUsedTokenKeptPastExpiry checks that a used token id outlives the token
// by the clock skew, so that a replica whose clock runs behind cannot accept
// it again.
func TestUsedTokenKeptPastExpiry(t *testing.T) {
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	s := redisstore.NewReplayStore(c, redisstore.Options{Prefix: prefix, Timeout: testTimeout, ClockSkew: time.Hour})
	if err := s.Consume(t.Context(), []token.Use{{ID: "j1", Expires: time.Now().Add(time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	ttl, err := c.PTTL(t.Context(), prefix+"jti:j1").Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= time.Hour || ttl > time.Hour+time.Minute {
		t.Fatalf("used token id kept for %s, want the token's minute plus the hour of skew", ttl)
	}
}

// TestInvalidInputRefused checks that input a store cannot keep safely is an
// error (the gate then refuses), never silently accepted.
func TestInvalidInputRefused(t *testing.T) {
	c := redistest.Client(t)
	s := stores(t, c, redisstore.Options{})
	ctx := t.Context()
	if err := s.Replay.Consume(ctx, []token.Use{{ID: "no-expiry"}}); err == nil || errors.Is(err, token.ErrReplayed) {
		t.Errorf("Consume of a token use without expiry = %v, want an error", err)
	}
	for _, l := range []gates.Limit{{Count: 0, Per: time.Minute}, {Count: 5, Per: 0}, {Count: -1, Per: time.Minute}} {
		if d, err := s.Limiter.AllowN(ctx, []gates.LimitKey{{Key: "k", Limit: l}}, 1); err == nil {
			t.Errorf("AllowN under %+v = %+v, want an error", l, d)
		}
	}
	if _, err := s.Limiter.AllowN(ctx, []gates.LimitKey{{Key: "k", Limit: gates.Limit{Count: 5, Per: time.Minute}}}, -1); err == nil {
		t.Error("AllowN(-1) succeeded, want an error")
	}
	if _, _, err := s.Idempotency.Begin(ctx, owner, "k", "a", 0); err == nil {
		t.Error("Begin with ttl 0 succeeded, want an error")
	}
	if _, _, err := s.Approvals.Create(ctx, gates.ApprovalRequest{}, 0); err == nil {
		t.Error("Create without an id succeeded, want an error")
	}
}

// TestCompleteAfterClaimExpired checks that a result is not stored for a key
// whose claim has lapsed (another call may hold it by now).
func TestCompleteAfterClaimExpired(t *testing.T) {
	c := redistest.Client(t)
	s := stores(t, c, redisstore.Options{})
	err := s.Idempotency.Complete(t.Context(), owner, "never-claimed", "claim", gates.IdempotencyOutcome{Result: json.RawMessage(`{}`)}, time.Minute)
	if !errors.Is(err, gates.ErrNotFound) {
		t.Fatalf("Complete of an unclaimed key = %v, want gates.ErrNotFound", err)
	}
}

// TestUpdateMayNotMoveRequest checks that an update cannot change the id or
// tenant the indexes are built on.
func TestUpdateMayNotMoveRequest(t *testing.T) {
	c := redistest.Client(t)
	s := stores(t, c, redisstore.Options{})
	ctx := t.Context()
	if _, _, err := s.Approvals.Create(ctx, gates.ApprovalRequest{ID: "r1", Tenant: "acme", State: gates.ApprovalPending, ExpiresAt: time.Now().Add(time.Hour)}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Approvals.Update(ctx, "r1", func(r *gates.ApprovalRequest) error { r.Tenant = "globex"; return nil }); err == nil {
		t.Fatal("Update moving the request to another tenant succeeded")
	}
	if r, err := s.Approvals.Get(ctx, "r1"); err != nil || r.Tenant != "acme" {
		t.Fatalf("Get after the refused update = %+v, %v; want it unchanged", r, err)
	}
}

// TestExpiredRequestsLeaveTheInbox checks that a request past its expiry
// leaves the index as soon as List meets it, and past its retention
// disappears from Get.
func TestExpiredRequestsLeaveTheInbox(t *testing.T) {
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	s := redisstore.NewApprovalStore(c, redisstore.Options{Prefix: prefix, Timeout: testTimeout, ApprovalRetention: 50 * time.Millisecond})
	ctx := t.Context()
	if _, _, err := s.Create(ctx, gates.ApprovalRequest{ID: "old", Tenant: "acme", State: gates.ApprovalPending, ExpiresAt: time.Now()}, 0); err != nil {
		t.Fatal(err)
	}
	list, _, err := s.List(ctx, gates.ApprovalFilter{Tenant: "acme"}, "", 0)
	if err != nil || len(list) != 0 {
		t.Fatalf("List = %+v, %v; an expired request is not listed", list, err)
	}
	if n, _ := c.ZCard(ctx, prefix+"apr:inbox:t:acme").Result(); n != 0 {
		t.Fatalf("tenant index still holds %d ids after List met them expired", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.Get(ctx, "old")
		if errors.Is(err, gates.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Get(expired) = %v past the retention, want gates.ErrNotFound", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTwoReplicasShareState runs two sets of stores, each with a client (and
// connection pool) of its own, on one Redis: the same token presented to both
// at once is spent exactly once, round after round, and a limit holds across
// both.
func TestTwoReplicasShareState(t *testing.T) {
	c1, c2 := redistest.Client(t), redistest.Client(t)
	prefix := redistest.Prefix(t, c1)
	a := redisstore.New(c1, redisstore.Options{Prefix: prefix, Timeout: testTimeout})
	b := redisstore.New(c2, redisstore.Options{Prefix: prefix, Timeout: testTimeout})
	ctx := t.Context()

	for round := range 200 {
		use := []token.Use{{ID: fmt.Sprint("tok-", round), Expires: time.Now().Add(time.Minute)}}
		var errA, errB error
		var wg sync.WaitGroup
		wg.Go(func() { errA = a.Replay.Consume(ctx, use) })
		wg.Go(func() { errB = b.Replay.Consume(ctx, use) })
		wg.Wait()
		ok := 0
		for _, err := range []error{errA, errB} {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, token.ErrReplayed):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: the token was spent %d times across two replicas, want exactly once", round, ok)
		}
	}

	limit := gates.Limit{Count: 7, Per: time.Hour}
	allowed := 0
	for i := range 20 {
		s := a
		if i%2 == 1 {
			s = b
		}
		d, err := s.Limiter.AllowN(ctx, []gates.LimitKey{{Key: "acme/user-1/orders.cancel", Limit: limit}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != limit.Count {
		t.Fatalf("20 calls alternating between replicas under 7 per hour: %d allowed", allowed)
	}
}

// TestOpen checks that Open refuses a Redis that does not answer (a replica
// must not start with state it cannot share) and works with one that does.
func TestOpen(t *testing.T) {
	if _, err := redisstore.Open(t.Context(), "redis://127.0.0.1:1/0", redisstore.Options{}); err == nil {
		t.Fatal("Open of a closed port succeeded")
	}
	if _, err := redisstore.Open(t.Context(), "http://example.com", redisstore.Options{}); err == nil {
		t.Fatal("Open of a URL that is not Redis succeeded")
	}
	o, err := redisstore.ParseURL("redis://127.0.0.1:6379/3")
	if err != nil || !o.ContextTimeoutEnabled || o.DB != 3 {
		t.Fatalf("ParseURL = %+v, %v; want context deadlines honoured, db 3", o, err)
	}
	s, err := redisstore.Open(t.Context(), redistest.URL(t), redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Replay.Used(t.Context(), "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Replay.Used(t.Context(), "x"); err == nil {
		t.Fatal("the stores still answer after Close")
	}
}

// owner is the caller the store tests charge idempotency records to, with a
// quota they never reach.
var owner = gates.IdempotencyOwner{Tenant: "acme", Principal: "user-1", Quota: 1000}

// TestApprovalArgumentsKeepTheirBytes: a request's arguments come back from
// Redis as the call carried them, "<", ">" and "&" included (not spelled
// "\u003c" by encoding/json's HTML escaping), whether created, replaced or
// updated: the pages show them to the person who decides.
func TestApprovalArgumentsKeepTheirBytes(t *testing.T) {
	c := redistest.Client(t)
	s := stores(t, c, redisstore.Options{})
	ctx := t.Context()
	const args = `{"content":"ship <b>Friday</b> & not Monday","path":"/srv/a>b.txt"}`
	now := time.Now()
	req := gates.ApprovalRequest{ID: "cnf_bytes", Tenant: "acme", Requester: "carol", Count: 1, Kind: "confirmation",
		Arguments: json.RawMessage(args), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if _, _, err := s.Approvals.Create(ctx, req, 0); err != nil {
		t.Fatal(err)
	}
	got, err := s.Approvals.Get(ctx, req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Arguments) != args {
		t.Fatalf("created: arguments %s, want %s", got.Arguments, args)
	}
	got, err = s.Approvals.Update(ctx, req.ID, func(r *gates.ApprovalRequest) error {
		r.State = gates.ApprovalDenied
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err = s.Approvals.Get(ctx, req.ID); err != nil || string(got.Arguments) != args {
		t.Fatalf("updated: arguments %s (%v), want %s", got.Arguments, err, args)
	}
}
