package gates_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/storetest"
)

func TestMemoryApprovalStoreContract(t *testing.T) {
	storetest.TestApprovalStore(t, func(*testing.T) gates.ApprovalStore {
		return gates.NewMemoryApprovalStore(gates.MemoryApprovalOptions{})
	})
}

// TestApprovalStateMachine checks every pair of states against the table:
// pending → approved | denied | expired | cancelled | executed, approved →
// executed, terminal states final.
func TestApprovalStateMachine(t *testing.T) {
	states := []gates.ApprovalState{gates.ApprovalPending, gates.ApprovalApproved, gates.ApprovalDenied, gates.ApprovalExpired, gates.ApprovalCancelled, gates.ApprovalExecuted}
	valid := map[[2]gates.ApprovalState]bool{
		{gates.ApprovalPending, gates.ApprovalApproved}:  true,
		{gates.ApprovalPending, gates.ApprovalDenied}:    true,
		{gates.ApprovalPending, gates.ApprovalExpired}:   true,
		{gates.ApprovalPending, gates.ApprovalCancelled}: true,
		{gates.ApprovalPending, gates.ApprovalExecuted}:  true,
		{gates.ApprovalApproved, gates.ApprovalExecuted}: true,
	}
	for _, from := range states {
		if got, want := from.Terminal(), from != gates.ApprovalPending; got != want {
			t.Errorf("%s.Terminal() = %v, want %v", from, got, want)
		}
		for _, to := range states {
			err := gates.ValidateTransition(from, to)
			if valid[[2]gates.ApprovalState{from, to}] {
				if err != nil {
					t.Errorf("%s -> %s refused: %v", from, to, err)
				}
				continue
			}
			if !errors.Is(err, gates.ErrInvalidTransition) {
				t.Errorf("%s -> %s = %v, want ErrInvalidTransition", from, to, err)
			} else if want := fmt.Sprintf("invalid state transition: %s -> %s", from, to); err.Error() != want {
				t.Errorf("error = %q, want %q", err, want)
			}
		}
	}
	if err := gates.ValidateTransition("pending", "in_progress"); !errors.Is(err, gates.ErrInvalidTransition) {
		t.Errorf("unknown target state = %v", err)
	}
	if err := gates.ValidateTransition("weird", "approved"); !errors.Is(err, gates.ErrInvalidTransition) {
		t.Errorf("unknown source state = %v", err)
	}
}

func TestMemoryApprovalStoreEnforcesTransitions(t *testing.T) {
	clock := &tkClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	s := gates.NewMemoryApprovalStore(gates.MemoryApprovalOptions{Now: clock.Now})
	ctx := t.Context()
	mk := func(id string) gates.ApprovalRequest {
		r, created, err := s.Create(ctx, gates.ApprovalRequest{ID: id, Intent: "payout.send", Requester: "alice", Roles: []string{"finance"}, Count: 1,
			State: gates.ApprovalPending, CreatedAt: clock.now, ExpiresAt: clock.now.Add(time.Hour)}, 0)
		if err != nil || !created {
			t.Fatalf("Create(%s) = %v, %v", id, created, err)
		}
		return r
	}
	set := func(state gates.ApprovalState) func(*gates.ApprovalRequest) error {
		return func(r *gates.ApprovalRequest) error { r.State = state; return nil }
	}

	// (A cancelled request that voids nothing is dropped at once: see
	// TestMemoryApprovalCancelledLeavesShare.)
	for _, final := range []gates.ApprovalState{gates.ApprovalApproved, gates.ApprovalDenied} {
		id := "r-" + string(final)
		mk(id)
		if _, err := s.Update(ctx, id, set(final)); err != nil {
			t.Fatalf("pending -> %s: %v", final, err)
		}
		for _, next := range []gates.ApprovalState{gates.ApprovalPending, gates.ApprovalApproved, gates.ApprovalDenied, gates.ApprovalCancelled} {
			_, err := s.Update(ctx, id, set(next))
			if !errors.Is(err, gates.ErrInvalidTransition) {
				t.Errorf("%s -> %s = %v, want ErrInvalidTransition", final, next, err)
			}
		}
		if got, _ := s.Get(ctx, id); got.State != final {
			t.Errorf("after refused updates the state is %s, want %s", got.State, final)
		}
	}

	// A new request must start pending.
	if _, _, err := s.Create(ctx, gates.ApprovalRequest{ID: "born-approved", State: gates.ApprovalApproved}, 0); !errors.Is(err, gates.ErrInvalidTransition) {
		t.Errorf("Create(approved) = %v, want ErrInvalidTransition", err)
	}
	// An update must not change the id.
	mk("keep-id")
	if _, err := s.Update(ctx, "keep-id", func(r *gates.ApprovalRequest) error { r.ID = "other"; return nil }); err == nil {
		t.Error("an update changed the request id")
	}

	// Expiry: a pending request past its time reads expired, refuses
	// decisions, and its id can be requested again.
	mk("late")
	clock.now = clock.now.Add(2 * time.Hour)
	if got, _ := s.Get(ctx, "late"); got.State != gates.ApprovalExpired {
		t.Fatalf("state after expiry = %s, want expired", got.State)
	}
	if _, err := s.Update(ctx, "late", set(gates.ApprovalApproved)); !errors.Is(err, gates.ErrInvalidTransition) {
		t.Errorf("approving an expired request = %v, want ErrInvalidTransition", err)
	}
	if list, _, _ := s.List(ctx, gates.ApprovalFilter{State: gates.ApprovalPending}, "", 0); len(list) != 0 {
		t.Errorf("expired requests listed as pending: %v", list)
	}
	again := mk("late")
	if again.State != gates.ApprovalPending {
		t.Errorf("re-created request is %s", again.State)
	}
}

func TestMemoryApprovalStoreBounded(t *testing.T) {
	clock := &tkClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	s := gates.NewMemoryApprovalStore(gates.MemoryApprovalOptions{MaxRequests: 2, Now: clock.Now})
	ctx := t.Context()
	create := func(id string) error {
		_, _, err := s.Create(ctx, gates.ApprovalRequest{ID: id, State: gates.ApprovalPending, CreatedAt: clock.now, ExpiresAt: clock.now.Add(time.Minute)}, 0)
		return err
	}
	for _, id := range []string{"a", "b"} {
		if err := create(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := create("c"); !errors.Is(err, gates.ErrApprovalStoreFull) {
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
