package gate_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/axgate/axgate/gates/storetest"
	"github.com/axgate/axgate/internal/gate"
)

func TestMemoryApprovalStoreContract(t *testing.T) {
	storetest.TestApprovalStore(t, func(*testing.T) gate.ApprovalStore {
		return gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{})
	})
}

// TestApprovalStateMachine checks every pair of states against the table:
// pending → approved | denied | expired | cancelled | executed, approved →
// executed, terminal states final.
func TestApprovalStateMachine(t *testing.T) {
	states := []gate.ApprovalState{gate.ApprovalPending, gate.ApprovalApproved, gate.ApprovalDenied, gate.ApprovalExpired, gate.ApprovalCancelled, gate.ApprovalExecuted}
	valid := map[[2]gate.ApprovalState]bool{
		{gate.ApprovalPending, gate.ApprovalApproved}:  true,
		{gate.ApprovalPending, gate.ApprovalDenied}:    true,
		{gate.ApprovalPending, gate.ApprovalExpired}:   true,
		{gate.ApprovalPending, gate.ApprovalCancelled}: true,
		{gate.ApprovalPending, gate.ApprovalExecuted}:  true,
		{gate.ApprovalApproved, gate.ApprovalExecuted}: true,
	}
	for _, from := range states {
		if got, want := gate.Terminal(from), from != gate.ApprovalPending; got != want {
			t.Errorf("Terminal(%s) = %v, want %v", from, got, want)
		}
		for _, to := range states {
			err := gate.ValidateTransition(from, to)
			if valid[[2]gate.ApprovalState{from, to}] {
				if err != nil {
					t.Errorf("%s -> %s refused: %v", from, to, err)
				}
				continue
			}
			if !errors.Is(err, gate.ErrInvalidTransition) {
				t.Errorf("%s -> %s = %v, want ErrInvalidTransition", from, to, err)
			} else if want := fmt.Sprintf("gates: invalid state transition: %s -> %s", from, to); err.Error() != want {
				t.Errorf("error = %q, want %q", err, want)
			}
		}
	}
	if err := gate.ValidateTransition("pending", "in_progress"); !errors.Is(err, gate.ErrInvalidTransition) {
		t.Errorf("unknown target state = %v", err)
	}
	if err := gate.ValidateTransition("weird", "approved"); !errors.Is(err, gate.ErrInvalidTransition) {
		t.Errorf("unknown source state = %v", err)
	}
}

func TestMemoryApprovalStoreEnforcesTransitions(t *testing.T) {
	clock := &tkClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	s := gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{Now: clock.Now})
	ctx := t.Context()
	mk := func(id string) gate.ApprovalRequest {
		r, created, err := s.Create(ctx, gate.ApprovalRequest{ID: id, Intent: "payout.send", Requester: "alice", Roles: []string{"finance"}, Count: 1,
			State: gate.ApprovalPending, CreatedAt: clock.now, ExpiresAt: clock.now.Add(time.Hour)}, 0)
		if err != nil || !created {
			t.Fatalf("Create(%s) = %v, %v", id, created, err)
		}
		return r
	}
	set := func(state gate.ApprovalState) func(*gate.ApprovalRequest) error {
		return func(r *gate.ApprovalRequest) error { r.State = state; return nil }
	}

	// (A cancelled request that voids nothing is dropped at once: see
	// TestMemoryApprovalCancelledLeavesShare.)
	for _, final := range []gate.ApprovalState{gate.ApprovalApproved, gate.ApprovalDenied} {
		id := "r-" + string(final)
		mk(id)
		if _, err := s.Update(ctx, id, set(final)); err != nil {
			t.Fatalf("pending -> %s: %v", final, err)
		}
		for _, next := range []gate.ApprovalState{gate.ApprovalPending, gate.ApprovalApproved, gate.ApprovalDenied, gate.ApprovalCancelled} {
			_, err := s.Update(ctx, id, set(next))
			if !errors.Is(err, gate.ErrInvalidTransition) {
				t.Errorf("%s -> %s = %v, want ErrInvalidTransition", final, next, err)
			}
		}
		if got, _ := s.Get(ctx, id); got.State != final {
			t.Errorf("after refused updates the state is %s, want %s", got.State, final)
		}
	}

	// A new request must start pending.
	if _, _, err := s.Create(ctx, gate.ApprovalRequest{ID: "born-approved", State: gate.ApprovalApproved}, 0); !errors.Is(err, gate.ErrInvalidTransition) {
		t.Errorf("Create(approved) = %v, want ErrInvalidTransition", err)
	}
	// An update must not change the id.
	mk("keep-id")
	if _, err := s.Update(ctx, "keep-id", func(r *gate.ApprovalRequest) error { r.ID = "other"; return nil }); err == nil {
		t.Error("an update changed the request id")
	}

	// Expiry: a pending request past its time reads expired, refuses
	// decisions, and its id can be requested again.
	mk("late")
	clock.now = clock.now.Add(2 * time.Hour)
	if got, _ := s.Get(ctx, "late"); got.State != gate.ApprovalExpired {
		t.Fatalf("state after expiry = %s, want expired", got.State)
	}
	if _, err := s.Update(ctx, "late", set(gate.ApprovalApproved)); !errors.Is(err, gate.ErrInvalidTransition) {
		t.Errorf("approving an expired request = %v, want ErrInvalidTransition", err)
	}
	if list, _, _ := s.List(ctx, gate.ApprovalFilter{State: gate.ApprovalPending}, "", 0); len(list) != 0 {
		t.Errorf("expired requests listed as pending: %v", list)
	}
	again := mk("late")
	if again.State != gate.ApprovalPending {
		t.Errorf("re-created request is %s", again.State)
	}
}

func TestMemoryApprovalStoreBounded(t *testing.T) {
	clock := &tkClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	s := gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{MaxRequests: 2, Now: clock.Now})
	ctx := t.Context()
	create := func(id string) error {
		_, _, err := s.Create(ctx, gate.ApprovalRequest{ID: id, State: gate.ApprovalPending, CreatedAt: clock.now, ExpiresAt: clock.now.Add(time.Minute)}, 0)
		return err
	}
	for _, id := range []string{"a", "b"} {
		if err := create(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := create("c"); !errors.Is(err, gate.ErrApprovalStoreFull) {
		t.Fatalf("Create over the bound = %v, want ErrApprovalStoreFull", err)
	}
	if err := create("a"); err != nil {
		t.Fatalf("Create of an existing id on a full store: %v", err)
	}
	clock.now = clock.now.Add(time.Hour)
	if err := create("c"); err != nil {
		t.Fatalf("Create after requests lapsed: %v", err)
	}
}
