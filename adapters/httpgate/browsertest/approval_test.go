package browsertest

import (
	"net/http"
	"strings"
	"testing"
)

// payout makes carol's payout call, refused for approval, and returns the
// request's id.
func (rg *rig) payout(args string) string {
	rg.t.Helper()
	status, details := rg.call("carol", "payout_send", args)
	id, _ := details["approval_request_id"].(string)
	if status != http.StatusPreconditionRequired || id == "" {
		rg.t.Fatalf("the payout was not refused for approval: %d %v", status, details)
	}
	return id
}

func TestBrowserTwoOfTwoApprovalByTwoPeople(t *testing.T) {
	rg := newRig(t, decisionPages)
	const args = `{"iban":"DE89 3704 0044 0532 0130 00","amount":1250.00}`
	id := rg.payout(args)
	alice, bob, carol := rg.person(), rg.person(), rg.person()

	// alice signs in at the provider from the inbox, and finds the request.
	rg.visit(alice, "alice", "/")
	if inbox := rg.text(alice, "main"); !strings.Contains(inbox, "payout.send") || !strings.Contains(inbox, "carol") {
		t.Fatalf("alice's inbox:\n%s", inbox)
	}
	rg.visit(alice, "alice", "/requests/"+id)
	if args := rg.text(alice, "#arguments"); !strings.Contains(args, `"DE89 3704 0044 0532 0130 00"`) || !strings.Contains(args, "1250.00") {
		t.Fatalf("the exact arguments are not shown:\n%s", args)
	}
	if msg := rg.text(alice, "#message"); msg != "Pay 1250.00 to DE89 3704 0044 0532 0130 00?" {
		t.Fatalf("message %q", msg)
	}
	rg.click(alice, "#approve")
	if got := rg.text(alice, "#progress"); !strings.HasPrefix(got, "1 of 2") {
		t.Fatalf("after alice: %q", got)
	}

	// The requester sees the request and may not approve it.
	rg.visit(carol, "carol", "/requests/"+id)
	if rg.has(carol, "#approve") || !strings.Contains(rg.text(carol, "#note"), "your own call") {
		t.Fatalf("the requester is offered to approve:\n%s", rg.text(carol, "main"))
	}

	// bob, in a browser context of his own, approves second.
	rg.visit(bob, "bob", "/requests/"+id)
	if rg.text(bob, "#requester") != "carol" {
		t.Fatalf("bob's page: %s", rg.text(bob, "main"))
	}
	rg.click(bob, "#approve")
	if got := rg.text(bob, "#state"); got != "approved" {
		t.Fatalf("after bob: state %q", got)
	}
	if d := rg.text(bob, "#decisions"); !strings.Contains(d, "alice") || !strings.Contains(d, "bob") {
		t.Fatalf("who decided: %q", d)
	}
	// carol's agent repeats the call: it runs once, without a token.
	if status, details := rg.call("carol", "payout_send", args); status != http.StatusOK || rg.ran.Load() != 1 {
		t.Fatalf("the repeat after two approvals: %d %v, ran %d", status, details, rg.ran.Load())
	}
	if status, _ := rg.call("carol", "payout_send", args); status != http.StatusPreconditionRequired || rg.ran.Load() != 1 {
		t.Fatalf("a second repeat: %d, ran %d", status, rg.ran.Load())
	}
}

func TestBrowserADenialVetoes(t *testing.T) {
	rg := newRig(t, decisionPages)
	id := rg.payout(`{"iban":"DE1","amount":5}`)
	alice, bob := rg.person(), rg.person()
	rg.visit(alice, "alice", "/requests/"+id)
	rg.click(alice, "#deny")
	if got := rg.text(alice, "#state"); got != "denied" {
		t.Fatalf("state %q", got)
	}
	rg.visit(bob, "bob", "/requests/"+id)
	if rg.has(bob, "#approve") || rg.text(bob, "#state") != "denied" {
		t.Fatalf("bob may still approve a denied request:\n%s", rg.text(bob, "main"))
	}
	if status, _ := rg.call("carol", "payout_send", `{"iban":"DE1","amount":5}`); status == http.StatusOK || rg.ran.Load() != 0 {
		t.Fatalf("the vetoed call: %d, ran %d", status, rg.ran.Load())
	}
}
