package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
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
		got, created, err := s.Create(ctx(t), r, 0)
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
		got, created, err := s.Create(ctx(t), other, 0)
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
		if _, _, err := s.Create(ctx(t), r, 0); !errors.Is(err, gates.ErrInvalidTransition) {
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
		list, _, err := s.List(ctx(t), gates.ApprovalFilter{Tenant: "acme", State: gates.ApprovalPending}, "", 0)
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
		got, created, err := s.Create(ctx(t), fresh, 0)
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
			list, _, err := s.List(ctx(t), tc.filter, "", 0)
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

	t.Run("QuotaBoundsPendingPerRequester", func(t *testing.T) {
		s := newStore(t)
		const quota = 3
		mk := func(id, requester, tenant string) gates.ApprovalRequest {
			r := request(id, tenant, 0, "manager")
			r.Requester = requester
			return r
		}
		for i := range quota {
			if _, created, err := s.Create(ctx(t), mk(fmt.Sprint("q", i), "user-1", "acme"), quota); err != nil || !created {
				t.Fatalf("Create %d under the quota = %v, %v", i, created, err)
			}
		}
		_, created, err := s.Create(ctx(t), mk("q-over", "user-1", "acme"), quota)
		var qe *gates.QuotaError
		if !errors.As(err, &qe) || !isQuota(err) || created {
			t.Fatalf("Create over the quota = %v, %v; want a *gates.QuotaError", created, err)
		}
		if qe.RetryAfter <= 0 || qe.RetryAfter > time.Hour {
			t.Errorf("RetryAfter = %v, want the time until the oldest pending request expires (<= 1h)", qe.RetryAfter)
		}
		if _, err := s.Get(ctx(t), "q-over"); !errors.Is(err, gates.ErrNotFound) {
			t.Errorf("the refused request was stored: Get = %v", err)
		}
		// The same call again finds its request, quota or not.
		if got, created, err := s.Create(ctx(t), mk("q0", "user-1", "acme"), quota); err != nil || created || got.ID != "q0" {
			t.Errorf("Create of a pending call over the quota = %q, %v, %v; want the existing request", got.ID, created, err)
		}
		// Another requester, and the same requester in another tenant, have
		// quotas of their own.
		if _, created, err := s.Create(ctx(t), mk("other-user", "user-2", "acme"), quota); err != nil || !created {
			t.Errorf("another requester = %v, %v", created, err)
		}
		if _, created, err := s.Create(ctx(t), mk("other-tenant", "user-1", "globex"), quota); err != nil || !created {
			t.Errorf("the requester in another tenant = %v, %v", created, err)
		}
		// A decided request leaves the count.
		if _, err := s.Update(ctx(t), "q1", decide("boss", false)); err != nil {
			t.Fatal(err)
		}
		if _, created, err := s.Create(ctx(t), mk("q-after", "user-1", "acme"), quota); err != nil || !created {
			t.Errorf("Create after a request was decided = %v, %v", created, err)
		}
	})

	t.Run("QuotaKeepsSelfDecidedConfirmations", func(t *testing.T) {
		// A confirmation request, decided by its requester alone, counts
		// in their quota while the store keeps it for its decision:
		// confirmed and not run (until it expires), denied (while the
		// denial stands). It leaves the count when its call runs.
		s := newStore(t)
		conf := func(id string) gates.ApprovalRequest {
			r := request(id, "acme", 0)
			r.Kind = "confirmation"
			return r
		}
		for _, approve := range []bool{true, false} {
			id := fmt.Sprint("conf-", approve)
			if _, created, err := s.Create(ctx(t), conf(id), 1); err != nil || !created {
				t.Fatalf("Create(%s) = %v, %v", id, created, err)
			}
			if _, err := s.Update(ctx(t), id, func(r *gates.ApprovalRequest) error {
				r.Decisions = append(r.Decisions, gates.ApprovalDecision{Approver: r.Requester, Approve: approve, At: base})
				if approve {
					r.State, r.ExpiresAt = gates.ApprovalApproved, time.Now().Add(time.Hour)
				} else {
					r.State, r.ExpiresAt, r.KeepUntil = gates.ApprovalDenied, time.Now(), time.Now().Add(time.Hour)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Create(ctx(t), conf(id+"-next"), 1); !isQuota(err) {
				t.Fatalf("Create after the requester decided %s = %v; want the quota", id, err)
			}
			if approve {
				if _, err := s.Update(ctx(t), id, func(r *gates.ApprovalRequest) error {
					r.State = gates.ApprovalExecuted
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if _, created, err := s.Create(ctx(t), conf(id+"-after-run"), 1); err != nil || !created {
					t.Fatalf("Create after the confirmed call ran = %v, %v", created, err)
				}
				if _, err := s.Update(ctx(t), id+"-after-run", func(r *gates.ApprovalRequest) error {
					r.State = gates.ApprovalCancelled
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
		}
	})

	t.Run("QuotaSkipsLapsedRequests", func(t *testing.T) {
		s := newStore(t)
		old := request("lapsed", "acme", 0, "manager")
		old.ExpiresAt = time.Now().Add(-time.Second)
		create(t, s, old)
		for _, id := range []string{"a", "b"} {
			if _, created, err := s.Create(ctx(t), request(id, "acme", 1, "manager"), 2); err != nil || !created {
				t.Fatalf("Create(%s) = %v, %v; a lapsed request must not count", id, created, err)
			}
		}
		if _, _, err := s.Create(ctx(t), request("c", "acme", 1, "manager"), 2); !isQuota(err) {
			t.Fatalf("Create over the quota = %v", err)
		}
	})

	t.Run("QuotaIsAtomic", func(t *testing.T) {
		s := newStore(t)
		const quota = 5
		// 8 rounds of Concurrency goroutines, each round one requester:
		// exactly quota requests each, never more.
		for round := range 8 {
			requester := fmt.Sprint("racer-", round)
			errs := race(Concurrency, func(i int) error {
				r := request(fmt.Sprintf("race-%d-%d", round, i), "acme", 0, "manager")
				r.Requester = requester
				_, created, err := s.Create(ctx(t), r, quota)
				if err == nil && !created {
					return errors.New("not created")
				}
				return err
			})
			ok, refused, other := count(errs, errQuota)
			if other != nil {
				t.Fatal(other)
			}
			if ok != quota || refused != Concurrency-quota {
				t.Fatalf("round %d: %d created, %d refused; want exactly %d created", round, ok, refused, quota)
			}
		}
	})

	t.Run("DenialVetoesTheCall", func(t *testing.T) {
		s := newStore(t)
		now := time.Now()
		r := request("r1", "acme", 0, "manager")
		r.ExpiresAt = now.Add(time.Second)
		create(t, s, r)
		if _, err := s.Update(ctx(t), "r1", func(r *gates.ApprovalRequest) error {
			r.State, r.VoidBefore, r.KeepUntil = gates.ApprovalDenied, now, now.Add(time.Hour)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// Past the request's expiry, within the veto: not replaced.
		again := request("r1", "acme", 2, "manager")
		again.CreatedAt, again.ExpiresAt = now.Add(-time.Minute), now.Add(-time.Second)
		got, created, err := s.Create(ctx(t), again, 0)
		if err != nil || created || got.State != gates.ApprovalDenied {
			t.Fatalf("Create during the veto = %s, %v, %v; want the denied request", got.State, created, err)
		}
		if !got.VoidBefore.Equal(now) && got.VoidBefore.Unix() != now.Unix() {
			t.Errorf("VoidBefore = %v, want %v", got.VoidBefore, now)
		}
	})

	t.Run("ReplacedRequestKeepsItsVoid", func(t *testing.T) {
		s := newStore(t)
		now := time.Now().UTC().Truncate(time.Second)
		for _, final := range []gates.ApprovalState{gates.ApprovalExecuted, gates.ApprovalCancelled, gates.ApprovalDenied} {
			id := "void-" + string(final)
			create(t, s, request(id, "acme", 0, "manager"))
			if _, err := s.Update(ctx(t), id, func(r *gates.ApprovalRequest) error {
				r.State, r.VoidBefore = final, now
				if final == gates.ApprovalDenied {
					r.KeepUntil = now.Add(-time.Second) // the veto is over
				}
				return nil
			}); err != nil {
				t.Fatalf("%s: %v", final, err)
			}
			if final == gates.ApprovalDenied {
				// A denied request is replaced only once lapsed and past
				// its veto.
				continue
			}
			got, created, err := s.Create(ctx(t), request(id, "acme", 5, "manager"), 0)
			if err != nil || !created {
				t.Fatalf("Create over a %s request = %v, %v; want it replaced", final, created, err)
			}
			if !got.VoidBefore.Equal(now) || !get(t, s, id).VoidBefore.Equal(now) || got.State != gates.ApprovalPending {
				t.Errorf("the request replacing a %s one has void %v, state %s; want %v, pending", final, got.VoidBefore, got.State, now)
			}
		}
	})

	t.Run("MintedTokensAreKeptAndCarriedOver", func(t *testing.T) {
		// The jtis of the tokens minted for a request are kept with it, carried
		// over to the request that replaces a cancelled one (so that the next
		// run voids them), and moved to the voided ones by the run, which the
		// replacing request keeps: a run voids exactly the tokens minted
		// before it, whatever the clocks.
		s := newStore(t)
		ids := func(ts []gates.MintedToken) string {
			out := ""
			for _, tk := range ts {
				out += tk.ID + ";"
			}
			return out
		}
		create(t, s, request("m1", "acme", 0, "manager"))
		if _, err := s.Update(ctx(t), "m1", func(r *gates.ApprovalRequest) error {
			r.Minted = append(r.Minted, gates.MintedToken{ID: "jti-a", Until: base.Add(2 * time.Hour)},
				gates.MintedToken{ID: "jti-old", Until: base.Add(time.Second)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, s, "m1"); ids(got.Minted) != "jti-a;jti-old;" || !got.Minted[0].Until.Equal(base.Add(2*time.Hour)) {
			t.Fatalf("Minted = %+v, want jti-a and jti-old", got.Minted)
		}
		if _, err := s.Update(ctx(t), "m1", func(r *gates.ApprovalRequest) error { r.State = gates.ApprovalCancelled; return nil }); err != nil {
			t.Fatal(err)
		}
		// Replaced at base+5s: jti-old has expired, jti-a is carried over.
		got, created, err := s.Create(ctx(t), request("m1", "acme", 5, "manager"), 0)
		if err != nil || !created || ids(got.Minted) != "jti-a;" || ids(get(t, s, "m1").Minted) != "jti-a;" {
			t.Fatalf("Create over a cancelled request = %+v, %v, %v; want jti-a carried over", got.Minted, created, err)
		}
		if gate.TokenVoid(&got, "jti-a", base.Add(time.Minute), 0) {
			t.Error("a minted token is void before any run")
		}
		if _, err := s.Update(ctx(t), "m1", func(r *gates.ApprovalRequest) error {
			r.Minted = append(r.Minted, gates.MintedToken{ID: "jti-b", Until: base.Add(2 * time.Hour)})
			r.State, r.VoidBefore = gates.ApprovalExecuted, base.Add(10*time.Second)
			gate.VoidMinted(r, base.Add(10*time.Second))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, s, "m1"); len(got.Minted) != 0 || ids(got.Voided) != "jti-a;jti-b;" {
			t.Fatalf("after the run: minted %+v, voided %+v; want jti-a and jti-b voided", got.Minted, got.Voided)
		}
		got, created, err = s.Create(ctx(t), request("m1", "acme", 20, "manager"), 0)
		if err != nil || !created || ids(got.Voided) != "jti-a;jti-b;" || len(got.Minted) != 0 {
			t.Fatalf("Create over an executed request = %+v, %+v, %v, %v; want jti-a and jti-b still voided", got.Minted, got.Voided, created, err)
		}
		// Voided by jti even with an iat after the run (a clock ahead).
		if !gate.TokenVoid(&got, "jti-b", base.Add(time.Minute), 0) {
			t.Error("a token minted before the run counts after it")
		}
	})

	t.Run("ExecutedIsTerminal", func(t *testing.T) {
		s := newStore(t)
		create(t, s, request("r1", "acme", 0, "manager"))
		if _, err := s.Update(ctx(t), "r1", decide("boss", true)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx(t), "r1", func(r *gates.ApprovalRequest) error { r.State = gates.ApprovalExecuted; return nil }); err != nil {
			t.Fatalf("approved -> executed: %v", err)
		}
		for _, to := range []gates.ApprovalState{gates.ApprovalApproved, gates.ApprovalPending, gates.ApprovalDenied, gates.ApprovalExecuted} {
			if _, err := s.Update(ctx(t), "r1", func(r *gates.ApprovalRequest) error { r.State = to; return nil }); !errors.Is(err, gates.ErrInvalidTransition) {
				t.Errorf("executed -> %s = %v, want ErrInvalidTransition", to, err)
			}
		}
	})

	confirmation := func(id, requester string, created int) gates.ApprovalRequest {
		r := request(id, "acme", created)
		r.Kind, r.Requester = "confirmation", requester
		return r
	}

	t.Run("ConfirmationRequestKeepsItsKind", func(t *testing.T) {
		s := newStore(t)
		r := confirmation("c1", "user-1", 0)
		sameRequest(t, "Create", create(t, s, r), r)
		sameRequest(t, "Get", get(t, s, "c1"), r)
		list, _, err := s.List(ctx(t), gates.ApprovalFilter{Tenant: "acme"}, "", 0)
		if err != nil || len(list) != 1 {
			t.Fatalf("List = %v, %v", list, err)
		}
		sameRequest(t, "List", list[0], r)
	})

	t.Run("ListDeciderFilter", func(t *testing.T) {
		s := newStore(t)
		mine := request("appr-mine", "acme", 0, "manager")
		mine.Requester = "boss"
		create(t, s, mine)
		create(t, s, request("appr-manager", "acme", 1, "manager"))
		create(t, s, request("appr-finance", "acme", 2, "finance"))
		create(t, s, confirmation("conf-boss", "boss", 3))
		create(t, s, confirmation("conf-other", "user-1", 4))
		other := confirmation("conf-globex", "boss", 5)
		other.Tenant = "globex"
		create(t, s, other)
		for _, tc := range []struct {
			filter gates.ApprovalFilter
			want   []string
		}{
			// The approvals boss may decide (not their own), and boss's own
			// confirmations.
			{gates.ApprovalFilter{Tenant: "acme", Roles: []string{"manager"}, Decider: "boss"}, []string{"appr-manager", "conf-boss"}},
			// Without roles, only one's own confirmations.
			{gates.ApprovalFilter{Tenant: "acme", Decider: "boss"}, []string{"conf-boss"}},
			// Never one's own approval requests (user-1 asked for the
			// approvals besides appr-mine).
			{gates.ApprovalFilter{Tenant: "acme", Decider: "user-1", Roles: []string{"finance", "manager"}}, []string{"appr-mine", "conf-other"}},
			// Roles alone never select confirmation requests.
			{gates.ApprovalFilter{Tenant: "acme", Roles: []string{"manager"}}, []string{"appr-mine", "appr-manager"}},
		} {
			list, _, err := s.List(ctx(t), tc.filter, "", 0)
			if err != nil {
				t.Fatalf("List(%+v): %v", tc.filter, err)
			}
			var ids []string
			for _, r := range list {
				ids = append(ids, r.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("List(%+v) = %q, want %q", tc.filter, ids, tc.want)
			}
		}
	})

	t.Run("ConfirmationsCountInTheQuota", func(t *testing.T) {
		s := newStore(t)
		const quota = 2
		if _, _, err := s.Create(ctx(t), confirmation("c1", "user-1", 0), quota); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Create(ctx(t), request("a1", "acme", 1, "manager"), quota); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Create(ctx(t), confirmation("c2", "user-1", 2), quota); !isQuota(err) {
			t.Fatalf("a third request of either kind over a quota of 2 = %v, want a *gates.QuotaError", err)
		}
	})

	t.Run("ExecutedOnce", func(t *testing.T) {
		// The commit of a call that runs on a held decision moves its
		// request from approved to executed with Update: of concurrent
		// commits exactly one may.
		s := newStore(t)
		create(t, s, confirmation("c1", "user-1", 0))
		if _, err := s.Update(ctx(t), "c1", decide("user-1", true)); err != nil {
			t.Fatal(err)
		}
		errTaken := errors.New("already executed")
		errs := race(Concurrency, func(int) error {
			_, err := s.Update(ctx(t), "c1", func(r *gates.ApprovalRequest) error {
				if r.State != gates.ApprovalApproved {
					return errTaken
				}
				r.State = gates.ApprovalExecuted
				return nil
			})
			if errors.Is(err, gates.ErrInvalidTransition) {
				return errTaken // the request was already executed when read
			}
			return err
		})
		ok, taken, other := count(errs, errTaken)
		if other != nil {
			t.Fatal(other)
		}
		if ok != 1 || taken != Concurrency-1 {
			t.Fatalf("%d concurrent moves to executed: %d succeeded; want exactly 1", Concurrency, ok)
		}
		if got := get(t, s, "c1"); got.State != gates.ApprovalExecuted {
			t.Fatalf("state %s, want executed", got.State)
		}
		// The same call asked again opens a new request.
		again := confirmation("c1", "user-1", 1)
		if _, created, err := s.Create(ctx(t), again, 0); err != nil || !created {
			t.Fatalf("Create after executed = %v, %v; want a new request", created, err)
		}
	})

	t.Run("DeniedConfirmationLapses", func(t *testing.T) {
		// A denied confirmation request expires at the denial and keeps
		// its call refused until KeepUntil; then it is replaced.
		s := newStore(t)
		r := confirmation("c1", "user-1", 0)
		r.CreatedAt = time.Now().Add(-time.Minute)
		create(t, s, r)
		_, err := s.Update(ctx(t), "c1", func(r *gates.ApprovalRequest) error {
			now := time.Now()
			r.State, r.ExpiresAt, r.KeepUntil = gates.ApprovalDenied, now, now.Add(time.Hour)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		again := confirmation("c1", "user-1", 1)
		again.CreatedAt = time.Now()
		got, created, err := s.Create(ctx(t), again, 0)
		if err != nil || created || got.State != gates.ApprovalDenied {
			t.Fatalf("Create during the denial = %s, %v, %v; want the denial", got.State, created, err)
		}
	})

	t.Run("ListPages", func(t *testing.T) {
		s := newStore(t)
		var want []string
		for i := range 7 {
			id := fmt.Sprint("page-", i)
			create(t, s, request(id, "acme", i, "manager"))
			want = append(want, id)
		}
		create(t, s, request("other", "globex", 0, "manager"))
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("List never ends")
			}
			list, next, err := s.List(ctx(t), gates.ApprovalFilter{Tenant: "acme", State: gates.ApprovalPending}, cursor, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) > 3 {
				t.Fatalf("a page of limit 3 holds %d", len(list))
			}
			for _, r := range list {
				got = append(got, r.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("pages = %q, want %q", got, want)
		}
		if _, _, err := s.List(ctx(t), gates.ApprovalFilter{Tenant: "acme"}, "not-a-cursor", 3); !errors.Is(err, gates.ErrBadCursor) {
			t.Errorf("List with a forged cursor = %v, want ErrBadCursor", err)
		}
		// Over the largest page: clamped.
		for i := range gate.MaxApprovalPage + 5 {
			create(t, s, request(fmt.Sprint("many-", i), "initech", i, "manager"))
		}
		list, next, err := s.List(ctx(t), gates.ApprovalFilter{Tenant: "initech"}, "", 1000)
		if err != nil || len(list) > gate.MaxApprovalPage || next == "" {
			t.Errorf("List(limit 1000) = %d, next %q, %v; want at most %d and a next page", len(list), next, err, gate.MaxApprovalPage)
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
