package gate_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// ruleFixture is an approval gate, its memory stores and a token verifier
// on one clock the test moves, with a chain that commits and counts the
// calls that ran.
type ruleFixture struct {
	*tkFixture
	clock  *tkClock
	store  *gate.MemoryApprovalStore
	issuer token.Issuer
	gate   *gate.Approval
	chain  middleware.Invoker
	ran    atomic.Int32
	notes  []gate.ApprovalRequest
}

func newRuleFixture(t *testing.T, edit func(*gate.ApprovalConfig)) *ruleFixture {
	t.Helper()
	f := &ruleFixture{tkFixture: newTkFixture(t), clock: &tkClock{now: time.Now().UTC().Truncate(time.Second)}}
	f.replay = token.NewMemoryReplayStore(token.MemoryReplayOptions{Now: f.clock.Now})
	f.store = gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{Now: f.clock.Now})
	v, err := token.NewVerifier(token.VerifierConfig{Type: token.TypApproval, Keys: f.keys, MaxLifetime: token.DefaultApprovalLifetime, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.issuer = token.Issuer{Signer: f.signer, Now: f.clock.Now}
	cfg := gate.ApprovalConfig{
		Verifier: v, Replay: f.replay, Store: f.store, Issuer: f.issuer, Now: f.clock.Now,
		RequestTTL: time.Hour,
		Notifier: gate.NotifierFunc(func(_ context.Context, r gate.ApprovalRequest) error {
			f.notes = append(f.notes, r)
			return nil
		}),
	}
	if edit != nil {
		edit(&cfg)
	}
	if f.gate, err = gate.NewApproval(cfg); err != nil {
		t.Fatal(err)
	}
	f.chain = middleware.Build(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		f.ran.Add(1)
		return middleware.Result{}, nil
	}), nil, f.gate.Stage(), tkCommit)
	return f
}

// do runs alice's call of intent with args and approval tokens.
func (f *ruleFixture) do(t *testing.T, intent, args string, tokens ...string) error {
	t.Helper()
	c := f.call(intent, args)
	c.Credentials.Approvals = tokens
	_, err := f.chain.Invoke(t.Context(), c)
	return err
}

