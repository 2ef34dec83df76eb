package httpgate_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// humanSetup serves the tools and, on a separate handler, the human
// endpoints, both for one enforcer.
func humanSetup(t *testing.T) (tools, human http.Handler, tool *spy) {
	t.Helper()
	enf := enforcer(t, axgate.WithIssuer("test"), axgate.WithAudience("test"))
	tool = &spy{}
	srv, err := httpgate.NewToolServer(enf, map[string]middleware.Invoker{"order_cancel": tool, "refund_issue": tool}, httpgate.WithPrincipal(userHeader))
	if err != nil {
		t.Fatal(err)
	}
	return srv, httpgate.NewHumanHandler(enf, userHeader), tool
}

func TestHumanConfirmation(t *testing.T) {
	tools, human, tool := humanSetup(t)
	args := `{"order_id":"o-9"}`
	r := do(t, tools, "POST", "/tools/order_cancel/call", args, "X-Test-User", "u1")
	r.wantRefusal(t, axerr.CodeConfirmationMissing)
	if r.details()["args_sha256"] == nil {
		t.Fatalf("details = %v", r.details())
	}

	c := do(t, human, "POST", "/confirmations", `{"tool":"order_cancel","arguments":{"order_id":"o-9"}}`, "Content-Type", "application/json", "X-Test-User", "u1")
	token, _ := c.body["token"].(string)
	if c.status != 200 || token == "" || c.body["expires_at"] == nil || c.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%d %v %s", c.status, c.header, c.raw)
	}
	// Key order and spacing do not matter: the token binds the canonical
	// arguments.
	r = do(t, tools, "POST", "/tools/order_cancel/call", ` { "order_id" : "o-9" } `, "X-Test-User", "u1", "X-AXAG-Confirmation", token)
	if r.status != 200 || tool.calls.Load() != 1 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	// Single use.
	r = do(t, tools, "POST", "/tools/order_cancel/call", args, "X-Test-User", "u1", "X-AXAG-Confirmation", token)
	r.wantRefusal(t, axerr.CodeConfirmationMissing)
	// Bound to the caller.
	c = do(t, human, "POST", "/confirmations", `{"tool":"order_cancel","arguments":{"order_id":"o-9"}}`, "Content-Type", "application/json", "X-Test-User", "u1")
	r = do(t, tools, "POST", "/tools/order_cancel/call", args, "X-Test-User", "u2", "X-AXAG-Confirmation", c.body["token"].(string))
	r.wantRefusal(t, axerr.CodeConfirmationMissing)
	if tool.calls.Load() != 1 {
		t.Fatalf("tool called %d times", tool.calls.Load())
	}
}

func TestHumanApproval(t *testing.T) {
	tools, human, tool := humanSetup(t)
	args := `{"order_id":"o-9","amount":12.5}`
	r := do(t, tools, "POST", "/tools/refund_issue/call", args, "X-Test-User", "u1")
	r.wantRefusal(t, axerr.CodeApprovalMissing)
	id, _ := r.details()["approval_request_id"].(string)
	if id == "" {
		t.Fatalf("details = %v", r.details())
	}

	// The approver's inbox lists it; a member's does not.
	inbox := do(t, human, "GET", "/approvals", "", "X-Test-User", "boss", "X-Test-Roles", "finance")
	if inbox.status != 200 || !strings.Contains(inbox.raw, id) {
		t.Fatalf("%d %s", inbox.status, inbox.raw)
	}
	if other := do(t, human, "GET", "/approvals", "", "X-Test-User", "u3"); other.status != 200 || strings.Contains(other.raw, id) {
		t.Fatalf("%d %s", other.status, other.raw)
	}

	// The requester cannot approve his own call.
	self := do(t, human, "POST", "/approvals/"+id, `{"approve":true}`, "Content-Type", "application/json", "X-Test-User", "u1", "X-Test-Roles", "finance")
	if self.status < 400 || self.code() == "" {
		t.Fatalf("self-approval: %d %s", self.status, self.raw)
	}
	d := do(t, human, "POST", "/approvals/"+id, `{"approve":true,"reason":"ok"}`, "Content-Type", "application/json", "X-Test-User", "boss", "X-Test-Roles", "finance")
	token, _ := d.body["token"].(string)
	if d.status != 200 || token == "" || d.body["approved"] != true || d.body["id"] != id {
		t.Fatalf("%d %s", d.status, d.raw)
	}
	r = do(t, tools, "POST", "/tools/refund_issue/call", args, "X-Test-User", "u1", "X-AXAG-Approval", token)
	if r.status != 200 || tool.calls.Load() != 1 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
}

