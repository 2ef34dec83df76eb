package httpgate_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// humanSetup serves the tools and, on a separate handler, the human
// endpoints, both for one enforcer.
func humanSetup(t *testing.T) (tools, human http.Handler, tool *spy) {
	t.Helper()
	enf := enforcer(t, axgate.WithTokens(axgate.TokenOptions{Issuer: "test", Audience: "test"}))
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
			if r.status != http.StatusUnsupportedMediaType || r.code() != string(axerr.CodeUnsupportedMediaType) || r.details()["reason"] != string(reasons.UnsupportedMediaType) {
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

// live serves h on a real listener and returns a function making requests
// to it.
func live(t *testing.T, h http.Handler) func(method, path, body string, header ...string) (int, map[string]any) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return func(method, path, body string, header ...string) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			// A JSON body says so, as the tool server and the human
			// endpoints require; a header below may override it.
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return res.StatusCode, out
	}
}

// TestHumanApprovalDecidedOnce is the regression of the stretched
// approval: each re-approval by the same approver minted a fresh token, and
// one recorded approval ran a refund three times. Now the second and third
// decisions are 409 already_decided and mint nothing, and the refund runs
// once.
func TestHumanApprovalDecidedOnce(t *testing.T) {
	tools, human, tool := humanSetup(t)
	callTool, decide := live(t, tools), live(t, human)
	const args = `{"order_id":"o-7","amount":30}`
	status, body := callTool("POST", "/tools/refund_issue/call", args, "X-Test-User", "u1")
	details, _ := body["error"].(map[string]any)["details"].(map[string]any)
	id, _ := details["approval_request_id"].(string)
	if status != http.StatusPreconditionRequired || id == "" {
		t.Fatalf("%d %v", status, body)
	}
	var tokens []string
	for i := range 3 {
		status, body := decide("POST", "/approvals/"+id, `{"approve":true}`, "Content-Type", "application/json", "X-Test-User", "boss", "X-Test-Roles", "finance")
		if tok, _ := body["token"].(string); tok != "" {
			tokens = append(tokens, tok)
		}
		if i == 0 {
			if status != http.StatusOK {
				t.Fatalf("first approval: %d %v", status, body)
			}
			continue
		}
		e, _ := body["error"].(map[string]any)
		d, _ := e["details"].(map[string]any)
		if status != http.StatusConflict || e["code"] != string(axerr.CodeAlreadyDecided) || d["reason"] != string(reasons.AlreadyDecided) {
			t.Errorf("approval %d by the same approver: %d %v; want 409 already_decided", i+1, status, body)
		}
	}
	// A denial by the same approver is a second decision too.
	if status, _ := decide("POST", "/approvals/"+id, `{"approve":false}`, "Content-Type", "application/json", "X-Test-User", "boss", "X-Test-Roles", "finance"); status != http.StatusConflict {
		t.Errorf("denial after approval by the same approver: %d", status)
	}
	for _, tok := range tokens {
		callTool("POST", "/tools/refund_issue/call", args, "X-Test-User", "u1", "X-AXAG-Approval", tok)
	}
	if len(tokens) != 1 || tool.calls.Load() != 1 {
		t.Fatalf("%d tokens minted, the refund ran %d times; want 1 and 1", len(tokens), tool.calls.Load())
	}
}

// TestHumanApprovalInboxPages: GET /approvals?limit=&cursor= reads the
// inbox a page at a time, oldest first, with next_cursor.
func TestHumanApprovalInboxPages(t *testing.T) {
	tools, human, _ := humanSetup(t)
	callTool, inbox := live(t, tools), live(t, human)
	var want []string
	for i := range 5 {
		_, body := callTool("POST", "/tools/refund_issue/call", fmt.Sprintf(`{"order_id":"o-%d","amount":1}`, i), "X-Test-User", "u1")
		want = append(want, body["error"].(map[string]any)["details"].(map[string]any)["approval_request_id"].(string))
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("the inbox never ends")
		}
		status, body := inbox("GET", "/approvals?limit=2&cursor="+url.QueryEscape(cursor), "", "X-Test-User", "boss", "X-Test-Roles", "finance")
		list, _ := body["approvals"].([]any)
		if status != http.StatusOK || len(list) > 2 {
			t.Fatalf("%d %v", status, body)
		}
		for _, r := range list {
			got = append(got, r.(map[string]any)["id"].(string))
		}
		next, _ := body["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages = %q, want %q", got, want)
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "cursor=forged"} {
		if status, body := inbox("GET", "/approvals?"+q, "", "X-Test-User", "boss", "X-Test-Roles", "finance"); status != http.StatusBadRequest {
			t.Errorf("GET /approvals?%s: %d %v; want 400", q, status, body)
		}
	}
}

