package httpgate_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/manifest"
)

// noParamsManifest has a tenant-scoped export that declares no parameters:
// the tenant it acts on comes from wherever the handler reads it.
const noParamsManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "invoice.export", "entity": "invoice", "action_type": "read", "operation_id": "invoice_export",
     "description": "Export the invoices of a tenant", "risk_level": "none", "idempotent": true, "scope": "tenant"}
  ]
}`

func noParamsEnforcer(t *testing.T, opts ...axgate.Option) *axgate.Enforcer {
	t.Helper()
	m, err := manifest.Parse([]byte(noParamsManifest))
	if err != nil {
		t.Fatal(err)
	}
	e, err := axgate.New(m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// tenantReader is a handler that acts on the tenant named by its path value
// or query parameter name, as an application does, and records it.
type tenantReader struct {
	name  string
	calls atomic.Int32
	acted atomic.Value
}

func (h *tenantReader) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.calls.Add(1)
	tenant := r.PathValue(h.name)
	if v := r.URL.Query().Get(h.name); v != "" {
		tenant = v
	}
	h.acted.Store(tenant)
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true}`)
}

// Regression (attack review of issue 13, B2): a tenant given in a path value
// or a query parameter that the action does not declare reached the handler
// unchecked, because only declared parameters were taken from the path and
// the query. POST /tenants/globex/export ran the export of globex for a
// caller of acme. The enforcer's user and tenant argument names are taken
// from the path and the query whether declared or not.
func TestMiddlewareUndeclaredIdentityInPathAndQuery(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []axgate.Option
		arg    string // the tenant argument name the handler reads
		prefix string // the route with the tenant in the path
	}{
		{"default names", nil, "tenant_id", "/tenants/{tenant_id}"},
		{"TenantArgs", []axgate.Option{axgate.WithAccess(gates.AccessOptions{TenantArgs: []string{"org"}})}, "org", "/orgs/{org}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &tenantReader{name: tc.arg}
			mux := http.NewServeMux()
			mux.Handle("POST /export", h)
			mux.Handle("POST "+tc.prefix+"/export", h)
			mw := newMiddleware(t, noParamsEnforcer(t, tc.opts...), httpgate.WithPrincipal(userHeader), quiet,
				httpgate.WithRoute("POST /export", "invoice_export"),
				httpgate.WithRoute("POST "+tc.prefix+"/export", "invoice_export"))
			ts := httptest.NewServer(mw(mux))
			defer ts.Close()
			inPath := ts.URL + strings.Replace(tc.prefix, "{"+tc.arg+"}", "%s", 1) + "/export"

			for _, url := range []string{
				fmt.Sprintf(inPath, "globex"),
				ts.URL + "/export?" + tc.arg + "=globex",
			} {
				status, body := postJSON(t, url, "u1", ``)
				e, _ := body["error"].(map[string]any)
				if status != http.StatusForbidden || e["code"] != "AXAG_TENANT_BOUNDARY" {
					t.Fatalf("%s: %d %v, want 403 AXAG_TENANT_BOUNDARY", url, status, body)
				}
				if n := h.calls.Load(); n != 0 {
					t.Fatalf("%s: the handler ran, on tenant %v", url, h.acted.Load())
				}
			}
			// Two values of one tenant name, of which the handler may read
			// either, are refused.
			for _, url := range []string{
				ts.URL + "/export?" + tc.arg + "=acme&" + tc.arg + "=globex",
				fmt.Sprintf(inPath, "acme") + "?" + tc.arg + "=globex",
			} {
				status, body := postJSON(t, url, "u1", ``)
				if e, _ := body["error"].(map[string]any); status != 400 || e["code"] != "AXGATE_INVALID_ARGUMENTS" || h.calls.Load() != 0 {
					t.Fatalf("%s: %d %v, want 400 AXGATE_INVALID_ARGUMENTS", url, status, body)
				}
			}
			// The caller's own tenant passes, from the path and the query.
			for _, url := range []string{fmt.Sprintf(inPath, "acme"), ts.URL + "/export?" + tc.arg + "=acme"} {
				h.calls.Store(0)
				if status, body := postJSON(t, url, "u1", ``); status != 200 || h.calls.Load() != 1 || h.acted.Load() != "acme" {
					t.Fatalf("%s: %d %v, handler ran %d times on %v", url, status, body, h.calls.Load(), h.acted.Load())
				}
			}
		})
	}
}

