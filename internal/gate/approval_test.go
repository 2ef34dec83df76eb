package gate_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// tkApproval is an approval gate beside the confirmation fixture, sharing
// its keys and replay store.
type tkApproval struct {
	*tkFixture
	store    *gate.MemoryApprovalStore
	notified atomic.Int32
	gate     *gate.Approval
	issuer   token.Issuer
}

func newTkApproval(t testing.TB) *tkApproval {
	t.Helper()
	a := &tkApproval{tkFixture: newTkFixture(t), store: gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{})}
	v, err := token.NewVerifier(token.VerifierConfig{Type: token.TypApproval, Keys: a.keys, MaxLifetime: token.DefaultApprovalLifetime})
	if err != nil {
		t.Fatal(err)
	}
	a.issuer = token.Issuer{Signer: a.signer}
	a.gate, err = gate.NewApproval(gate.ApprovalConfig{
		Verifier: v, Replay: a.persistent, Store: a.store, Issuer: a.issuer,
		Notifier: gate.NotifierFunc(func(context.Context, gate.ApprovalRequest) error { a.notified.Add(1); return nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// approval mints an approval token by approver with roles for alice's call.
func (a *tkApproval) approval(t testing.TB, approver string, roles []string, intent, args string) string {
	t.Helper()
	d, err := a.call(intent, args).ArgsSHA256()
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := a.issuer.Approval(approver, roles, token.Grant{Intent: intent, Tenant: "acme", ArgsSHA256: d, Requester: "alice"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (a *tkApproval) run(ctx context.Context, c *middleware.Call) error {
	_, err := a.gate.Stage().Interceptor(ctx, c, middleware.InvokerFunc(tkOK))
	return err
}

const tkPayout = `{"amount":900}`

func TestApprovalNofM(t *testing.T) {
	a := newTkApproval(t)
	ctx := t.Context()
	present := func(tokens ...string) (*middleware.Call, error) {
		c := a.call("payout.send", tkPayout)
		c.Credentials.Approvals = tokens
		return c, a.run(ctx, c)
	}
	digest, _ := a.call("payout.send", tkPayout).ArgsSHA256()
	wantID := gate.ApprovalRequestID("payout.send", digest, "alice", "acme", "")

	// None: refused, and a request is recorded once, however often retried.
	for range 3 {
		_, err := present()
		d := tkRefusal(t, err, axerr.CodeApprovalMissing, http.StatusPreconditionRequired)
		if d["approval_request_id"] != wantID || d["count_needed"] != 2 || d["count_received"] != 0 || d["request_state"] != "pending" {
			t.Fatalf("details = %v", d)
		}
		if !slices.Equal(d["roles"].([]string), []string{"finance", "admin"}) {
			t.Fatalf("roles = %v", d["roles"])
		}
	}
	if n := a.notified.Load(); n != 1 {
		t.Errorf("notifier called %d times for one request retried 3 times, want 1", n)
	}
	req, err := a.store.Get(ctx, wantID)
	if err != nil {
		t.Fatal(err)
	}
	if req.Requester != "alice" || req.Tenant != "acme" || req.Count != 2 || string(req.Arguments) != tkPayout || req.State != gate.ApprovalPending {
		t.Errorf("stored request = %+v", req)
	}

	bob := a.approval(t, "bob", []string{"finance"}, "payout.send", tkPayout)
	bobAgain := a.approval(t, "bob", []string{"finance"}, "payout.send", tkPayout)
	carol := a.approval(t, "carol", []string{"admin", "auditor"}, "payout.send", tkPayout)

	// One of two.
	_, err = present(bob)
	if d := tkRefusal(t, err, axerr.CodeApprovalMissing, 428); d["count_received"] != 1 {
		t.Fatalf("one approval: count_received = %v", d["count_received"])
	}
	// The same approver twice counts once.
	_, err = present(bob, bobAgain)
	if d := tkRefusal(t, err, axerr.CodeApprovalMissing, 428); d["count_received"] != 1 {
		t.Fatalf("duplicate approver: count_received = %v, want 1", d["count_received"])
	}
	// Two distinct approvers in the roles: the call passes.
	c, err := present(carol, bob)
	if err != nil {
		t.Fatalf("2 of 2 approvals refused: %v", err)
	}
	if !slices.Equal(c.Facts.Approvers, []string{"bob", "carol"}) || c.Facts.ApprovalRequestID != wantID {
		t.Errorf("facts = %+v", c.Facts)
	}
	if err := c.RunCommits(ctx); err != nil {
		t.Fatal(err)
	}
	// Spent: presenting them again is a replay, refused at the commit.
	c = a.call("payout.send", tkPayout)
	c.Credentials.Approvals = []string{carol, bob}
	_, err = middleware.Build(middleware.InvokerFunc(tkOK), nil, a.gate.Stage(), tkCommit).Invoke(ctx, c)
	d := tkRefusal(t, err, axerr.CodeApprovalMissing, 428)
	if d["count_received"] != 0 || tkJSON(t, d["rejected_tokens"]) != `[{"index":0,"reason":"already_used"},{"index":1,"reason":"already_used"}]` {
		t.Fatalf("replayed approvals: %v", d)
	}
	if len(c.Facts.Approvers) != 0 {
		t.Errorf("the replayed approvers are recorded as approving: %q", c.Facts.Approvers)
	}
}

func TestApprovalInvalid(t *testing.T) {
	a := newTkApproval(t)
	for name, tc := range map[string]struct {
		tokens []string
		reason string
	}{
		"self-approval": {[]string{a.approval(t, "alice", []string{"finance"}, "payout.send", tkPayout)}, "self_approval"},
		"wrong role":    {[]string{a.approval(t, "dave", []string{"clerk"}, "payout.send", tkPayout)}, "role_not_allowed"},
		"no roles":      {[]string{a.approval(t, "dave", nil, "payout.send", tkPayout)}, "role_not_allowed"},
		"too many tokens": {func() []string {
			out := make([]string, gate.MaxApprovalTokens+1)
			for i := range out {
				out[i] = "x"
			}
			return out
		}(), "too_many_tokens"},
		"one good, one self": {[]string{
			a.approval(t, "bob", []string{"finance"}, "payout.send", tkPayout),
			a.approval(t, "alice", []string{"admin"}, "payout.send", tkPayout),
		}, "self_approval"},
	} {
		t.Run(name, func(t *testing.T) {
			c := a.call("payout.send", tkPayout)
			c.Credentials.Approvals = tc.tokens
			d := tkRefusal(t, a.run(t.Context(), c), axerr.CodeApprovalInvalid, http.StatusForbidden)
			if d["reason"] != tc.reason || d["gate"] != "approval" {
				t.Fatalf("details = %v, want reason %s", d, tc.reason)
			}
		})
	}
}

func TestApprovalTokenBinding(t *testing.T) {
	a := newTkApproval(t)
	confirmation := a.signEd(t, nil, a.claims(t, "payout.send", tkPayout)) // a confirmation, not an approval
	otherArgs := a.approval(t, "bob", []string{"finance"}, "payout.send", `{"amount":1}`)
	otherIntent := a.approval(t, "bob", []string{"finance"}, "vault.open", tkPayout)
	c := a.call("payout.send", tkPayout)
	c.Credentials.Approvals = []string{confirmation, otherArgs, otherIntent, "garbage"}
	d := tkRefusal(t, a.run(t.Context(), c), axerr.CodeApprovalMissing, 428)
	want := `[{"index":0,"reason":"wrong_type"},{"index":1,"reason":"bound_to_other_arguments"},{"index":2,"reason":"bound_to_other_intent"},{"index":3,"reason":"malformed"}]`
	if got := tkJSON(t, d["rejected_tokens"]); got != want {
		t.Fatalf("rejected_tokens = %s\nwant %s", got, want)
	}
	// Another requester (mallory presenting tokens issued for alice).
	c = a.call("payout.send", tkPayout)
	c.Principal = middleware.Principal{ID: "mallory", Tenant: "acme"}
	c.Credentials.Approvals = []string{a.approval(t, "bob", []string{"finance"}, "payout.send", tkPayout)}
	d = tkRefusal(t, a.run(t.Context(), c), axerr.CodeApprovalMissing, 428)
	if got := tkJSON(t, d["rejected_tokens"]); got != `[{"index":0,"reason":"bound_to_other_caller"}]` {
		t.Fatalf("other requester: %s", got)
	}
}

func TestApprovalCheckRecordsNothing(t *testing.T) {
	a := newTkApproval(t)
	c := a.call("payout.send", tkPayout)
	c.SetCheckOnly(true)
	d := tkRefusal(t, a.run(t.Context(), c), axerr.CodeApprovalMissing, 428)
	if d["request_state"] != "not_requested" {
		t.Errorf("request_state = %v, want not_requested", d["request_state"])
	}
	if list, _, _ := a.store.List(t.Context(), gate.ApprovalFilter{AnyTenant: true}, "", 0); len(list) != 0 || a.notified.Load() != 0 {
		t.Fatalf("Check recorded %d requests and notified %d times", len(list), a.notified.Load())
	}
}

func TestApprovalDecide(t *testing.T) {
	a := newTkApproval(t)
	ctx := t.Context()
	c := a.call("payout.send", tkPayout)
	err := a.run(ctx, c)
	id := tkRefusal(t, err, axerr.CodeApprovalMissing, 428)["approval_request_id"].(string)

	p := func(id, tenant string, roles ...string) middleware.Principal {
		return middleware.Principal{ID: id, Tenant: tenant, Roles: roles}
	}
	alice, bob, carol := p("alice", "acme", "finance"), p("bob", "acme", "finance"), p("carol", "acme", "admin")

	// Who may not decide.
	for _, tc := range []struct {
		who    middleware.Principal
		code   axerr.Code
		reason string
	}{
		{alice, axerr.CodeApprovalInvalid, "self_approval"},
		{p("dave", "acme", "clerk"), axerr.CodeApprovalInvalid, "role_not_allowed"},
		// Another tenant's request reads as an unknown one, even to someone
		// there with the requester's id.
		{p("eve", "globex", "finance"), axerr.CodeApprovalInvalid, "request_not_found"},
		{p("alice", "globex", "finance"), axerr.CodeApprovalInvalid, "request_not_found"},
		{p("", "acme", "finance"), axerr.CodeUnauthenticated, ""},
	} {
		_, _, _, err := a.gate.Decide(ctx, tc.who, id, true, "")
		d := tkRefusal(t, err, tc.code, tc.code.HTTPStatus())
		if tc.reason != "" && d["reason"] != tc.reason {
			t.Errorf("%s: reason = %v, want %s", tc.who.ID, d["reason"], tc.reason)
		}
		if tc.reason == "request_not_found" {
			if !errors.Is(err, gate.ErrNotFound) {
				t.Errorf("%s: the refusal does not match gate.ErrNotFound", tc.who.ID)
			}
			if body := tkJSON(t, err.(*axerr.Error).Envelope()); strings.Contains(body, "payout") || strings.Contains(body, "finance") {
				t.Errorf("%s of another tenant learns of the request: %s", tc.who.ID, body)
			}
		}
	}

	// Who may read it: the requester and its approvers, not another tenant
	// nor someone of the tenant without a role.
	for _, tc := range []struct {
		who    middleware.Principal
		code   axerr.Code
		reason string
	}{
		{alice, "", ""},
		{bob, "", ""},
		{p("alice", "", "finance"), axerr.CodeApprovalInvalid, "request_not_found"},
		{p("frank", "globex", "finance"), axerr.CodeApprovalInvalid, "request_not_found"},
		{p("dave", "acme", "clerk"), axerr.CodeApprovalInvalid, "not_allowed"},
		{p("", "acme", "finance"), axerr.CodeUnauthenticated, ""},
	} {
		req, err := a.gate.Request(ctx, tc.who, id)
		if tc.code == "" {
			if err != nil || req.ID != id || string(req.Arguments) != tkPayout {
				t.Errorf("Request as %s: %+v, %v", tc.who.ID, req, err)
			}
			continue
		}
		d := tkRefusal(t, err, tc.code, tc.code.HTTPStatus())
		if d["reason"] != nil && d["reason"] != tc.reason || strings.Contains(tkJSON(t, err.(*axerr.Error).Envelope()), "payout") {
			t.Errorf("Request as %s@%s: %v", tc.who.ID, tc.who.Tenant, d)
		}
		if req.ID != "" {
			t.Errorf("Request as %s returned the request", tc.who.ID)
		}
	}
	if _, _, _, err := a.gate.Decide(ctx, bob, "apr_nope", true, ""); err == nil {
		t.Error("deciding an unknown request succeeded")
	}

	// Inbox: bob and carol see it, alice (the requester) does not.
	for who, want := range map[string]int{"bob": 1, "carol": 1, "alice": 0} {
		pr := map[string]middleware.Principal{"bob": bob, "carol": carol, "alice": alice}[who]
		list, _, err := a.gate.Pending(ctx, pr, "", 0)
		if err != nil || len(list) != want {
			t.Errorf("Pending(%s) = %d requests, %v; want %d", who, len(list), err, want)
		}
	}
	if list, _, _ := a.gate.Pending(ctx, p("frank", "globex", "finance"), "", 0); len(list) != 0 {
		t.Error("another tenant's approver sees the request")
	}

	// bob approves (1 of 2); a second decision of his is refused (409)
	// and mints nothing.
	req, bobTok, exp, err := a.gate.Decide(ctx, bob, id, true, "ok")
	if err != nil || bobTok == "" || req.State != gate.ApprovalPending || exp.IsZero() {
		t.Fatalf("bob's approval: state %s, token %v, err %v", req.State, bobTok != "", err)
	}
	for _, approve := range []bool{true, false} {
		_, tok, _, err := a.gate.Decide(ctx, bob, id, approve, "again")
		if d := tkRefusal(t, err, axerr.CodeAlreadyDecided, 409); d["reason"] != string(reasons.AlreadyDecided) || tok != "" {
			t.Fatalf("bob again (approve %v): token %q, %v", approve, tok, d)
		}
	}
	if r, _ := a.gate.Request(ctx, bob, id); len(r.Decisions) != 1 || r.State != gate.ApprovalPending {
		t.Fatalf("after bob's second decisions: %d decisions, state %s", len(r.Decisions), r.State)
	}
	// carol approves: 2 of 2, approved.
	req, carolTok, _, err := a.gate.Decide(ctx, carol, id, true, "")
	if err != nil || req.State != gate.ApprovalApproved {
		t.Fatalf("carol's approval: state %s, %v", req.State, err)
	}
	if list, _, _ := a.gate.Pending(ctx, bob, "", 0); len(list) != 0 {
		t.Error("an approved request is still in the inbox")
	}
	// The issued tokens let the call through.
	c = a.call("payout.send", tkPayout)
	c.Credentials.Approvals = []string{bobTok, carolTok}
	if err := a.run(ctx, c); err != nil {
		t.Fatalf("tokens from Decide refused: %v", err)
	}
	// Approved is final: a new decision is an invalid transition...
	_, _, _, err = a.gate.Decide(ctx, p("gina", "acme", "admin"), id, false, "too late")
	if d := tkRefusal(t, err, axerr.CodeApprovalInvalid, 403); d["reason"] != "invalid_transition" {
		t.Errorf("deciding an approved request: %v", d)
	}
	// ...and an approver who approved gets no fresh token: 409.
	if _, tok, _, err := a.gate.Decide(ctx, carol, id, true, ""); tok != "" || !axerr.Is(err, axerr.CodeAlreadyDecided) {
		t.Errorf("carol again: token %q, %v; want 409 and no token", tok, err)
	}
}

func TestApprovalDenyAndCancel(t *testing.T) {
	a := newTkApproval(t)
	ctx := t.Context()
	bob := middleware.Principal{ID: "bob", Tenant: "acme", Roles: []string{"admin"}}
	request := func(args string) string {
		err := a.run(ctx, a.call("vault.open", args))
		return tkRefusal(t, err, axerr.CodeApprovalMissing, 428)["approval_request_id"].(string)
	}
	id := request(`{"vault":"v1"}`)
	req, tok, _, err := a.gate.Decide(ctx, bob, id, false, "not today")
	if err != nil || tok != "" || req.State != gate.ApprovalDenied || req.Decisions[0].Reason != "not today" {
		t.Fatalf("deny: %+v, token %q, %v", req, tok, err)
	}
	_, _, _, err = a.gate.Decide(ctx, bob, id, true, "changed my mind")
	if d := tkRefusal(t, err, axerr.CodeAlreadyDecided, 409); d["reason"] != "already_decided" {
		t.Fatalf("approve after deny: %v", d)
	}
	_, _, _, err = a.gate.Decide(ctx, middleware.Principal{ID: "gina", Tenant: "acme", Roles: []string{"admin"}}, id, true, "")
	if d := tkRefusal(t, err, axerr.CodeApprovalInvalid, 403); d["reason"] != "invalid_transition" {
		t.Fatalf("another's approval after deny: %v", d)
	}
	// The caller learns the call was denied: the denial vetoes it.
	err = a.run(ctx, a.call("vault.open", `{"vault":"v1"}`))
	if d := tkRefusal(t, err, axerr.CodeApprovalInvalid, 403); d["reason"] != "approval_denied" || d["request_state"] != "denied" {
		t.Errorf("call after the denial: %v", d)
	}

	id = request(`{"vault":"v2"}`)
	alice := a.alice
	if err := a.gate.Cancel(ctx, bob, id); err == nil {
		t.Error("someone other than the requester cancelled the request")
	}
	if err := a.gate.Cancel(ctx, middleware.Principal{ID: "alice", Tenant: "globex"}, id); err == nil {
		t.Error("the requester's namesake in another tenant cancelled the request")
	} else if d := tkRefusal(t, err, axerr.CodeApprovalInvalid, 403); d["reason"] != "request_not_found" {
		t.Errorf("cancel from another tenant: %v", d)
	}
	if err := a.gate.Cancel(ctx, alice, id); err != nil {
		t.Fatalf("requester's cancel: %v", err)
	}
	// A cancelled request that voids no token is dropped at once (it no
	// longer counts against the tenant's share): it reads as not found.
	if _, err := a.gate.Request(ctx, alice, id); err == nil {
		t.Error("the cancelled request is still held")
	}
	err = a.gate.Cancel(ctx, alice, id)
	if d := tkRefusal(t, err, axerr.CodeApprovalInvalid, 403); d["reason"] != "request_not_found" {
		t.Errorf("second cancel: %v", d)
	}
}

// TestTokensSpentTogether: a confirmation and an approval pass their gates;
// with the approval missing nothing is spent, and once both are there they
// are spent in one atomic step.
func TestTokensSpentTogether(t *testing.T) {
	a := newTkApproval(t)
	ctx := t.Context()
	const args = `{"vault":"v9"}`
	conf := a.signEd(t, nil, a.claims(t, "vault.open", args))
	chain := middleware.Build(middleware.InvokerFunc(tkOK), nil, a.tkFixture.gate.Stage(), a.gate.Stage(), tkCommit)
	c := a.call("vault.open", args)
	c.Credentials.Confirmation = conf
	_, err := chain.Invoke(ctx, c)
	tkRefusal(t, err, axerr.CodeApprovalMissing, 428)
	if used, _ := a.replay.Used(ctx, tkReplayKey(t, conf)); used {
		t.Fatal("the confirmation was spent although approval was missing")
	}
	appr := a.approval(t, "bob", []string{"admin"}, "vault.open", args)
	c = a.call("vault.open", args)
	c.Credentials.Confirmation, c.Credentials.Approvals = conf, []string{appr}
	if _, err := chain.Invoke(ctx, c); err != nil {
		t.Fatalf("confirmed and approved call refused: %v", err)
	}
	for _, tok := range []string{conf, appr} {
		if used, _ := a.replay.Used(ctx, tkReplayKey(t, tok)); !used {
			t.Errorf("token %s not spent", tkReplayKey(t, tok))
		}
	}
	// If the approval was spent elsewhere meanwhile, the confirmation is not burned.
	conf2 := a.signEd(t, nil, a.claims(t, "vault.open", args))
	appr2 := a.approval(t, "bob", []string{"admin"}, "vault.open", args)
	c = a.call("vault.open", args)
	c.Credentials.Confirmation, c.Credentials.Approvals = conf2, []string{appr2}
	if _, err := a.tkFixture.gate.Stage().Interceptor(ctx, c, middleware.InvokerFunc(func(ctx context.Context, c *middleware.Call) (middleware.Result, error) {
		return a.gate.Stage().Interceptor(ctx, c, middleware.InvokerFunc(func(ctx context.Context, c *middleware.Call) (middleware.Result, error) {
			// Another call spends the approval between the gates and the commit.
			if err := a.replay.Consume(ctx, []token.Use{{ID: tkReplayKey(t, appr2), Expires: time.Now().Add(time.Hour)}}); err != nil {
				t.Fatal(err)
			}
			return middleware.Result{}, c.RunCommits(ctx)
		}))
	})); err == nil {
		t.Fatal("the commit let a replayed approval through")
	} else if d := tkRefusal(t, err, axerr.CodeApprovalMissing, 428); tkJSON(t, d["rejected_tokens"]) != `[{"index":0,"reason":"already_used"}]` {
		t.Errorf("details = %v", d)
	}
	if used, _ := a.replay.Used(ctx, tkReplayKey(t, conf2)); used {
		t.Fatal("the confirmation was burned by the approval's replay")
	}
}
