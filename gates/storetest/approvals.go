package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/axgate/axgate/gates"
)

// TestApprovalStore checks a gates.ApprovalStore. newStore returns a new,
// empty store for each subtest.
func TestApprovalStore(t *testing.T, newStore func(t *testing.T) gates.ApprovalStore) {
	base := time.Now().UTC().Truncate(time.Second)
	request := func(id, tenant string, created int, roles ...string) gates.ApprovalRequest {
		return gates.ApprovalRequest{
			ID:         id,
			Tool:       "refund_payment",
			Intent:     "payments.refund",
			Requester:  "user-1",
			Tenant:     tenant,
			ArgsSHA256: "digest-" + id,
			Arguments:  json.RawMessage(`{"amount":500,"order_id":"o-1"}`),
			Roles:      roles,
			Count:      1,
			State:      gates.ApprovalPending,
			CreatedAt:  base.Add(time.Duration(created) * time.Second),
			ExpiresAt:  base.Add(time.Hour),
		}
	}
	create := func(t *testing.T, s gates.ApprovalStore, r gates.ApprovalRequest) gates.ApprovalRequest {
		t.Helper()
		got, created, err := s.Create(ctx(t), r)
		if err != nil {
			t.Fatalf("Create(%s): %v", r.ID, err)
		}
		if !created {
			t.Fatalf("Create(%s): not created", r.ID)
		}
		return got
	}
	get := func(t *testing.T, s gates.ApprovalStore, id string) gates.ApprovalRequest {
		t.Helper()
		got, err := s.Get(ctx(t), id)
		if err != nil {
			t.Fatalf("Get(%s): %v", id, err)
		}
		return got
	}
	decide := func(approver string, approve bool) func(*gates.ApprovalRequest) error {
		return func(r *gates.ApprovalRequest) error {
			r.Decisions = append(r.Decisions, gates.ApprovalDecision{Approver: approver, Roles: []string{"manager"}, Approve: approve, At: base})
			if approve {
				r.State = gates.ApprovalApproved
			} else {
				r.State = gates.ApprovalDenied
			}
			return nil
		}
	}

	t.Run("CreateThenGet", func(t *testing.T) {
		s := newStore(t)
		r := request("r1", "acme", 0, "manager")
		sameRequest(t, "Create", create(t, s, r), r)
		sameRequest(t, "Get", get(t, s, "r1"), r)
	})

	t.Run("CreateKeepsTheFirst", func(t *testing.T) {
		s := newStore(t)
		r := request("r1", "acme", 0, "manager")
		create(t, s, r)
		other := r
		other.Tool, other.Requester = "other_tool", "user-2"
		got, created, err := s.Create(ctx(t), other)
		if err != nil {
			t.Fatalf("second Create: %v", err)
		}
		if created {
			t.Fatal("second Create with the same id reported created")
		}
		sameRequest(t, "second Create", got, r)
		sameRequest(t, "Get", get(t, s, "r1"), r)
	})

	t.Run("UnknownIDNotFound", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Get(ctx(t), "nope"); !errors.Is(err, gates.ErrNotFound) {
			t.Errorf("Get(unknown) = %v, want gates.ErrNotFound", err)
		}
		_, err := s.Update(ctx(t), "nope", func(*gates.ApprovalRequest) error { return nil })
		if !errors.Is(err, gates.ErrNotFound) {
			t.Errorf("Update(unknown) = %v, want gates.ErrNotFound", err)
		}
	})

	t.Run("UpdateStores", func(t *testing.T) {
		s := newStore(t)
		r := request("r1", "acme", 0, "manager")
		create(t, s, r)
		got, err := s.Update(ctx(t), "r1", decide("boss", true))
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		want := r
		_ = decide("boss", true)(&want)
		sameRequest(t, "Update", got, want)
		sameRequest(t, "Get after Update", get(t, s, "r1"), want)
	})

	t.Run("UpdateErrorChangesNothing", func(t *testing.T) {
		s := newStore(t)
		r := request("r1", "acme", 0, "manager")
		create(t, s, r)
		errAlreadyDecided := errors.New("already decided")
		_, err := s.Update(ctx(t), "r1", func(req *gates.ApprovalRequest) error {
			req.State = gates.ApprovalApproved
			return errAlreadyDecided
		})
		if !errors.Is(err, errAlreadyDecided) {
			t.Fatalf("Update = %v, want the error of fn", err)
		}
		sameRequest(t, "Get after a failed Update", get(t, s, "r1"), r)
	})

	t.Run("ConcurrentUpdatesAllApply", func(t *testing.T) {
		s := newStore(t)
		create(t, s, request("r1", "acme", 0, "manager"))
		n := min(Concurrency, 20)
		errs := race(n, func(i int) error {
			_, err := s.Update(ctx(t), "r1", func(r *gates.ApprovalRequest) error {
				r.Decisions = append(r.Decisions, gates.ApprovalDecision{Approver: fmt.Sprint("approver-", i), Approve: true, At: base})
				return nil
			})
			return err
		})
		if _, _, other := count(errs, nil); other != nil {
			t.Fatal(other)
		}
		got := get(t, s, "r1")
		seen := map[string]bool{}
		for _, d := range got.Decisions {
			seen[d.Approver] = true
		}
		if len(got.Decisions) != n || len(seen) != n {
			t.Fatalf("%d concurrent Updates each adding a decision: %d decisions from %d approvers stored, want %d: an update was lost", n, len(got.Decisions), len(seen), n)
		}
	})

	t.Run("NewRequestMustBePending", func(t *testing.T) {
		s := newStore(t)
		r := request("r1", "acme", 0, "manager")
		r.State = gates.ApprovalApproved
		if _, _, err := s.Create(ctx(t), r); !errors.Is(err, gates.ErrInvalidTransition) {
			t.Fatalf("Create of an approved request = %v, want gates.ErrInvalidTransition", err)
		}
		r.State = ""
		got := create(t, s, r)
		if got.State != gates.ApprovalPending {
			t.Fatalf("Create with no state stored %q, want pending", got.State)
		}
	})

	t.Run("DecidedRequestStaysDecided", func(t *testing.T) {
		s := newStore(t)
		create(t, s, request("r1", "acme", 0, "manager"))
		if _, err := s.Update(ctx(t), "r1", decide("boss", true)); err != nil {
			t.Fatalf("Update: %v", err)
		}
		approved := get(t, s, "r1")
		for name, fn := range map[string]func(*gates.ApprovalRequest) error{
			"approved to denied":  func(r *gates.ApprovalRequest) error { r.State = gates.ApprovalDenied; return nil },
			"approved to pending": func(r *gates.ApprovalRequest) error { r.State = gates.ApprovalPending; return nil },
			"approved to cancelled": func(r *gates.ApprovalRequest) error {
				r.State = gates.ApprovalCancelled
				return nil
			},
			"another decision on an approved request": decide("other", true),
		} {
			if _, err := s.Update(ctx(t), "r1", fn); !errors.Is(err, gates.ErrInvalidTransition) {
				t.Errorf("Update %s = %v, want gates.ErrInvalidTransition", name, err)
			}
		}
		sameRequest(t, "Get after refused updates", get(t, s, "r1"), approved)
	})

	t.Run("PastExpiryReadsExpired", func(t *testing.T) {
		s := newStore(t)
		r := request("r1", "acme", 0, "manager")
		r.ExpiresAt = time.Now().Add(-time.Second)
		create(t, s, r)
		if got := get(t, s, "r1"); got.State != gates.ApprovalExpired {
			t.Fatalf("Get of a pending request past its expiry: state %q, want expired", got.State)
		}
		if _, err := s.Update(ctx(t), "r1", decide("boss", true)); !errors.Is(err, gates.ErrInvalidTransition) {
			t.Fatalf("approving an expired request = %v, want gates.ErrInvalidTransition", err)
		}
		list, err := s.List(ctx(t), gates.ApprovalFilter{Tenant: "acme", State: gates.ApprovalPending})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 0 {
			t.Fatalf("List(pending) shows %d expired requests", len(list))
		}
	})

	t.Run("CreateReplacesLapsedRequest", func(t *testing.T) {
		s := newStore(t)
		old := request("r1", "acme", 0, "manager")
		old.ExpiresAt = time.Now().Add(-time.Second)
		create(t, s, old)
		fresh := request("r1", "acme", 5, "manager")
		fresh.Requester = "user-2"
		got, created, err := s.Create(ctx(t), fresh)
		if err != nil {
			t.Fatalf("Create over a lapsed request: %v", err)
		}
		if !created {
			t.Fatal("Create over a lapsed request did not replace it")
		}
		sameRequest(t, "Create over a lapsed request", got, fresh)
		sameRequest(t, "Get", get(t, s, "r1"), fresh)
	})

	t.Run("ReturnsCopies", func(t *testing.T) {
		s := newStore(t)
		r := request("r1", "acme", 0, "manager", "finance")
		create(t, s, r)
		got := get(t, s, "r1")
		got.Roles[0] = "intruder"
		got.Arguments[1] = 'X'
		sameRequest(t, "Get after changing a returned copy", get(t, s, "r1"), request("r1", "acme", 0, "manager", "finance"))
	})

	t.Run("ListFilters", func(t *testing.T) {
		s := newStore(t)
		// Created out of order, to check that List sorts by creation time.
		create(t, s, request("acme-finance", "acme", 1, "finance"))
		create(t, s, request("acme-manager", "acme", 0, "manager"))
		create(t, s, request("globex-manager", "globex", 2, "manager"))
		create(t, s, request("acme-decided", "acme", 3, "manager", "finance"))
		create(t, s, request("solo-manager", "", 4, "manager"))
		if _, err := s.Update(ctx(t), "acme-decided", decide("boss", false)); err != nil {
			t.Fatalf("Update: %v", err)
		}
		for _, tc := range []struct {
			filter gates.ApprovalFilter
			want   []string
		}{
			// No tenant: only requests without one, unless AnyTenant.
			{gates.ApprovalFilter{}, []string{"solo-manager"}},
			{gates.ApprovalFilter{Roles: []string{"manager"}, State: gates.ApprovalPending}, []string{"solo-manager"}},
			{gates.ApprovalFilter{State: gates.ApprovalDenied}, nil},
			{gates.ApprovalFilter{AnyTenant: true}, []string{"acme-manager", "acme-finance", "globex-manager", "acme-decided", "solo-manager"}},
			{gates.ApprovalFilter{AnyTenant: true, State: gates.ApprovalDenied}, []string{"acme-decided"}},
			{gates.ApprovalFilter{AnyTenant: true, Roles: []string{"manager"}, State: gates.ApprovalPending}, []string{"acme-manager", "globex-manager", "solo-manager"}},
			{gates.ApprovalFilter{AnyTenant: true, Roles: []string{"auditor"}}, nil},
			{gates.ApprovalFilter{Tenant: "acme"}, []string{"acme-manager", "acme-finance", "acme-decided"}},
			// AnyTenant does not widen a tenant that is set.
			{gates.ApprovalFilter{Tenant: "acme", AnyTenant: true}, []string{"acme-manager", "acme-finance", "acme-decided"}},
			{gates.ApprovalFilter{Tenant: "acme", Roles: []string{"manager"}}, []string{"acme-manager", "acme-decided"}},
			{gates.ApprovalFilter{Tenant: "acme", Roles: []string{"auditor", "finance"}}, []string{"acme-finance", "acme-decided"}},
			{gates.ApprovalFilter{Tenant: "acme", Roles: []string{"manager"}, State: gates.ApprovalPending}, []string{"acme-manager"}},
			{gates.ApprovalFilter{Tenant: "initech"}, nil},
		} {
			list, err := s.List(ctx(t), tc.filter)
			if err != nil {
				t.Fatalf("List(%+v): %v", tc.filter, err)
			}
			var ids []string
			for _, r := range list {
				ids = append(ids, r.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("List(%+v) = %q, want %q (oldest first)", tc.filter, ids, tc.want)
			}
		}
	})
}

// sameRequest compares requests as their JSON, which is what a user of the
// store sees (times compare by instant, not by their in-memory form).
func sameRequest(t *testing.T, what string, got, want gates.ApprovalRequest) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(g) != string(w) {
		t.Fatalf("%s returned\n  %s\nwant\n  %s", what, g, w)
	}
}