// A query key that differs from a tenant or parameter name only in case is
// refused: routers that bind query parameters case-insensitively (echo)
// would give the handler ?TENANT_ID=globex as its tenant_id.
func TestMiddlewareQueryKeyFoldingOntoArgumentName(t *testing.T) {
	h := &tenantReader{name: "tenant_id"}
	mux := http.NewServeMux()
	mux.Handle("POST /invoices", h)
	mw := newMiddleware(t, ijsonEnforcer(t), httpgate.WithPrincipal(userHeader), quiet,
		httpgate.WithRoute("POST /invoices", "invoice_list"))
	ts := httptest.NewServer(mw(mux))
	defer ts.Close()
	for _, q := range []string{"TENANT_ID=globex", "Tenant_Id=globex", "LIMIT=100000", "Owner_ID=7"} {
		status, body := postJSON(t, ts.URL+"/invoices?"+q, "u1", `{"tenant_id":"acme"}`)
		e, _ := body["error"].(map[string]any)
		d, _ := e["details"].(map[string]any)
		if status != 400 || e["code"] != "AXGATE_INVALID_ARGUMENTS" || d["reason"] != "ambiguous_keys" {
			t.Fatalf("?%s: %d %v, want 400 ambiguous_keys", q, status, body)
		}
	}
	if n := h.calls.Load(); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}
	// Other query parameters stay the handler's business.
	if status, body := postJSON(t, ts.URL+"/invoices?page=2", "u1", `{"tenant_id":"acme"}`); status != 200 {
		t.Fatalf("%d %v", status, body)
	}
}

// Regression (B2): a route whose path value is neither a parameter of its
// action nor a user or tenant argument name is refused at construction; the
// gates would never see the value ({tid}, {Tenant_Id}).
func TestNewMiddlewareRefusesUncheckedPathValue(t *testing.T) {
	e := noParamsEnforcer(t)
	for _, pattern := range []string{"POST /tenants/{tid}/export", "POST /tenants/{Tenant_Id}/export", "POST /files/{rest...}"} {
		_, err := httpgate.NewMiddleware(e, httpgate.WithPrincipal(userHeader), httpgate.WithRoute(pattern, "invoice_export"))
		if err == nil || !strings.Contains(err.Error(), "no gate would check it") {
			t.Fatalf("%s: %v, want a refusal", pattern, err)
		}
	}
	for _, pattern := range []string{"POST /tenants/{tenant_id}/export", "POST /orgs/{org_id}/export/{$}", "POST /users/{user_id}/export"} {
		if _, err := httpgate.NewMiddleware(e, httpgate.WithPrincipal(userHeader), httpgate.WithRoute(pattern, "invoice_export")); err != nil {
			t.Fatalf("%s: %v", pattern, err)
		}
	}
	// A declared parameter is fine, and the UserArgs of WithAccess count.
	if _, err := httpgate.NewMiddleware(ijsonEnforcer(t), httpgate.WithRoute("GET /invoices/{limit}", "invoice_list")); err != nil {
		t.Fatal(err)
	}
	if _, err := httpgate.NewMiddleware(noParamsEnforcer(t, axgate.WithAccess(gates.AccessOptions{UserArgs: []string{"member"}})),
		httpgate.WithRoute("POST /members/{member}/export", "invoice_export")); err != nil {
		t.Fatal(err)
	}
}

