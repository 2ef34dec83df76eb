package httpgate_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/manifest"
)

// TestMiddlewareConstraintFailsClosed: over a real listener, a constraint
// whose evaluation errs (an optional argument read without has(), which
// "|| …" used to absorb) refuses the request with 412 and the handler never
// runs.
func TestMiddlewareConstraintFailsClosed(t *testing.T) {
	m, err := manifest.Parse([]byte(`{"version": "1.0.0", "actions": [
    {"intent": "payment.send", "entity": "payment", "action_type": "write", "description": "Send a payment",
     "required_parameters": [{"name": "amount", "type": "number", "description": "Amount"}],
     "optional_parameters": [{"name": "cfo_code", "type": "string", "description": "CFO approval code"}],
     "risk_level": "low", "idempotent": false, "scope": "global",
     "constraints": {"cfo_above_1000": "args.amount <= 1000.0 || args.cfo_code == 'CFO-OK'"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	var ran int
	h := newMiddleware(t, enf, httpgate.WithRoute("POST /payments", "payment.send"), httpgate.WithPrincipal(userHeader), quiet)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran++; w.WriteHeader(http.StatusNoContent) }))
	ts := httptest.NewServer(h)
	defer ts.Close()
	post := func(body string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", ts.URL+"/payments", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Test-User", "u1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var env map[string]any
		_ = json.Unmarshal(raw, &env)
		return resp.StatusCode, env
	}
	status, env := post(`{"amount":5000}`)
	e, _ := env["error"].(map[string]any)
	details, _ := e["details"].(map[string]any)
	if status != http.StatusPreconditionFailed || e["code"] != "AXAG_PRECONDITION_FAILED" || details["reason"] != "constraint_not_evaluable" {
		t.Fatalf("%d %v", status, env)
	}
	if ran != 0 {
		t.Fatal("the handler ran")
	}
	if status, env := post(`{"amount":5000,"cfo_code":"CFO-OK"}`); status != http.StatusNoContent || ran != 1 {
		t.Fatalf("%d %v", status, env)
	}
}
