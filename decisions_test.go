package axgate_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

const pagesBase = "https://ops.example/axgate/"

// TestConfirmationDecidedOnPageRunsOnce: with decision pages, a call without
// a token records a confirmation request and names its page; the requester
// confirms; the same call repeated runs once, without a token; a later
// repeat is refused and opens a new request.
func TestConfirmationDecidedOnPageRunsOnce(t *testing.T) {
	e := tokEnforcer(t, axgate.WithDecisionPages(strings.TrimSuffix(pagesBase, "/")))
	ctx := t.Context()
	tool := &spy{}
	const args = `{"order_id":"o-1","amount":25}`

	_, err := e.Wrap(tool).Invoke(ctx, tokCall("order_refund", args, tokAlice))
	d := tokRefusal(t, err, axerr.CodeConfirmationMissing, http.StatusPreconditionRequired)
	id, _ := d["decision_id"].(string)
	if !strings.HasPrefix(id, "cnf_") || d["decision_url"] != pagesBase+"requests/"+id || d["request_state"] != "pending" {
		t.Fatalf("details %v", d)
	}
	if a, _ := d["agent_action"].(string); !strings.Contains(a, "decision_url") {
		t.Fatalf("agent_action %q", a)
	}
	inbox, _, err := e.Approvals().Pending(ctx, tokAlice, "", 0)
	if err != nil || len(inbox) != 1 || inbox[0].ID != id || inbox[0].Kind != "confirmation" {
		t.Fatalf("alice's inbox %+v, %v", inbox, err)
	}
	if _, _, _, err := e.Approvals().Decide(ctx, tokBob, id, true, ""); !axerr.Is(err, axerr.CodeApprovalInvalid) {
		t.Fatalf("bob confirmed alice's call: %v", err)
	}
	req, tok, _, err := e.Approvals().Decide(ctx, tokAlice, id, true, "")
	if err != nil || tok != "" || req.State != gates.ApprovalApproved {
		t.Fatalf("confirm: %+v %q %v", req, tok, err)
	}
	c := tokCall("order_refund", args, tokAlice)
	if _, err := e.Wrap(tool).Invoke(ctx, c); err != nil {
		t.Fatalf("repeat after confirmation: %v", err)
	}
	if tool.calls.Load() != 1 || c.Facts.ConfirmationRequestID != id {
		t.Fatalf("tool ran %d, facts %+v", tool.calls.Load(), c.Facts)
	}
	_, err = e.Wrap(tool).Invoke(ctx, tokCall("order_refund", args, tokAlice))
	d = tokRefusal(t, err, axerr.CodeConfirmationMissing, 428)
	if d["request_state"] != "pending" || d["decision_id"] != id || tool.calls.Load() != 1 {
		t.Fatalf("second repeat: %v, tool ran %d", d, tool.calls.Load())
	}
}

// pageRequest makes the call once without a token and returns the id of the
// request its refusal names.
func pageRequest(t *testing.T, e *axgate.Enforcer, tool, args string, p middleware.Principal, code axerr.Code) string {
	t.Helper()
	_, err := e.Wrap(&spy{}).Invoke(t.Context(), tokCall(tool, args, p))
	d := tokRefusal(t, err, code, http.StatusPreconditionRequired)
	id, _ := d["decision_id"].(string)
	if id == "" || d["decision_url"] != pagesBase+"requests/"+id {
		t.Fatalf("refusal without its page: %v", d)
	}
	return id
}

