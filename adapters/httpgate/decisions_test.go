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
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// postLive sends a JSON POST to a real server and decodes the JSON answer.
func postLive(t *testing.T, url, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST %s: %d %s", url, res.StatusCode, raw)
	}
	return res.StatusCode, out
}

func envelopeOf(body map[string]any) (string, map[string]any) {
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	d, _ := e["details"].(map[string]any)
	return code, d
}

// TestDecidedOnPageOverHTTP: with decision pages, the 428 of a tool call
// over HTTP names the call's page (decision_url, agent_action); once the
// person decided, the same HTTP call repeated without any header runs,
// once. For a confirmation and for an approval.
func TestDecidedOnPageOverHTTP(t *testing.T) {
	const base = "https://ops.example/axgate/"
	enf := enforcer(t, axgate.WithDecisionPages(base))
	tool := &spy{}
	srv, err := httpgate.NewToolServer(enf, map[string]middleware.Invoker{"order_cancel": tool, "refund_issue": tool}, httpgate.WithPrincipal(userHeader))
	if err != nil {
		t.Fatal(err)
	}
	tools := httptest.NewServer(srv)
	defer tools.Close()
	human := httptest.NewServer(httpgate.NewHumanHandler(enf, userHeader))
	defer human.Close()

	for _, tc := range []struct {
		tool, args string
		code       axerr.Code
		decider    []string
	}{
		{"order_cancel", `{"order_id":"o-9"}`, axerr.CodeConfirmationMissing, []string{"X-Test-User", "u1"}},
		{"refund_issue", `{"order_id":"o-9","amount":12.5}`, axerr.CodeApprovalMissing, []string{"X-Test-User", "boss", "X-Test-Roles", "finance"}},
	} {
		url := tools.URL + "/tools/" + tc.tool + "/call"
		status, body := postLive(t, url, tc.args, "X-Test-User", "u1")
		code, d := envelopeOf(body)
		id, _ := d["decision_id"].(string)
		if status != http.StatusPreconditionRequired || code != string(tc.code) || id == "" || d["decision_url"] != base+"requests/"+id {
			t.Fatalf("%s: %d %s %v", tc.tool, status, code, d)
		}
		if a, _ := d["agent_action"].(string); !strings.Contains(a, "decision_url") {
			t.Fatalf("%s: agent_action %q", tc.tool, a)
		}
		status, body = postLive(t, human.URL+"/approvals/"+id, `{"approve":true}`, tc.decider...)
		if status != http.StatusOK || body["approved"] != true {
			t.Fatalf("%s: deciding: %d %v", tc.tool, status, body)
		}
		if _, ok := body["token"]; ok && tc.code == axerr.CodeConfirmationMissing {
			t.Fatalf("a confirmation minted a token: %v", body)
		}
		before := tool.calls.Load()
		if status, body = postLive(t, url, tc.args, "X-Test-User", "u1"); status != http.StatusOK {
			t.Fatalf("%s: the repeat after the decision: %d %v", tc.tool, status, body)
		}
		status, body = postLive(t, url, tc.args, "X-Test-User", "u1")
		if code, d := envelopeOf(body); status != http.StatusPreconditionRequired || code != string(tc.code) || d["request_state"] != "pending" {
			t.Fatalf("%s: the second repeat: %d %v", tc.tool, status, body)
		}
		if tool.calls.Load() != before+1 {
			t.Fatalf("%s: the tool ran %d times, want once", tc.tool, tool.calls.Load()-before)
		}
	}
}