// stripSlashes is what chi's middleware.StripSlashes and echo's
// RemoveTrailingSlash do inside the application's router.
func stripSlashes(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
			r2 := r.Clone(r.Context())
			r2.URL.Path = strings.TrimRight(p, "/")
			r2.URL.RawPath = ""
			next.ServeHTTP(w, r2)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Regression (B3): POST /invoices/ did not match the bound POST /invoices
// and passed through ungated, and a slash-stripping router then ran the
// bound route's handler for tenant globex. A path that names a bound route
// but for a trailing slash gets a 307 to the bound path, as any other
// non-canonical spelling does; neither the chain nor the handler runs.
func TestMiddlewareTrailingSlashTwinRedirects(t *testing.T) {
	var calls atomic.Int32
	var tenant atomic.Value
	mux := http.NewServeMux()
	handler := func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var in struct {
			TenantID string `json:"tenant_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		tenant.Store(in.TenantID)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}
	mux.HandleFunc("POST /invoices", handler)
	mux.HandleFunc("POST /accounts/{owner_id}/close/{$}", handler)
	mux.HandleFunc("GET /invoices", handler) // the application's own, ungated
	var c checked
	mw := newMiddleware(t, ijsonEnforcer(t, c.option()), httpgate.WithPrincipal(userHeader), quiet,
		httpgate.WithRoute("POST /invoices", "invoice_list"),
		httpgate.WithRoute("POST /accounts/{owner_id}/close/{$}", "account_close"))
	ts := httptest.NewServer(mw(stripSlashes(mux)))
	defer ts.Close()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct{ path, location string }{
		{"/invoices/", "/invoices"},
		{"/invoices//", "/invoices"},
		{"/invoices/?limit=5", "/invoices?limit=5"},
		{"/accounts/7/close", "/accounts/7/close/"}, // ServeMux's own redirect, as before
	} {
		req, _ := http.NewRequest("POST", ts.URL+tc.path, strings.NewReader(`{"tenant_id":"globex"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Test-User", "7")
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != tc.location {
			t.Fatalf("POST %s: %d Location %q, want 307 to %s", tc.path, resp.StatusCode, resp.Header.Get("Location"), tc.location)
		}
		if calls.Load() != 0 || c.get() != nil {
			t.Fatalf("POST %s: the handler ran %d times (tenant %v), the chain saw %v", tc.path, calls.Load(), tenant.Load(), c.get())
		}
	}
	// Followed, the redirect reaches the gate, which refuses the other
	// tenant.
	status, body := postJSON(t, ts.URL+"/invoices/", "u1", `{"tenant_id":"globex"}`)
	if e, _ := body["error"].(map[string]any); status != http.StatusForbidden || e["code"] != "AXAG_TENANT_BOUNDARY" || calls.Load() != 0 {
		t.Fatalf("%d %v, handler ran %d times", status, body, calls.Load())
	}
	// Another method on the twin path is the application's route: GET
	// /invoices/ is not redirected (the stripping router serves it).
	resp, err := noFollow.Get(ts.URL + "/invoices/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || calls.Load() != 1 {
		t.Fatalf("GET /invoices/: %d, handler ran %d times", resp.StatusCode, calls.Load())
	}
}

// Regression (B4): a path or query number in a spelling other than the
// canonical one ("1e3", "1000.0", "10000e-1") was read as its value, 1000,
// and passed the user-scope check for caller 1000, while a handler reading
// the text with fmt.Sscanf("%d") acted on account 1. Only the canonical
// spelling is a number; any other stays a string, which names no user (the
// access gate refuses it) and which an integer parameter refuses.
func TestMiddlewarePathNumberCanonicalOnly(t *testing.T) {
	var calls atomic.Int32
	var acted atomic.Int64
	mux := http.NewServeMux()
	handler := func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var id int64
		text := r.PathValue("owner_id")
		if text == "" {
			text = r.URL.Query().Get("owner_id")
		}
		fmt.Sscanf(text, "%d", &id)
		acted.Store(id)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}
	mux.HandleFunc("POST /accounts/{owner_id}/close", handler)
	mux.HandleFunc("POST /close", handler)
	mux.HandleFunc("POST /invoices", handler)
	mw := newMiddleware(t, ijsonEnforcer(t), httpgate.WithPrincipal(userHeader), quiet,
		httpgate.WithRoute("POST /accounts/{owner_id}/close", "account_close"),
		httpgate.WithRoute("POST /close", "account_close"),
		httpgate.WithRoute("POST /invoices", "invoice_list"))
	ts := httptest.NewServer(mw(mux))
	defer ts.Close()
	for _, v := range []string{"1e3", "1E3", "1.0e3", "1000.0", "10000e-1", "01000", "1000.", "+1000", "0x3e8", "1_000"} {
		for _, url := range []string{ts.URL + "/accounts/" + v + "/close", ts.URL + "/close?owner_id=" + strings.ReplaceAll(v, "+", "%2B")} {
			status, body := postJSON(t, url, "1000", ``)
			e, _ := body["error"].(map[string]any)
			if status != 403 || e["code"] != "AXAG_SCOPE_VIOLATION" {
				t.Fatalf("%s: %d %v, want 403 AXAG_SCOPE_VIOLATION", url, status, body)
			}
			if n := calls.Load(); n != 0 {
				t.Fatalf("%s: the handler ran, on account %d", url, acted.Load())
			}
		}
		// A parameter the access gate does not read: the type refuses it.
		status, body := postJSON(t, ts.URL+"/invoices?limit="+strings.ReplaceAll(v, "+", "%2B"), "u1", `{"tenant_id":"acme"}`)
		if e, _ := body["error"].(map[string]any); status != 400 || e["code"] != "AXAG_INVALID_TYPE" {
			t.Fatalf("?limit=%s: %d %v, want 400 AXAG_INVALID_TYPE", v, status, body)
		}
		if n := calls.Load(); n != 0 {
			t.Fatalf("?limit=%s: the handler ran", v)
		}
	}
	for _, tc := range []struct{ user, text string }{{"1000", "1000"}, {"0", "0"}, {"-7", "-7"}} {
		calls.Store(0)
		status, body := postJSON(t, ts.URL+"/accounts/"+tc.text+"/close", tc.user, ``)
		if status != 200 || calls.Load() != 1 || fmt.Sprint(acted.Load()) != tc.text {
			t.Fatalf("%s: %d %v, handler ran %d times on %d", tc.text, status, body, calls.Load(), acted.Load())
		}
	}
}