// TestConfirmationDecidedByItsRequesterOnly: nobody but the requester, of
// their tenant, may confirm, read or cancel a confirmation request; to
// anyone else it reads as unknown.
func TestConfirmationDecidedByItsRequesterOnly(t *testing.T) {
	e := tokEnforcer(t, axgate.WithDecisionPages(pagesBase))
	ctx := t.Context()
	id := pageRequest(t, e, "order_refund", `{"order_id":"o-1","amount":25}`, tokAlice, axerr.CodeConfirmationMissing)
	aliceElsewhere := middleware.Principal{ID: "alice", Tenant: "globex", Roles: tokAlice.Roles}
	for _, p := range []middleware.Principal{tokBob, tokCarol, aliceElsewhere} {
		_, _, _, err := e.Approvals().Decide(ctx, p, id, true, "")
		if d := tokRefusal(t, err, axerr.CodeApprovalInvalid, 403); d["reason"] != "request_not_found" {
			t.Errorf("%s of %s deciding: %v", p.ID, p.Tenant, d)
		}
		_, err = e.Approvals().Request(ctx, p, id)
		if d := tokRefusal(t, err, axerr.CodeApprovalInvalid, 403); d["reason"] != "request_not_found" {
			t.Errorf("%s of %s reading: %v", p.ID, p.Tenant, d)
		}
		if err := e.Approvals().Cancel(ctx, p, id); !axerr.Is(err, axerr.CodeApprovalInvalid) {
			t.Errorf("%s of %s cancelling: %v", p.ID, p.Tenant, err)
		}
		if inbox, _, _ := e.Approvals().Pending(ctx, p, "", 0); len(inbox) != 0 {
			t.Errorf("%s of %s sees %d requests", p.ID, p.Tenant, len(inbox))
		}
	}
	if _, _, _, err := e.Approvals().Decide(ctx, middleware.Principal{Tenant: "acme"}, id, true, ""); !axerr.Is(err, axerr.CodeUnauthenticated) {
		t.Errorf("an unauthenticated decision: %v", err)
	}
	if r, err := e.Approvals().Request(ctx, tokAlice, id); err != nil || r.State != gates.ApprovalPending || r.Kind != "confirmation" {
		t.Fatalf("the requester reads %+v, %v", r, err)
	}
	if _, _, _, err := e.Approvals().Decide(ctx, tokAlice, id, true, ""); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := e.Approvals().Decide(ctx, tokAlice, id, false, "")
	if d := tokRefusal(t, err, axerr.CodeAlreadyDecided, 409); d["reason"] != "already_decided" {
		t.Errorf("second decision: %v", d)
	}
}

// TestApprovalOnPagesKeepsItsRules: with decision pages an approval request
// is decided as before: not by its requester, by holders of its roles, of
// its tenant; until enough approved, the repeat is refused.
func TestApprovalOnPagesKeepsItsRules(t *testing.T) {
	e := tokEnforcer(t, axgate.WithDecisionPages(pagesBase))
	ctx := t.Context()
	tool := &spy{}
	const args = `{"vault":"v1"}` // vault.open: critical, needs a confirmation too
	cid := pageRequest(t, e, "vault_open", args, tokCarol, axerr.CodeConfirmationMissing)
	if _, _, _, err := e.Approvals().Decide(ctx, tokCarol, cid, true, ""); err != nil {
		t.Fatal(err)
	}
	id := pageRequest(t, e, "vault_open", args, tokCarol, axerr.CodeApprovalMissing)
	_, _, _, err := e.Approvals().Decide(ctx, tokCarol, id, true, "")
	if d := tokRefusal(t, err, axerr.CodeApprovalInvalid, 403); d["reason"] != "self_approval" {
		t.Fatalf("the requester approving: %v", d)
	}
	_, _, _, err = e.Approvals().Decide(ctx, tokBob, id, true, "")
	if d := tokRefusal(t, err, axerr.CodeApprovalInvalid, 403); d["reason"] != "role_not_allowed" {
		t.Fatalf("bob (finance) approving: %v", d)
	}
	otherAdmin := middleware.Principal{ID: "dave", Tenant: "globex", Roles: []string{"admin"}}
	_, _, _, err = e.Approvals().Decide(ctx, otherAdmin, id, true, "")
	if d := tokRefusal(t, err, axerr.CodeApprovalInvalid, 403); d["reason"] != "request_not_found" {
		t.Fatalf("an admin of another tenant approving: %v", d)
	}
	// The confirmation is still held (not spent by the refused repeats).
	dave := middleware.Principal{ID: "dave", Tenant: "acme", Roles: []string{"admin"}}
	inbox, _, err := e.Approvals().Pending(ctx, dave, "", 0)
	if err != nil || len(inbox) != 1 || inbox[0].ID != id {
		t.Fatalf("dave's inbox %+v, %v", inbox, err)
	}
	if _, _, _, err := e.Approvals().Decide(ctx, dave, id, true, ""); err != nil {
		t.Fatal(err)
	}
	c := tokCall("vault_open", args, tokCarol)
	if _, err := e.Wrap(tool).Invoke(ctx, c); err != nil {
		t.Fatalf("repeat after confirmation and approval: %v", err)
	}
	if tool.calls.Load() != 1 || c.Facts.ConfirmationRequestID != cid || c.Facts.ApprovalRequestID != id || fmt.Sprint(c.Facts.Approvers) != "[dave]" {
		t.Fatalf("tool ran %d, facts %+v", tool.calls.Load(), c.Facts)
	}
	for _, rid := range []string{cid, id} {
		if r, _ := e.Approvals().Request(ctx, tokCarol, rid); r.State != gates.ApprovalExecuted {
			t.Errorf("%s is %s, want executed", rid, r.State)
		}
	}
}

