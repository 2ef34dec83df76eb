package httpgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// ijsonManifest has a tenant-scoped read whose caller may send undeclared
// arguments, and a user-scoped write keyed by a numeric account owner.
const ijsonManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "invoice.list", "entity": "invoice", "action_type": "read", "operation_id": "invoice_list",
     "description": "List the invoices of a tenant", "risk_level": "none", "idempotent": true, "scope": "tenant",
     "optional_parameters": [{"name": "tenant_id", "type": "string", "description": "Tenant"},
                             {"name": "limit", "type": "integer", "description": "Page size"}]},
    {"intent": "account.close", "entity": "account", "action_type": "write", "operation_id": "account_close",
     "description": "Close an account", "risk_level": "low", "idempotent": true, "scope": "user",
     "required_parameters": [{"name": "owner_id", "type": "integer", "description": "Owner of the account"}],
     "optional_parameters": [{"name": "reason", "type": "string", "description": "Why"}]}
  ]
}`

// bigUser is a caller whose id a double cannot hold: 1234567890123456768
// and 1234567890123456800 are one double.
const bigUser = "1234567890123456768"

// checked records the argument value the gates checked, from a stage after
// every standard gate.
type checked struct {
	mu    sync.Mutex
	value any
}

func (c *checked) option() axgate.Option {
	return axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		return append(std, middleware.Stage{Name: "test_checked", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
			v, err := call.Value()
			if err != nil {
				return middleware.Result{}, err
			}
			c.mu.Lock()
			c.value = v
			c.mu.Unlock()
			return next.Invoke(ctx, call)
		}})
	})
}

func (c *checked) get() any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.value
}

func ijsonEnforcer(t *testing.T, opts ...axgate.Option) *axgate.Enforcer {
	t.Helper()
	m, err := manifest.Parse([]byte(ijsonManifest))
	if err != nil {
		t.Fatal(err)
	}
	e, err := axgate.New(m, append([]axgate.Option{axgate.WithUnknownParams()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// ijsonCases are argument documents every adapter must refuse before a tool
// runs, with the code and reason of the refusal.
var ijsonCases = []struct {
	name, tool, body, user string
	status                 int
	code, reason, path     string
}{
	{"case-folded tenant key", "invoice_list", `{"tenant_id":"acme","TENANT_ID":"globex"}`, "u1", 400, "AXGATE_INVALID_ARGUMENTS", "ambiguous_keys", "/TENANT_ID"},
	{"kelvin sign key", "invoice_list", `{"tenant_id":"acme","filter":{"kind":"x","\u212aIND":"y"}}`, "u1", 400, "AXGATE_INVALID_ARGUMENTS", "ambiguous_keys", "/filter/\u212aIND"},
	{"owner id above 2^53", "account_close", `{"owner_id":1234567890123456800}`, bigUser, 400, "AXAG_INVALID_TYPE", "number_not_interoperable", "/owner_id"},
	{"rounding decimal", "invoice_list", `{"tenant_id":"acme","limit":10.000000000000001}`, "u1", 400, "AXAG_INVALID_TYPE", "number_not_interoperable", "/limit"},
	{"wide object", "invoice_list", `{"tenant_id":"acme","x":` + wide(1001) + `}`, "u1", 400, "AXGATE_INVALID_ARGUMENTS", "too_many_members", "/x"},
}

func wide(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":0`)
	}
	b.WriteByte('}')
	return b.String()
}

// postJSON posts body to url over a real connection and decodes the answer.
func postJSON(t *testing.T, url, user, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Test-User", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %d, answer is not JSON: %s", url, resp.StatusCode, raw)
	}
	return resp.StatusCode, v
}

func assertRefusal(t *testing.T, status int, body map[string]any, wantStatus int, code, reason, path string) {
	t.Helper()
	e, _ := body["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	vs, _ := d["violations"].([]any)
	var gotPath any
	if len(vs) == 1 {
		gotPath = vs[0].(map[string]any)["path"]
	}
	if status != wantStatus || e["code"] != code || d["reason"] != reason || gotPath != path {
		t.Fatalf("%d %v; want %d %s reason %s at %q", status, body, wantStatus, code, reason, path)
	}
}

// TestToolServerIJSON: the tool server refuses what is not I-JSON, and the
// tool runs with exactly the value the gates checked.
func TestToolServerIJSON(t *testing.T) {
	tool := &spy{}
	var c checked
	srv, err := httpgate.NewToolServer(ijsonEnforcer(t, c.option()), map[string]middleware.Invoker{
		"invoice_list": tool, "account_close": tool,
	}, httpgate.WithPrincipal(userHeader), quiet)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	for _, tc := range ijsonCases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := postJSON(t, ts.URL+"/tools/"+tc.tool+"/call", tc.user, tc.body)
			assertRefusal(t, status, body, tc.status, tc.code, tc.reason, tc.path)
			if n := tool.calls.Load(); n != 0 {
				t.Fatalf("the tool ran %d times", n)
			}
		})
	}
	// An accepted call: the tool's arguments decode to what was checked.
	body := `{"owner_id": 9007199254740991, "reason": "moving", "Note": 0.1}`
	status, res := postJSON(t, ts.URL+"/tools/account_close/call", "9007199254740991", body)
	if status != 200 {
		t.Fatalf("%d %v", status, res)
	}
	last := tool.last.Load()
	got, err := last.Value()
	if err != nil || !reflect.DeepEqual(got, c.get()) || !sameNumbers(t, last.Arguments, c.get()) {
		t.Fatalf("the tool got %s (%v), the gates checked %v", last.Arguments, err, c.get())
	}
}