// TestHumanBearerTakesPeoplesTokensOnly: the human endpoints behind
// HumanBearer refuse the bearer token an agent holds for the API (401,
// wrong_audience), so that an agent refused for want of a confirmation
// cannot mint one; a token of the people's audience gets a confirmation,
// and one naming both audiences is refused, since it authenticates an agent
// too. HumanBearer itself refuses to be built without the agents' audience
// or with theirs.
func TestHumanBearerTakesPeoplesTokensOnly(t *testing.T) {
	f := newBearerFixture(t) // the agents' tokens: audience shop-api
	ks, err := token.NewKeySet(token.Key{ID: "k1", Algorithm: token.AlgEdDSA, Public: f.pub})
	if err != nil {
		t.Fatal(err)
	}
	cfg := httpgate.BearerConfig{Keyfunc: token.Keyfunc(ks), Issuer: "https://id.example", Audience: "shop-people"}
	for _, agents := range []string{"", "shop-people"} {
		if _, err := httpgate.HumanBearer(cfg, agents); err == nil {
			t.Errorf("HumanBearer with the agents' audience %q: no error", agents)
		}
	}
	people, err := httpgate.HumanBearer(cfg, "shop-api")
	if err != nil {
		t.Fatal(err)
	}
	enf := enforcer(t)
	human := httpgate.NewHumanHandler(enf, people)
	confirm := func(bearer string) response {
		return do(t, human, "POST", "/confirmations", `{"tool":"order_cancel","arguments":{"order_id":"o-9"}}`,
			"Content-Type", "application/json", "Authorization", "Bearer "+bearer)
	}
	for name, aud := range map[string]any{"the agents' token": "shop-api", "a token for both": []string{"shop-people", "shop-api"}} {
		c := f.claims()
		c["aud"] = aud
		r := confirm(f.sign(t, c, nil))
		// Not wantRefusal, whose callers authenticate by a header: here
		// bearer authentication is what failed, and the 401 says so with
		// its challenge.
		if r.status != http.StatusUnauthorized || r.code() != string(axerr.CodeUnauthenticated) ||
			r.details()["reason"] != string(token.ReasonAudience) || r.body["token"] != nil {
			t.Errorf("%s at the human endpoint: %d %s", name, r.status, r.raw)
		}
		if ch := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, "Bearer ") || !strings.Contains(ch, `error="invalid_token"`) {
			t.Errorf("%s at the human endpoint: WWW-Authenticate %q, want a Bearer challenge with invalid_token", name, ch)
		}
	}
	c := f.claims()
	c["aud"] = "shop-people"
	if r := confirm(f.sign(t, c, nil)); r.status != http.StatusOK || r.body["token"] == nil {
		t.Errorf("a person's token: %d %s", r.status, r.raw)
	}
}

// TestHumanHandlerRefusesAPersonWithoutID: a person function that lets
// everyone in as nobody (Anonymous) mints nothing: a confirmation for the
// empty principal would confirm every anonymous caller's call.
func TestHumanHandlerRefusesAPersonWithoutID(t *testing.T) {
	human := httpgate.NewHumanHandler(enforcer(t), httpgate.Anonymous)
	r := do(t, human, "POST", "/confirmations", `{"tool":"order_cancel","arguments":{"order_id":"o-9"}}`, "Content-Type", "application/json")
	r.wantRefusal(t, axerr.CodeUnauthenticated)
	if r.details()["reason"] != string(reasons.NoCallerID) || r.body["token"] != nil {
		t.Errorf("anonymous person: %d %s", r.status, r.raw)
	}
	do(t, human, "GET", "/approvals", "").wantRefusal(t, axerr.CodeUnauthenticated)
}

// TestHumanBearerREADME runs the README's HumanBearer snippet: the people's
// token confirms under /axag, the agents' is refused.
func TestHumanBearerREADME(t *testing.T) {
	f := newBearerFixture(t) // signs as the identity provider, kid k1
	idpKeys, err := token.NewKeySet(token.Key{ID: "k1", Algorithm: token.AlgEdDSA, Public: f.pub})
	if err != nil {
		t.Fatal(err)
	}
	enf := enforcer(t)
	ui := http.NewServeMux()

	people, err := httpgate.HumanBearer(httpgate.BearerConfig{
		Keyfunc: token.Keyfunc(idpKeys), Issuer: "https://id.example", Audience: "shop-people",
	}, "shop-api") // the agents' audience: their tokens are refused here
	if err != nil {
		log.Fatal(err)
	}
	ui.Handle("/axag/", http.StripPrefix("/axag", httpgate.NewHumanHandler(enf, people)))

	for aud, want := range map[string]int{"shop-people": http.StatusOK, "shop-api": http.StatusUnauthorized} {
		c := f.claims()
		c["aud"] = aud
		r := do(t, ui, "POST", "/axag/confirmations", `{"tool":"order_cancel","arguments":{"order_id":"o-9"}}`,
			"Content-Type", "application/json", "Authorization", "Bearer "+f.sign(t, c, nil))
		if r.status != want {
			t.Errorf("a token of %s: %d %s, want %d", aud, r.status, r.raw, want)
		}
	}
}
