package redisstore_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/gates/redisstore/internal/redistest"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/token"
)

// TestPoolWaitIsStoreBusy: with every pooled connection in use, an
// operation that waits past the pool timeout is not the store being down.
// The only connection of a pool of one is held by a BLPOP; the four stores'
// operations fail with an error matching gates.ErrStoreBusy, which the gates
// answer with 503, reason store_busy, retryable; once the connection is
// back, they work.
func TestPoolWaitIsStoreBusy(t *testing.T) {
	url := redistest.URL(t)
	other := redistest.Client(t)
	s, err := redisstore.Open(t.Context(), url, redisstore.Options{
		// The default PoolTimeout (a quarter of Timeout) and retries: the
		// wait must end as a pool timeout, not as the deadline.
		Prefix: redistest.Prefix(t, other), Timeout: time.Second,
		PoolSize: 1, MinIdleConns: 1,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := s.Client().(*redis.Client)
	if got := c.Options().PoolSize; got != 1 {
		t.Fatalf("Open's client has a pool of %d, want Options.PoolSize 1", got)
	}
	queue := redistest.Prefix(t, other) + "blocked"
	blocked := make(chan error, 1)
	go func() { blocked <- c.BLPop(t.Context(), 10*time.Second, queue).Err() }()
	// Wait until the BLPOP holds the only connection.
	deadline := time.Now().Add(10 * time.Second)
	for st := c.PoolStats(); st.TotalConns != 1 || st.IdleConns != 0; st = c.PoolStats() {
		if time.Now().After(deadline) {
			t.Fatalf("the BLPOP does not hold the connection: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}

	ctx := t.Context()
	exp := time.Now().Add(time.Minute)
	errs := map[string]error{}
	errs["Consume"] = s.Replay.Consume(ctx, []token.Use{{ID: "t", Expires: exp}})
	_, errs["Used"] = s.Replay.Used(ctx, "t")
	_, errs["AllowN"] = s.Limiter.AllowN(ctx, []gates.LimitKey{{Key: "k", Limit: gates.Limit{Count: 1, Per: time.Minute}}}, 1)
	_, _, errs["Begin"] = s.Idempotency.Begin(ctx, owner, "k", "d", time.Minute)
	// The approval store too (it once answered a pool wait as the store
	// being down).
	now := time.Now()
	_, _, errs["Create"] = s.Approvals.Create(ctx, gates.ApprovalRequest{ID: "apr_x", Tenant: "t", Requester: "r", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, 20)
	_, errs["Get"] = s.Approvals.Get(ctx, "apr_x")
	_, errs["Update"] = s.Approvals.Update(ctx, "apr_x", func(*gates.ApprovalRequest) error { return nil })
	_, _, errs["List"] = s.Approvals.List(ctx, gates.ApprovalFilter{Tenant: "t"}, "", 10)
	for op, err := range errs {
		if !errors.Is(err, gates.ErrStoreBusy) || !errors.Is(err, redis.ErrPoolTimeout) {
			t.Fatalf("%s with the pool exhausted = %v; want an error matching gates.ErrStoreBusy", op, err)
		}
		e := gate.StoreUnavailable("order.place", "the store", err)
		raw, _ := e.MarshalJSON()
		if e.HTTPStatus() != 503 || !e.Retryable() || e.Details["reason"] != string(reasons.StoreBusy) || strings.Contains(string(raw), "pool") {
			t.Fatalf("%s: refusal %s (%d, retryable %v); want 503, retryable, reason store_busy, no internals", op, raw, e.HTTPStatus(), e.Retryable())
		}
	}
	if e := gate.StoreUnavailable("order.place", "the store", errors.New("dial tcp: connection refused")); e.Details["reason"] != nil {
		t.Fatalf("a store that is down got reason %v; store_busy is only for pool waits", e.Details["reason"])
	}

	if err := other.LPush(ctx, queue, "go").Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; err != nil {
		t.Fatalf("BLPOP: %v", err)
	}
	if err := s.Replay.Consume(ctx, []token.Use{{ID: "t", Expires: exp}}); err != nil {
		t.Fatalf("Consume once the connection is free: %v", err)
	}
}

// TestOpenWarnsWithoutPersistence: Open asks Redis how it persists, and
// warns on the logger it is given (never the global one) when a restart
// would forget spent tokens; it keeps quiet about a Redis with AOF, and
// skips a Redis whose CONFIG is disabled, at debug level.
func TestOpenWarnsWithoutPersistence(t *testing.T) {
	open := func(t *testing.T, url string) string {
		t.Helper()
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		s, err := redisstore.Open(t.Context(), url, redisstore.Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		return buf.String()
	}
	t.Run("none", func(t *testing.T) {
		out := open(t, redistest.StartServer(t).URL())
		if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "spent confirmation and approval tokens") || !strings.Contains(out, "appendonly yes") {
			t.Fatalf("Open on a Redis without persistence logged %q; want a warning naming the risk", out)
		}
	})
	t.Run("snapshots", func(t *testing.T) {
		out := open(t, redistest.StartServer(t, "--save", "3600 1").URL())
		if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "since the last snapshot") {
			t.Fatalf("Open on a Redis with RDB only logged %q; want a warning", out)
		}
	})
	t.Run("aof", func(t *testing.T) {
		if out := open(t, redistest.StartServer(t, "--appendonly", "yes").URL()); out != "" {
			t.Fatalf("Open on a Redis with AOF logged %q; want nothing", out)
		}
	})
	t.Run("config disabled", func(t *testing.T) {
		out := open(t, redistest.StartServer(t, "--rename-command", "CONFIG", "").URL())
		if strings.Contains(out, "level=WARN") || !strings.Contains(out, "level=DEBUG") {
			t.Fatalf("Open on a Redis without CONFIG logged %q; want a debug line only", out)
		}
	})
	t.Run("shared", func(t *testing.T) {
		// The shared test Redis: whatever it is set to, Open warns exactly
		// when it keeps no AOF.
		c := redistest.Client(t)
		aof, err := c.ConfigGet(t.Context(), "appendonly").Result()
		if err != nil {
			t.Skipf("CONFIG GET: %v", err)
		}
		out := open(t, redistest.URL(t))
		if warned := strings.Contains(out, "level=WARN"); warned != (aof["appendonly"] != "yes") {
			t.Fatalf("appendonly %q, Open logged %q", aof["appendonly"], out)
		}
	})
}