func TestHumanEndpointRefusals(t *testing.T) {
	_, human, _ := humanSetup(t)
	do(t, human, "GET", "/approvals", "").wantRefusal(t, axerr.CodeUnauthenticated)
	do(t, human, "POST", "/confirmations", `{"tool":"order_cancel"}`, "Content-Type", "application/json").wantRefusal(t, axerr.CodeUnauthenticated)
	do(t, human, "POST", "/confirmations", `{"tool":"nope","arguments":{}}`, "Content-Type", "application/json", "X-Test-User", "u1").wantRefusal(t, axerr.CodeIntentNotFound)
	do(t, human, "POST", "/confirmations", `{"arguments":{}}`, "Content-Type", "application/json", "X-Test-User", "u1").wantRefusal(t, axerr.CodeInvalidArguments)
	do(t, human, "POST", "/confirmations", `{"tool":"order_cancel","args":{}}`, "Content-Type", "application/json", "X-Test-User", "u1").wantRefusal(t, axerr.CodeInvalidArguments)
	do(t, human, "POST", "/approvals/x", `{"reason":"no decision"}`, "Content-Type", "application/json", "X-Test-User", "boss").wantRefusal(t, axerr.CodeInvalidArguments)
	nf := do(t, human, "POST", "/approvals/unknown-id", `{"approve":false}`, "Content-Type", "application/json", "X-Test-User", "boss", "X-Test-Roles", "finance")
	if nf.status != 404 && nf.code() == "" {
		t.Fatalf("unknown request: %d %s", nf.status, nf.raw)
	}
	// Without a principal function nobody gets in.
	closed := httpgate.NewHumanHandler(enforcer(t), nil)
	do(t, closed, "GET", "/approvals", "", "X-Test-User", "boss").wantRefusal(t, axerr.CodeUnauthenticated)
}

// Regression (security review): a cross-site form posts text/plain (or
// urlencoded, multipart) without a CORS preflight and with the person's
// session cookie. The human endpoints accept application/json only.
func TestHumanEndpointsRefuseNonJSONMediaTypes(t *testing.T) {
	_, human, _ := humanSetup(t)
	body := `{"tool":"order_cancel","arguments":{"order_id":"o-9"}}`
	for _, ct := range []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "application/json;;"} {
		for _, target := range []string{"/confirmations", "/approvals/some-id"} {
			b := body
			if target != "/confirmations" {
				b = `{"approve":true}`
			}
			r := do(t, human, "POST", target, b, "X-Test-User", "boss", "X-Test-Roles", "finance", "Content-Type", ct)
			if r.status != http.StatusUnsupportedMediaType || r.code() != string(axerr.CodeInvalidArguments) || r.details()["reason"] != "unsupported_media_type" {
				t.Fatalf("POST %s as %q: %d %s, want 415", target, ct, r.status, r.raw)
			}
			if r.body["token"] != nil {
				t.Fatalf("a token was minted for %q", ct)
			}
		}
	}
	// Parameters are fine.
	if r := do(t, human, "POST", "/confirmations", body, "X-Test-User", "u1", "Content-Type", "application/json; charset=utf-8"); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
}
