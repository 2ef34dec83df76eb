package axgate_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
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