// TestMiddlewareIJSON: Middleware refuses what is not I-JSON, in the body
// and in path values and query parameters coerced to numbers, and the
// handler never runs.
func TestMiddlewareIJSON(t *testing.T) {
	var c checked
	var calls atomic.Int32
	var lastBody atomic.Value
	mux := http.NewServeMux()
	handler := func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		lastBody.Store(b)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}
	mux.HandleFunc("POST /invoices", handler)
	mux.HandleFunc("POST /accounts/{owner_id}/close", handler)
	mw := newMiddleware(t, ijsonEnforcer(t, c.option()), httpgate.WithPrincipal(userHeader), quiet,
		httpgate.WithRoute("POST /invoices", "invoice_list"),
		httpgate.WithRoute("POST /accounts/{owner_id}/close", "account_close"))
	ts := httptest.NewServer(mw(mux))
	defer ts.Close()

	for _, tc := range ijsonCases {
		t.Run(tc.name, func(t *testing.T) {
			url, in := ts.URL+"/invoices", tc.body
			if tc.tool == "account_close" {
				// The owner comes from the path here.
				url, in = ts.URL+"/accounts/1234567890123456800/close", ``
			}
			status, body := postJSON(t, url, tc.user, in)
			assertRefusal(t, status, body, tc.status, tc.code, tc.reason, tc.path)
			if n := calls.Load(); n != 0 {
				t.Fatalf("the handler ran %d times", n)
			}
		})
	}
	// Numbers coerced from the query get the same rule, also as array items.
	status, body := postJSON(t, ts.URL+"/invoices?limit=9007199254740993", "u1", `{"tenant_id":"acme"}`)
	assertRefusal(t, status, body, 400, "AXAG_INVALID_TYPE", "number_not_interoperable", "/limit")
	status, body = postJSON(t, ts.URL+"/accounts/1e20/close", bigUser, ``)
	assertRefusal(t, status, body, 400, "AXAG_INVALID_TYPE", "number_not_interoperable", "/owner_id")
	if n := calls.Load(); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}

	// Accepted: what the handler reads decodes to what was checked.
	in := `{"tenant_id":"acme","limit":25,"Note":0.1}`
	status, body = postJSON(t, ts.URL+"/invoices", "u1", in)
	if status != 200 || calls.Load() != 1 {
		t.Fatalf("%d %v", status, body)
	}
	var got any
	if err := json.Unmarshal(lastBody.Load().([]byte), &got); err != nil || !reflect.DeepEqual(got, c.get()) {
		t.Fatalf("the handler read %s, the gates checked %v", lastBody.Load(), c.get())
	}
	sameNumbers(t, lastBody.Load().([]byte), c.get())
	status, body = postJSON(t, ts.URL+"/accounts/9007199254740991/close", "9007199254740991", ``)
	if status != 200 || calls.Load() != 2 {
		t.Fatalf("%d %v", status, body)
	}
}

// sameNumbers reports whether every number of raw, read with its exact
// text, is the double the gates checked at the same place: a decoder that
// keeps big integers exact reads what the gates read.
func sameNumbers(t *testing.T, raw []byte, checked any) bool {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	var walk func(a, b any) bool
	walk = func(a, b any) bool {
		switch a := a.(type) {
		case map[string]any:
			m, ok := b.(map[string]any)
			if !ok || len(m) != len(a) {
				return false
			}
			for k, x := range a {
				if !walk(x, m[k]) {
					return false
				}
			}
			return true
		case []any:
			s, ok := b.([]any)
			if !ok || len(s) != len(a) {
				return false
			}
			for i := range a {
				if !walk(a[i], s[i]) {
					return false
				}
			}
			return true
		case json.Number:
			f, ok := b.(float64)
			if !ok {
				return false
			}
			if i, err := a.Int64(); err == nil {
				return float64(i) == f && int64(f) == i
			}
			g, err := a.Float64()
			return err == nil && g == f
		}
		return reflect.DeepEqual(a, b)
	}
	if !walk(v, checked) {
		t.Errorf("%s does not read as %v", raw, checked)
		return false
	}
	return true
}
