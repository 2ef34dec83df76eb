package httpgate_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/middleware"
)

// tenantHeader is userHeader with the tenant from X-Test-Tenant ("acme"
// when absent).
func tenantHeader(r *http.Request) (middleware.Principal, error) {
	id := r.Header.Get("X-Test-User")
	if id == "" {
		return middleware.Principal{}, errors.New("no X-Test-User header")
	}
	tenant := r.Header.Get("X-Test-Tenant")
	if tenant == "" {
		tenant = "acme"
	}
	roles := []string{"member"}
	if r := r.Header.Get("X-Test-Roles"); r != "" {
		roles = strings.Split(r, ",")
	}
	return middleware.Principal{ID: id, Tenant: tenant, Roles: roles}, nil
}

// getLive sends a GET to a real server and returns the status and body.
func getLive(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
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
	return res.StatusCode, string(raw)
}

// TestHumanEndpointsTellNothingOfOthersRequests: over the JSON endpoints of
// NewHumanHandler, a person who may not decide a request (another tenant,
// with or without the roles; the requester's namesake elsewhere; another
// person of the tenant, for a confirmation) neither sees it in their inbox
// nor can decide it, and deciding it answers exactly as for an id that
// does not exist: the answer does not tell that it exists.
func TestHumanEndpointsTellNothingOfOthersRequests(t *testing.T) {
	enf := enforcer(t, axgate.WithDecisionPages("https://ops.example/axgate/"))
	tool := &spy{}
	srv, err := httpgate.NewToolServer(enf, map[string]middleware.Invoker{"order_cancel": tool, "refund_issue": tool}, httpgate.WithPrincipal(tenantHeader))
	if err != nil {
		t.Fatal(err)
	}
	tools := httptest.NewServer(srv)
	defer tools.Close()
	human := httptest.NewServer(httpgate.NewHumanHandler(enf, tenantHeader))
	defer human.Close()

	ids := map[string]string{}
	for tool, args := range map[string]string{"order_cancel": `{"order_id":"o-1"}`, "refund_issue": `{"order_id":"o-1","amount":5}`} {
		_, body := postLive(t, tools.URL+"/tools/"+tool+"/call", args, "X-Test-User", "alice")
		_, d := envelopeOf(body)
		id, _ := d["decision_id"].(string)
		if id == "" {
			t.Fatalf("%s: %v", tool, body)
		}
		ids[tool] = id
	}
	outsiders := []struct {
		name    string
		header  []string
		inboxOK bool // the person may list other requests of the tenant
	}{
		{"finance of another tenant", []string{"X-Test-User", "mallory", "X-Test-Tenant", "globex", "X-Test-Roles", "finance,admin"}, false},
		{"alice of another tenant", []string{"X-Test-User", "alice", "X-Test-Tenant", "globex", "X-Test-Roles", "finance"}, false},
		{"finance of the tenant", []string{"X-Test-User", "bob", "X-Test-Roles", "finance"}, true},
	}
	unknown := func(t *testing.T, id string, header []string) (int, string) {
		status, body := postLive(t, human.URL+"/approvals/"+id, `{"approve":true}`, header...)
		raw, _ := json.Marshal(body)
		return status, strings.ReplaceAll(string(raw), id, "ID")
	}
	for _, o := range outsiders {
		for tool, id := range ids {
			if tool == "refund_issue" && o.inboxOK {
				continue // bob may decide alice's approval request
			}
			fake := id[:4] + strings.Repeat("A", len(id)-4)
			ws, wb := unknown(t, fake, o.header)
			gs, gb := unknown(t, id, o.header)
			if gs != ws || gb != wb || gs != http.StatusNotFound {
				t.Errorf("%s deciding alice's %s: %d %s; for an unknown id: %d %s", o.name, tool, gs, gb, ws, wb)
			}
		}
		status, body := getLive(t, human.URL+"/approvals", o.header...)
		for tool, id := range ids {
			if strings.Contains(body, id) && !(o.inboxOK && tool == "refund_issue") {
				t.Errorf("%s's inbox shows alice's %s: %d %s", o.name, tool, status, body)
			}
		}
	}
	// The confirmation is still pending for alice alone, and nothing ran.
	_, body := getLive(t, human.URL+"/approvals", "X-Test-User", "alice")
	if !strings.Contains(body, ids["order_cancel"]) || tool.calls.Load() != 0 {
		t.Fatalf("alice's inbox %s, tool ran %d", body, tool.calls.Load())
	}
}