// mint signs an approval token for alice's call as approver, now, as any
// JWT library could (without Decide).
func (f *ruleFixture) mint(t *testing.T, approver, intent, args string) string {
	t.Helper()
	d, err := f.call(intent, args).ArgsSHA256()
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := f.issuer.Approval(approver, []string{"finance"}, token.Grant{Intent: intent, Tenant: "acme", ArgsSHA256: d, Requester: "alice"}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func finance(id string) middleware.Principal {
	return middleware.Principal{ID: id, Tenant: "acme", Roles: []string{"finance"}}
}

// TestApprovalDenialVetoesTheCall is the regression of the stretched
// denial: bob approves, carol denies, the denied request lapses; then the
// same call opened no new request, and bob's token (issued before the
// denial) together with a later approver's let the call run. Now the call is
// vetoed for the tokens' lifetime and bob's token never counts for it.
func TestApprovalDenialVetoesTheCall(t *testing.T) {
	f := newRuleFixture(t, nil)
	ctx := t.Context()
	const args = `{"amount":700}`
	id := tkRefusal(t, f.do(t, "payout.send", args), axerr.CodeApprovalMissing, 428)["approval_request_id"].(string)
	_, bobTok, _, err := f.gate.Decide(ctx, finance("bob"), id, true, "")
	if err != nil {
		t.Fatal(err)
	}
	f.clock.now = f.clock.now.Add(time.Second)
	if _, _, _, err := f.gate.Decide(ctx, finance("carol"), id, false, "no"); err != nil {
		t.Fatal(err)
	}
	// The request lapses; bob's token (24h) does not.
	f.clock.now = f.clock.now.Add(2 * time.Hour)
	notes := len(f.notes)
	d := tkRefusal(t, f.do(t, "payout.send", args), axerr.CodeApprovalInvalid, 403)
	if d["reason"] != string(reasons.ApprovalDenied) || len(f.notes) != notes {
		t.Fatalf("the same call after the denied request lapsed: %v, %d notifications; want approval_denied and none", d, len(f.notes)-notes)
	}
	if r, _ := f.store.Get(ctx, id); r.State != gate.ApprovalDenied {
		t.Fatalf("a new request replaced the denied one: %s", r.State)
	}
	// A later approver's token with bob's: bob's was issued before the
	// denial and never counts.
	daveTok := f.mint(t, "dave", "payout.send", args)
	err = f.do(t, "payout.send", args, bobTok, daveTok)
	if _, ok := axerr.As(err); !ok || f.ran.Load() != 0 {
		t.Fatalf("bob's pre-denial token with dave's: %v, ran %d times", err, f.ran.Load())
	}
	if d := tkRefusal(t, err, axerr.CodeApprovalInvalid, 403); d["reason"] != string(reasons.ApprovalDenied) {
		t.Fatalf("refusal: %v", d)
	}
	// Past the veto the call may be asked again, as a new request.
	f.clock.now = f.clock.now.Add(25 * time.Hour)
	if d := tkRefusal(t, f.do(t, "payout.send", args), axerr.CodeApprovalMissing, 428); d["request_state"] != "pending" {
		t.Fatalf("after the veto: %v", d)
	}
}

// TestApprovalExecutedVoidsRemainingTokens: the call that runs on a
// request's approvals moves it to executed at the commit, and a token
// issued before that run no longer counts (today it ran the call again).
func TestApprovalExecutedVoidsRemainingTokens(t *testing.T) {
	f := newRuleFixture(t, nil)
	ctx := t.Context()
	const args = `{"vault":"v1"}`
	id := tkRefusal(t, f.do(t, "vault.open", args), axerr.CodeApprovalMissing, 428)["approval_request_id"].(string)
	admin := middleware.Principal{ID: "bob", Tenant: "acme", Roles: []string{"admin"}}
	_, tok, _, err := f.gate.Decide(ctx, admin, id, true, "")
	if err != nil {
		t.Fatal(err)
	}
	spare, _, err := f.issuer.Approval("carol", []string{"admin"}, grantOf(mustGet(t, f.store, id)), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.now = f.clock.now.Add(time.Second)
	if err := f.do(t, "vault.open", args, tok); err != nil || f.ran.Load() != 1 {
		t.Fatalf("the approved call: %v, ran %d", err, f.ran.Load())
	}
	if r := mustGet(t, f.store, id); r.State != gate.ApprovalExecuted {
		t.Fatalf("state after the run = %s, want executed", r.State)
	}
	f.clock.now = f.clock.now.Add(time.Second)
	err = f.do(t, "vault.open", args, spare)
	d := tkRefusal(t, err, axerr.CodeApprovalMissing, 428)
	if f.ran.Load() != 1 || fmt.Sprint(d["rejected_tokens"]) != "[{0 void }]" {
		t.Fatalf("a token from before the run: ran %d, %v", f.ran.Load(), d)
	}
	// Deciding an executed request is over.
	_, _, _, err = f.gate.Decide(ctx, middleware.Principal{ID: "dave", Tenant: "acme", Roles: []string{"admin"}}, id, true, "")
	if d := tkRefusal(t, err, axerr.CodeApprovalInvalid, 403); d["reason"] != "invalid_transition" {
		t.Fatalf("deciding an executed request: %v", d)
	}
}

func mustGet(t *testing.T, s gate.ApprovalStore, id string) gate.ApprovalRequest {
	t.Helper()
	r, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestApprovalQuotaRefusesOverN: a requester holds at most Quota pending
// requests; one more is 429 approval_quota with retry_after, and records and
// notifies nothing; the same call again finds its request.
func TestApprovalQuotaRefusesOverN(t *testing.T) {
	f := newRuleFixture(t, func(c *gate.ApprovalConfig) { c.Quota = 3 })
	var first string
	for i := range 3 {
		d := tkRefusal(t, f.do(t, "vault.open", fmt.Sprintf(`{"vault":"v%d"}`, i)), axerr.CodeApprovalMissing, 428)
		if i == 0 {
			first = d["approval_request_id"].(string)
		}
	}
	err := f.do(t, "vault.open", `{"vault":"over"}`)
	d := tkRefusal(t, err, axerr.CodeRateLimited, 429)
	e, _ := axerr.As(err)
	if d["reason"] != string(reasons.ApprovalQuota) || e.RetryAfter <= 0 || e.RetryAfter > time.Hour {
		t.Fatalf("over the quota: %v, retry after %v", d, e.RetryAfter)
	}
	if len(f.notes) != 3 {
		t.Fatalf("%d notifications, want 3", len(f.notes))
	}
	list, _, _ := f.store.List(t.Context(), gate.ApprovalFilter{Tenant: "acme"}, "", 0)
	if len(list) != 3 {
		t.Fatalf("%d requests stored, want 3", len(list))
	}
	d = tkRefusal(t, f.do(t, "vault.open", `{"vault":"v0"}`), axerr.CodeApprovalMissing, 428)
	if d["approval_request_id"] != first || d["approvers_notified"] != nil || len(f.notes) != 3 {
		t.Fatalf("the same call again: %v", d)
	}
}

// TestApprovalNotificationsCapped: at most NotificationsPerMinute per
// tenant; the held back ones are counted on the next notification.
func TestApprovalNotificationsCapped(t *testing.T) {
	f := newRuleFixture(t, func(c *gate.ApprovalConfig) { c.NotificationsPerMinute = 2 })
	for i := range 5 {
		d := tkRefusal(t, f.do(t, "vault.open", fmt.Sprintf(`{"vault":"v%d"}`, i)), axerr.CodeApprovalMissing, 428)
		if want := i < 2; d["approvers_notified"] != want {
			t.Errorf("call %d: approvers_notified = %v, want %v", i, d["approvers_notified"], want)
		}
	}
	if len(f.notes) != 2 {
		t.Fatalf("%d notifications in the first minute, want 2", len(f.notes))
	}
	f.clock.now = f.clock.now.Add(time.Minute)
	tkRefusal(t, f.do(t, "vault.open", `{"vault":"later"}`), axerr.CodeApprovalMissing, 428)
	if len(f.notes) != 3 || f.notes[2].Coalesced != 3 || f.notes[0].Coalesced != 0 {
		t.Fatalf("notifications %d, the next one carries %d held back; want 3 and 3", len(f.notes), f.notes[len(f.notes)-1].Coalesced)
	}
	// One notification per request: asking again notifies no one.
	tkRefusal(t, f.do(t, "vault.open", `{"vault":"later"}`), axerr.CodeApprovalMissing, 428)
	if len(f.notes) != 3 {
		t.Fatalf("a pending request was notified again")
	}
}

// TestMemoryApprovalStoreCapacityPerTenant: one tenant filling its share
// never refuses another tenant (today one pool served every tenant).
func TestMemoryApprovalStoreCapacityPerTenant(t *testing.T) {
	s := gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{MaxRequests: 10})
	ctx := t.Context()
	exp := time.Now().Add(time.Hour)
	for i := range 10 {
		if _, _, err := s.Create(ctx, gate.ApprovalRequest{ID: fmt.Sprint("flood-", i), Tenant: "flood", Requester: fmt.Sprint("u", i), ExpiresAt: exp}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Create(ctx, gate.ApprovalRequest{ID: "flood-over", Tenant: "flood", ExpiresAt: exp}, 0); err != gate.ErrApprovalStoreFull {
		t.Fatalf("the full tenant: %v, want ErrApprovalStoreFull", err)
	}
	if _, created, err := s.Create(ctx, gate.ApprovalRequest{ID: "acme-1", Tenant: "acme", ExpiresAt: exp}, 0); err != nil || !created {
		t.Fatalf("another tenant: %v, %v", created, err)
	}
}

// grantOf is the token grant for an approval request's call.
func grantOf(r gate.ApprovalRequest) token.Grant {
	return token.Grant{Requester: r.Requester, Intent: r.Intent, Tenant: r.Tenant, ArgsSHA256: r.ArgsSHA256}
}
