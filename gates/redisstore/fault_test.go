//go:build unix

package redisstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/gates/redisstore/internal/redistest"
	"github.com/axgate/axgate/token"
)

// TestFailClosed runs the stores against a Redis of the test's own, then
// freezes it, kills it and brings it back: while it cannot answer, every
// operation is an error (which the gates turn into a 503 refusal) and none
// reports a success; once it answers again, the stores work again.
func TestFailClosed(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redistest.Dial(t, srv.URL())
	s := redisstore.New(c, redisstore.Options{Timeout: 250 * time.Millisecond})
	ctx := t.Context()
	exp := time.Now().Add(time.Hour)
	limit := gates.Limit{Count: 1000, Per: time.Hour}

	// ops runs every operation with fresh ids; each returns nil on success.
	n := 0
	ops := func() map[string]error {
		n++
		id := func(s string) string { return fmt.Sprint(s, "-", n) }
		out := map[string]error{}
		out["Consume"] = s.Replay.Consume(ctx, []token.Use{{ID: id("tok"), Expires: exp}})
		out["Consume several"] = s.Replay.Consume(ctx, []token.Use{{ID: id("t1"), Expires: exp}, {ID: id("t2"), Expires: exp}})
		_, out["Used"] = s.Replay.Used(ctx, id("tok"))
		d, err := s.Limiter.AllowN(ctx, []gates.LimitKey{{Key: "k", Limit: limit}}, 1)
		if err == nil && !d.Allowed {
			err = errors.New("refused under a limit of 1000")
		}
		out["AllowN"] = err
		rec, claim, err := s.Idempotency.Begin(ctx, owner, id("idem"), "digest", time.Hour)
		if err == nil && (claim == "" || rec != nil) {
			err = errors.New("fresh key not claimed")
		}
		out["Begin"] = err
		out["Complete"] = s.Idempotency.Complete(ctx, owner, id("idem"), claim, gates.IdempotencyOutcome{Result: json.RawMessage(`{}`)}, time.Hour)
		_, claim, err = s.Idempotency.Begin(ctx, owner, id("idem2"), "digest", time.Hour)
		if err == nil {
			err = s.Idempotency.Release(ctx, owner, id("idem2"), claim)
		}
		out["Release"] = err
		_, created, err := s.Approvals.Create(ctx, gates.ApprovalRequest{ID: id("req"), State: gates.ApprovalPending, ExpiresAt: exp}, 0)
		if err == nil && !created {
			err = errors.New("fresh request not created")
		}
		out["Create"] = err
		_, out["Get"] = s.Approvals.Get(ctx, id("req"))
		_, out["Update"] = s.Approvals.Update(ctx, id("req"), func(r *gates.ApprovalRequest) error { r.State = gates.ApprovalApproved; return nil })
		_, _, out["List"] = s.Approvals.List(ctx, gates.ApprovalFilter{}, "", 0)
		return out
	}
	allFail := func(phase string) {
		t.Helper()
		for op, err := range ops() {
			if err == nil {
				t.Errorf("%s: %s succeeded while Redis could not answer: the store failed open", phase, op)
			}
		}
		// The token spent before the outage is neither reported unused
		// nor spendable.
		if used, err := s.Replay.Used(ctx, "spent"); err == nil {
			t.Errorf("%s: Used answered %v without Redis", phase, used)
		}
		if err := s.Replay.Consume(ctx, []token.Use{{ID: "spent", Expires: exp}}); err == nil {
			t.Errorf("%s: a spent token was accepted again", phase)
		}
	}
	eventuallyWorks := func(phase string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			failed := ""
			for op, err := range ops() {
				if err != nil {
					failed = op + ": " + err.Error()
				}
			}
			if failed == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the stores did not recover: %s", phase, failed)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	eventuallyWorks("before")
	if err := s.Replay.Consume(ctx, []token.Use{{ID: "spent", Expires: exp}}); err != nil {
		t.Fatal(err)
	}

	srv.Pause()
	allFail("paused")
	srv.Resume()
	eventuallyWorks("resumed")
	if err := s.Replay.Consume(ctx, []token.Use{{ID: "spent", Expires: exp}}); !errors.Is(err, token.ErrReplayed) {
		t.Fatalf("after the pause, the token spent before it: Consume = %v, want token.ErrReplayed", err)
	}

	srv.Stop()
	allFail("stopped")
	srv.Start()
	eventuallyWorks("restarted")
}
