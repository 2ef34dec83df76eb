package httpgate_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// TestMiddlewareRefusesCaseFoldedKeys: a handler that decodes its body into
// a struct (encoding/json matches keys case-insensitively) reads
// {"TENANT_ID":"globex"} as tenant_id=globex and {"LIMIT":100000} as
// limit=100000. With undeclared arguments allowed, or on an action that
// declares no parameters, the gates saw an unknown key; now such a key is
// refused before the handler runs.
func TestMiddlewareRefusesCaseFoldedKeys(t *testing.T) {
	m, err := manifest.Parse([]byte(`{"version": "1.0.0", "actions": [
    {"intent": "invoice.export", "entity": "invoice", "action_type": "read", "operation_id": "invoice_export",
     "description": "Export the invoices of a tenant", "risk_level": "none", "idempotent": true, "scope": "tenant"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	noParams, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	defer noParams.Close()
	var calls atomic.Int32
	var read atomic.Value
	handler := func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var in struct {
			TenantID string `json:"tenant_id"`
			Limit    int    `json:"limit"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &in)
		read.Store(in.TenantID)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /invoices", handler)
	mux.HandleFunc("POST /export", handler)
	unknownAllowed := httptest.NewServer(newMiddleware(t, ijsonEnforcer(t), httpgate.WithPrincipal(userHeader), quiet,
		httpgate.WithRoute("POST /invoices", "invoice_list"))(mux))
	defer unknownAllowed.Close()
	undeclared := httptest.NewServer(newMiddleware(t, noParams, httpgate.WithPrincipal(userHeader), quiet,
		httpgate.WithRoute("POST /export", "invoice_export"))(mux))
	defer undeclared.Close()
	for _, tc := range []struct{ name, url, body, path string }{
		{"tenant in capitals", unknownAllowed.URL + "/invoices", `{"TENANT_ID":"globex"}`, "/TENANT_ID"},
		{"tenant in mixed case", unknownAllowed.URL + "/invoices", `{"Tenant_Id":"globex"}`, "/Tenant_Id"},
		{"declared limit in capitals", unknownAllowed.URL + "/invoices", `{"tenant_id":"acme","LIMIT":100000}`, "/LIMIT"},
		{"no declared parameters", undeclared.URL + "/export", `{"TENANT_ID":"globex"}`, "/TENANT_ID"},
		{"no declared parameters, escaped capital", undeclared.URL + "/export", `{"\u0054enant_id":"globex"}`, "/Tenant_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls.Store(0)
			status, body := postJSON(t, tc.url, "u1", tc.body)
			assertRefusal(t, status, body, 400, "AXGATE_INVALID_ARGUMENTS", "ambiguous_keys", tc.path)
			if n := calls.Load(); n != 0 {
				t.Fatalf("the handler ran %d times and read tenant %v", n, read.Load())
			}
		})
	}
	// The exact names still pass and reach the handler.
	if status, body := postJSON(t, undeclared.URL+"/export", "u1", `{"tenant_id":"acme","Format":"csv"}`); status != 200 || calls.Load() != 1 {
		t.Fatalf("%d %v", status, body)
	}
}

// TestMiddlewareRefusesLoneSurrogateBeforeCommit: "\ud800" decoded to U+FFFD
// and passed every gate, and was refused only when the tool stage
// canonicalized the arguments, after the rate limit had been charged: the
// caller's next, valid call was refused as over the limit. It is refused
// before any gate now, and the valid call runs.
func TestMiddlewareRefusesLoneSurrogateBeforeCommit(t *testing.T) {
	m, err := manifest.Parse([]byte(`{"version": "1.0.0", "actions": [
    {"intent": "note.add", "entity": "note", "action_type": "write", "operation_id": "note_add",
     "description": "Add a note", "risk_level": "low", "idempotent": true, "scope": "global", "rate_limit": "1/hour",
     "optional_parameters": [{"name": "text", "type": "string", "description": "Text"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var calls atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /notes", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":1}`)
	})
	ts := httptest.NewServer(newMiddleware(t, e, httpgate.WithPrincipal(userHeader), quiet, httpgate.WithRoute("POST /notes", "note_add"))(mux))
	defer ts.Close()
	status, body := postJSON(t, ts.URL+"/notes", "u1", `{"text":"\ud800"}`)
	assertRefusal(t, status, body, 400, "AXGATE_INVALID_ARGUMENTS", "invalid_string", "/text")
	if status, body := postJSON(t, ts.URL+"/notes", "u1", `{"text":"hello \ud83d\ude00"}`); status != 200 || calls.Load() != 1 {
		t.Fatalf("the valid call after the refused one: %d %v (handler ran %d times); the refusal must not charge the rate limit", status, body, calls.Load())
	}
}

// TestValidateRefusesLongArrayCheaply: the unauthenticated Validation
// endpoint decoded a 1 MiB body of 262,000 one-byte items into a value per
// item (250 MB for one request) before the schema refused them. The item
// limit refuses it while scanning the bytes: the refusal allocates a small
// multiple of the body, not hundreds of times it.
func TestValidateRefusesLongArrayCheaply(t *testing.T) {
	m, err := manifest.Parse([]byte(`{"version": "1.0.0", "entities": [{"name": "order", "actions": [
    {"intent": "order.bulk", "action_type": "write", "operation_id": "order_bulk", "description": "Bulk", "risk_level": "low", "idempotent": true, "scope": "global",
     "parameters": {"ids": {"type": "array", "required": true, "description": "ids", "items": {"type": "integer", "description": "id"}}}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tool := &spy{}
	srv, err := httpgate.NewToolServer(e, map[string]middleware.Invoker{"order_bulk": tool}, httpgate.WithPrincipal(userHeader), quiet)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	body := `{"ids":[` + strings.TrimSuffix(strings.Repeat(`"a",`, (1<<20-12)/4), ",") + `]}`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	status, res := postJSON(t, ts.URL+"/tools/order_bulk/validate", "", body)
	runtime.ReadMemStats(&after)
	if status != 400 {
		t.Fatalf("validate: %d %v", status, res)
	}
	errs, _ := res["errors"].([]any)
	if len(errs) != 1 || errs[0].(map[string]any)["path"] != "/ids" || errs[0].(map[string]any)["keyword"] != "maxItems" {
		t.Fatalf("validate: %v; want one error at /ids, keyword maxItems", res)
	}
	// The server and the client share this process: the request is
	// counted a few times over (client write, server read buffers), never
	// the 250 bytes per byte of decoding every item.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 20*uint64(len(body)) {
		t.Errorf("refusing a %d-byte array allocated %d bytes", len(body), alloc)
	}
	status, res = postJSON(t, ts.URL+"/tools/order_bulk/call", "u1", body)
	assertRefusal(t, status, res, 400, "AXGATE_INVALID_ARGUMENTS", "too_many_items", "/ids")
	if n := tool.calls.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}