// TestDenialOnPageLeavesTheCallRefused: a declined confirmation refuses the
// same call (reason declined) and opens no new request; a denied approval
// vetoes it as before.
func TestDenialOnPageLeavesTheCallRefused(t *testing.T) {
	e := tokEnforcer(t, axgate.WithDecisionPages(pagesBase))
	ctx := t.Context()
	tool := &spy{}
	const args = `{"order_id":"o-1","amount":25}`
	id := pageRequest(t, e, "order_refund", args, tokAlice, axerr.CodeConfirmationMissing)
	if r, _, _, err := e.Approvals().Decide(ctx, tokAlice, id, false, "not this one"); err != nil || r.State != gates.ApprovalDenied {
		t.Fatalf("deny: %+v, %v", r, err)
	}
	for range 2 {
		_, err := e.Wrap(tool).Invoke(ctx, tokCall("order_refund", args, tokAlice))
		d := tokRefusal(t, err, axerr.CodeConfirmationMissing, 428)
		if d["reason"] != "declined" || d["request_state"] != "denied" || d["decision_id"] != id {
			t.Fatalf("repeat after the denial: %v", d)
		}
		if a, _ := d["agent_action"].(string); !strings.Contains(a, "Do not call again") {
			t.Fatalf("agent_action after a denial: %q", a)
		}
	}
	if inbox, _, _ := e.Approvals().Pending(ctx, tokAlice, "", 0); len(inbox) != 0 {
		t.Fatalf("a denied call opened a new request: %+v", inbox)
	}
	// A token in hand still works: the person may change their mind
	// through the host's own UI.
	tok, _, err := e.IssueConfirmation(ctx, tokAlice, "order_refund", []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	c := tokCall("order_refund", args, tokAlice)
	c.Credentials.Confirmation = tok
	if _, err := e.Wrap(tool).Invoke(ctx, c); err != nil {
		t.Fatalf("with a token after a denial on the page: %v", err)
	}

	aid := pageRequest(t, e, "payout_send", `{"amount":5}`, tokAlice, axerr.CodeApprovalMissing)
	if _, _, _, err := e.Approvals().Decide(ctx, tokBob, aid, false, "no"); err != nil {
		t.Fatal(err)
	}
	_, err = e.Wrap(tool).Invoke(ctx, tokCall("payout_send", `{"amount":5}`, tokAlice))
	if d := tokRefusal(t, err, axerr.CodeApprovalInvalid, 403); d["reason"] != "approval_denied" {
		t.Fatalf("repeat after an approval denial: %v", d)
	}
	if tool.calls.Load() != 1 {
		t.Fatalf("tool ran %d times, want 1 (the token's)", tool.calls.Load())
	}
}

// TestWithoutDecisionPagesNothingChanges: without WithDecisionPages a call
// without a confirmation token records no request, and no refusal names a
// page.
func TestWithoutDecisionPagesNothingChanges(t *testing.T) {
	e := tokEnforcer(t)
	ctx := t.Context()
	_, err := e.Wrap(&spy{}).Invoke(ctx, tokCall("order_refund", `{"order_id":"o-1","amount":25}`, tokAlice))
	d := tokRefusal(t, err, axerr.CodeConfirmationMissing, 428)
	if _, ok := d["decision_id"]; ok || d["agent_action"] != axerr.CodeConfirmationMissing.AgentAction() {
		t.Fatalf("details %v", d)
	}
	if _, ok := d["request_state"]; ok {
		t.Fatalf("details %v", d)
	}
	if inbox, _, _ := e.Approvals().Pending(ctx, tokAlice, "", 0); len(inbox) != 0 {
		t.Fatalf("a confirmation request was recorded: %+v", inbox)
	}
	_, err = e.Wrap(&spy{}).Invoke(ctx, tokCall("payout_send", `{"amount":5}`, tokAlice))
	d = tokRefusal(t, err, axerr.CodeApprovalMissing, 428)
	if _, ok := d["decision_url"]; ok || d["agent_action"] != axerr.CodeApprovalMissing.AgentAction() {
		t.Fatalf("details %v", d)
	}
	// Approved by two, the repeat without their tokens is still refused.
	id := d["approval_request_id"].(string)
	for _, p := range []middleware.Principal{tokBob, tokCarol} {
		if _, _, _, err := e.Approvals().Decide(ctx, p, id, true, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Wrap(&spy{}).Invoke(ctx, tokCall("payout_send", `{"amount":5}`, tokAlice)); !axerr.Is(err, axerr.CodeApprovalMissing) {
		t.Fatalf("approved without pages, repeat without tokens: %v", err)
	}
}

// TestApprovalsNeverComeFromElicitation: a transport that may ask the
// person inline (call.Elicit) confirms with it, but an approval is never
// asked of, nor answered by, the client: with or without decision pages.
func TestApprovalsNeverComeFromElicitation(t *testing.T) {
	for _, opts := range [][]axgate.Option{nil, {axgate.WithDecisionPages(pagesBase)}} {
		e := tokEnforcer(t, opts...)
		tool := &spy{}
		var asked []string
		elicit := func(_ context.Context, msg string) (bool, error) {
			asked = append(asked, msg)
			return true, nil // a client that accepts by itself
		}
		c := tokCall("payout_send", `{"amount":5}`, tokAlice)
		c.Elicit = elicit
		_, err := e.Wrap(tool).Invoke(t.Context(), c)
		tokRefusal(t, err, axerr.CodeApprovalMissing, 428)
		// vault.open needs both: elicitation confirms, approval is missing.
		c = tokCall("vault_open", `{"vault":"v1"}`, tokAlice)
		c.Elicit = elicit
		_, err = e.Wrap(tool).Invoke(t.Context(), c)
		tokRefusal(t, err, axerr.CodeApprovalMissing, 428)
		if len(asked) != 1 || !c.Facts.ConfirmationElicited || tool.calls.Load() != 0 {
			t.Fatalf("asked %q, facts %+v, tool ran %d", asked, c.Facts, tool.calls.Load())
		}
		// Without Elicit, the client's say counts for nothing.
		c = tokCall("order_refund", `{"order_id":"o-1","amount":25}`, tokAlice)
		_, err = e.Wrap(tool).Invoke(t.Context(), c)
		tokRefusal(t, err, axerr.CodeConfirmationMissing, 428)
	}
}

// TestCheckRecordsNoDecisionRequest: Check reports a confirmed call as
// passing without spending the decision, and records nothing for a call
// without one.
func TestCheckRecordsNoDecisionRequest(t *testing.T) {
	e := tokEnforcer(t, axgate.WithDecisionPages(pagesBase))
	ctx := t.Context()
	const args = `{"order_id":"o-1","amount":25}`
	err := e.Check(ctx, tokCall("order_refund", args, tokAlice))
	if d := tokRefusal(t, err, axerr.CodeConfirmationMissing, 428); d["request_state"] != "not_requested" || d["decision_id"] != nil {
		t.Fatalf("check: %v", d)
	}
	if inbox, _, _ := e.Approvals().Pending(ctx, tokAlice, "", 0); len(inbox) != 0 {
		t.Fatalf("Check recorded %+v", inbox)
	}
	id := pageRequest(t, e, "order_refund", args, tokAlice, axerr.CodeConfirmationMissing)
	if err := e.Check(ctx, tokCall("order_refund", args, tokAlice)); !axerr.Is(err, axerr.CodeConfirmationMissing) {
		t.Fatalf("check of a pending request: %v", err)
	}
	if _, _, _, err := e.Approvals().Decide(ctx, tokAlice, id, true, ""); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.Check(ctx, tokCall("order_refund", args, tokAlice)); err != nil {
			t.Fatalf("check of a confirmed call: %v", err)
		}
	}
	if _, err := e.Wrap(&spy{}).Invoke(ctx, tokCall("order_refund", args, tokAlice)); err != nil {
		t.Fatalf("the call after two checks: %v", err)
	}
}

// TestConfirmationRequestsCountInTheQuota: confirmation requests are held
// under the requester's approval quota.
func TestConfirmationRequestsCountInTheQuota(t *testing.T) {
	e := tokEnforcer(t, axgate.WithDecisionPages(pagesBase), axgate.WithApprovals(axgate.ApprovalOptions{Quota: 2}))
	pageRequest(t, e, "order_refund", `{"order_id":"o-1","amount":1}`, tokAlice, axerr.CodeConfirmationMissing)
	pageRequest(t, e, "payout_send", `{"amount":1}`, tokAlice, axerr.CodeApprovalMissing)
	_, err := e.Wrap(&spy{}).Invoke(t.Context(), tokCall("order_refund", `{"order_id":"o-1","amount":2}`, tokAlice))
	if d := tokRefusal(t, err, axerr.CodeRateLimited, 429); d["reason"] != "approval_quota" {
		t.Fatalf("a third request: %v", d)
	}
}

// TestWithDecisionPagesURL: the base URL must be absolute http(s); a slash
// is added.
func TestWithDecisionPagesURL(t *testing.T) {
	m, err := manifest.Parse([]byte(tokManifest))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "/relative/", "ftp://x/", "https://x/?q=1", "https://x/#f", "https://u:p@x/", "javascript:alert(1)"} {
		if _, err := axgate.New(m, axgate.WithDecisionPages(bad)); err == nil {
			t.Errorf("WithDecisionPages(%q) accepted", bad)
		}
	}
}

// TestAgentActionDetailReplacesTheCodes: a refusal's own agent_action is the
// envelope's and the text's next step, said once.
func TestAgentActionDetailReplacesTheCodes(t *testing.T) {
	e := axerr.New(axerr.CodeConfirmationMissing, "m").With(axerr.DetailAgentAction, "Show the page.")
	if got := e.Envelope().Error.Details["agent_action"]; got != "Show the page." {
		t.Fatalf("envelope agent_action %v", got)
	}
	if txt := e.Text(); strings.Count(txt, "Show the page.") != 1 || !strings.Contains(txt, "Next step: Show the page.") {
		t.Fatalf("text:\n%s", txt)
	}
}

// TestHeldDecisionSpentWithTheTokens: two repeats of an approved call pass
// every gate at once, each with a confirmation token of its own; the one
// that loses the approval at the commit spends nothing, so its token still
// works later. The decision is spent in the same Consume as the tokens.
func TestHeldDecisionSpentWithTheTokens(t *testing.T) {
	var arrived sync.WaitGroup
	var arrivals atomic.Int32
	arrived.Add(2)
	barrier := middleware.Stage{Name: "barrier", Interceptor: func(ctx context.Context, c *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if c.Tool == "vault_open" && len(c.Facts.Approvers) > 0 && arrivals.Add(1) <= 2 {
			arrived.Done()
			arrived.Wait() // both passed every gate before either commits
		}
		return next.Invoke(ctx, c)
	}}
	e := tokEnforcer(t, axgate.WithDecisionPages(pagesBase),
		axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage { return append(std, barrier) }))
	ctx := t.Context()
	const args = `{"vault":"v1"}`
	dave := middleware.Principal{ID: "dave", Tenant: "acme", Roles: []string{"admin"}}
	confirmation := func() string {
		tok, _, err := e.IssueConfirmation(ctx, tokAlice, "vault_open", []byte(args))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	approve := func() {
		c := tokCall("vault_open", args, tokAlice)
		c.Credentials.Confirmation = confirmation()
		_, err := e.Wrap(&spy{}).Invoke(ctx, c)
		id := tokRefusal(t, err, axerr.CodeApprovalMissing, 428)["decision_id"].(string)
		if _, _, _, err := e.Approvals().Decide(ctx, dave, id, true, ""); err != nil {
			t.Fatal(err)
		}
	}
	approve()
	tool := &spy{}
	toks := []string{confirmation(), confirmation()}
	errs := make([]error, 2)
	var done sync.WaitGroup
	for i := range 2 {
		done.Go(func() {
			c := tokCall("vault_open", args, tokAlice)
			c.Credentials.Confirmation = toks[i]
			_, errs[i] = e.Wrap(tool).Invoke(ctx, c)
		})
	}
	done.Wait()
	loser := -1
	for i, err := range errs {
		if err != nil {
			d := tokRefusal(t, err, axerr.CodeApprovalMissing, 428)
			if d["reason"] != "decision_used" {
				t.Fatalf("the loser: %v", d)
			}
			loser = i
		}
	}
	if loser < 0 || tool.calls.Load() != 1 {
		t.Fatalf("errors %v, tool ran %d; want one run", errs, tool.calls.Load())
	}
	// The loser's confirmation token was not spent: once approved again,
	// it runs the call.
	approve()
	c := tokCall("vault_open", args, tokAlice)
	c.Credentials.Confirmation = toks[loser]
	if _, err := e.Wrap(tool).Invoke(ctx, c); err != nil {
		t.Fatalf("the loser's token afterwards: %v", err)
	}
}
