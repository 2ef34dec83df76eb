package httpgate_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
)

// app is an existing application: its handlers know nothing of axgate.
type app struct {
	mux   *http.ServeMux
	calls atomic.Int32
	// lastBody is the body the order handler read, byte for byte.
	lastBody atomic.Value
}

func newApp() *app {
	a := &app{mux: http.NewServeMux()}
	a.mux.HandleFunc("POST /orders/{order_id}", func(w http.ResponseWriter, r *http.Request) {
		a.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		a.lastBody.Store(string(body))
		p, _ := httpgate.PrincipalFrom(r.Context())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/orders/"+r.PathValue("order_id"))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order_id":%q,"by":%q,"n":%d}`, r.PathValue("order_id"), p.ID, a.calls.Load())
	})
	a.mux.HandleFunc("GET /weather", func(w http.ResponseWriter, r *http.Request) {
		a.calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"city":%q,"temp":21}`, r.URL.Query().Get("city"))
	})
	a.mux.HandleFunc("POST /rpc", func(w http.ResponseWriter, r *http.Request) {
		a.calls.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "pong")
	})
	a.mux.HandleFunc("GET /broken", func(w http.ResponseWriter, r *http.Request) {
		a.calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"oops":"database down"}`)
	})
	a.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})
	a.mux.HandleFunc("POST /admin/wipe", func(w http.ResponseWriter, r *http.Request) {
		a.calls.Add(1)
		io.WriteString(w, "wiped")
	})
	return a
}

var routes = map[string]string{
	"POST /orders/{order_id}": "order_update",
	"GET /weather":            "weather.get", // by intent
	"GET /broken":             "get_weather",
}

func gated(t *testing.T, enfOpts []axgate.Option, opts ...httpgate.Option) (http.Handler, *app) {
	t.Helper()
	a := newApp()
	mw := newMiddleware(t, enforcer(t, enfOpts...), append([]httpgate.Option{
		httpgate.WithPrincipal(userHeader), httpgate.WithRoutes(routes), quiet,
	}, opts...)...)
	return mw(a.mux), a
}

func TestMiddlewareHappyPath(t *testing.T) {
	var s seen
	h, a := gated(t, []axgate.Option{capture(&s)})
	body := `{ "quantity": 2,  "note":"leave at door" }`
	r := do(t, h, "POST", "/orders/o-7?gift=true&tags=a&tags=b&utm=x", body, "X-Test-User", "u1")
	if r.status != http.StatusCreated || r.header.Get("Location") != "/orders/o-7" {
		t.Fatalf("%d %v %s", r.status, r.header, r.raw)
	}
	if r.body["order_id"] != "o-7" || r.body["by"] != "u1" {
		t.Fatalf("handler saw %s", r.raw)
	}
	// The body's own arguments, canonical (RFC 8785); the path and query
	// values stay where they were.
	if got, want := a.lastBody.Load(), `{"note":"leave at door","quantity":2}`; got != want {
		t.Fatalf("handler read %q, want %q", got, want)
	}
	call, _ := s.get()
	var args map[string]any
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		t.Fatalf("arguments %s: %v", call.Arguments, err)
	}
	want := `map[gift:true note:leave at door order_id:o-7 quantity:2 tags:[a b]]`
	if fmt.Sprint(args) != want {
		t.Fatalf("arguments = %v, want %s (utm is not a parameter)", args, want)
	}
	if call.Principal.ID != "u1" || call.Tool != "order_update" {
		t.Fatalf("call = %+v", call)
	}
}

func TestMiddlewareQueryArguments(t *testing.T) {
	h, a := gated(t, nil)
	cases := []struct {
		target string
		code   axerr.Code // "" = allowed
		path   string
	}{
		{"/weather?city=Oslo&count=3&units=metric", "", ""},
		{"/weather?city=Oslo&count=3.5", axerr.CodeInvalidType, "/count"},
		{"/weather?city=Oslo&count=abc", axerr.CodeInvalidType, "/count"},
		{"/weather?city=Oslo&count=0", axerr.CodeOutOfRange, "/count"},
		{"/weather?city=Oslo&units=kelvin", axerr.CodeInvalidEnum, "/units"},
		{"/weather?count=2", axerr.CodeMissingParam, "/city"},
		{"/weather?city=Oslo&city=Bergen", axerr.CodeInvalidArguments, ""},
		{"/weather?city=%ff", axerr.CodeInvalidArguments, ""},
	}
	for _, c := range cases {
		before := a.calls.Load()
		r := do(t, h, "GET", c.target, "", "X-Test-User", "u1")
		if c.code == "" {
			if r.status != 200 || r.body["city"] != "Oslo" {
				t.Fatalf("%s: %d %s", c.target, r.status, r.raw)
			}
			continue
		}
		r.wantRefusal(t, c.code)
		if a.calls.Load() != before {
			t.Fatalf("%s: handler called on a refusal", c.target)
		}
		if c.path != "" {
			vs, _ := r.details()["violations"].([]any)
			if len(vs) == 0 || vs[0].(map[string]any)["path"] != c.path {
				t.Fatalf("%s: violations %v, want path %s", c.target, vs, c.path)
			}
		}
	}
}

func TestMiddlewareBodyRefusals(t *testing.T) {
	h, a := gated(t, nil, httpgate.WithLimits(256, 4))
	cases := []struct {
		name, target, body string
		code               axerr.Code
	}{
		{"missing parameter", "/orders/o-1", `{}`, axerr.CodeMissingParam},
		{"wrong type", "/orders/o-1", `{"quantity":"two"}`, axerr.CodeInvalidType},
		{"path value in body differs", "/orders/o-1", `{"order_id":"o-2","quantity":1}`, axerr.CodeInvalidArguments},
		{"path and query differ", "/orders/o-1?order_id=o-2", `{"quantity":1}`, axerr.CodeInvalidArguments},
		{"unknown parameter", "/orders/o-1", `{"quantity":1,"qty":1}`, axerr.CodeUnknownParam},
		{"not JSON", "/orders/o-1", `quantity=1`, axerr.CodeInvalidArguments},
		{"array", "/orders/o-1", `[1]`, axerr.CodeInvalidArguments},
		{"repeated key", "/orders/o-1", `{"quantity":1,"quantity":2}`, axerr.CodeInvalidArguments},
		{"too deep", "/orders/o-1", `{"quantity":1,"note":[[[[["x"]]]]]}`, axerr.CodeInvalidArguments},
		{"too large", "/orders/o-1", `{"quantity":1,"note":"` + strings.Repeat("x", 300) + `"}`, axerr.CodePayloadTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, h, "POST", c.target, c.body, "X-Test-User", "u1")
			r.wantRefusal(t, c.code)
		})
	}
	if n := a.calls.Load(); n != 0 {
		t.Fatalf("handler called %d times", n)
	}
	// The same path value in the body is no conflict.
	if r := do(t, h, "POST", "/orders/o-1", `{"order_id":"o-1","quantity":1}`, "X-Test-User", "u1"); r.status != 201 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
}

func TestMiddlewareUnauthenticated(t *testing.T) {
	h, a := gated(t, nil)
	r := do(t, h, "POST", "/orders/o-1", `{"quantity":1}`)
	r.wantRefusal(t, axerr.CodeUnauthenticated)
	// The PrincipalFunc's reason is the service's own words: the caller
	// is told it (before, only "the request is not authenticated").
	if msg := r.body["error"].(map[string]any)["message"]; msg != "the request is not authenticated: no X-Test-User header" {
		t.Fatalf("the authenticator's reason is not surfaced: %s", r.raw)
	}

	// Without WithPrincipal the middleware fails closed.
	closed := newMiddleware(t, enforcer(t), httpgate.WithRoutes(routes))(a.mux)
	do(t, closed, "GET", "/weather?city=Oslo", "", "X-Test-User", "u1").wantRefusal(t, axerr.CodeUnauthenticated)
	if n := a.calls.Load(); n != 0 {
		t.Fatalf("handler called %d times", n)
	}
}

func TestMiddlewareUnboundRoutesPassThrough(t *testing.T) {
	h, _ := gated(t, nil)
	if r := do(t, h, "GET", "/health", ""); r.status != 200 || r.raw != "ok" {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	// A bound path with another method is not the bound route.
	if r := do(t, h, "GET", "/orders/o-1", ""); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	strict, _ := gated(t, nil, httpgate.WithRequireIntent())
	do(t, strict, "GET", "/health", "").wantRefusal(t, axerr.CodeIntentNotFound)
}

func TestMiddlewareIntentHeader(t *testing.T) {
	h, a := gated(t, nil, httpgate.WithIntentHeader())
	// On a bound route the header may only repeat the route's tool.
	do(t, h, "GET", "/weather?city=Oslo", "", "X-Test-User", "u1", "X-AXAG-Intent", "system.ping").wantRefusal(t, axerr.CodeIntentNotFound)
	do(t, h, "GET", "/weather?city=Oslo", "", "X-Test-User", "u1", "X-AXAG-Intent", "nope.nothing").wantRefusal(t, axerr.CodeIntentNotFound)
	if r := do(t, h, "GET", "/weather?city=Oslo", "", "X-Test-User", "u1", "X-AXAG-Intent", "weather.get"); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	// Off the bound routes the header chooses nothing: refused, not gated
	// by the named action's rules.
	do(t, h, "POST", "/rpc", `{}`, "X-Test-User", "u1", "X-AXAG-Intent", "system.ping").wantRefusal(t, axerr.CodeIntentNotFound)
	if n := a.calls.Load(); n != 1 {
		t.Fatalf("handlers called %d times, want 1", n)
	}
	// Without the option the header is ignored.
	plain, _ := gated(t, nil)
	if r := do(t, plain, "POST", "/rpc", `{}`, "X-AXAG-Intent", "nope.nothing"); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
}

// Regression (security review): an agent must not pick which action's rules
// guard a handler it was never bound to. POST /admin/wipe with
// X-AXAG-Intent: system.ping ran the wipe after system.ping's checks.
func TestMiddlewareIntentHeaderCannotGuardUnboundHandler(t *testing.T) {
	for _, opts := range [][]httpgate.Option{
		{httpgate.WithIntentHeader(), httpgate.WithRequireIntent()},
		{httpgate.WithIntentHeader()},
		{httpgate.WithIntentHeaderOn("POST /rpc"), httpgate.WithRequireIntent()},
	} {
		h, a := gated(t, nil, opts...)
		do(t, h, "POST", "/admin/wipe", `{}`, "X-Test-User", "u1", "X-AXAG-Intent", "system.ping").wantRefusal(t, axerr.CodeIntentNotFound)
		if n := a.calls.Load(); n != 0 {
			t.Fatalf("the wipe handler ran %d times", n)
		}
	}
	// With no route bound at all the header still chooses nothing.
	a := newApp()
	bare := newMiddleware(t, enforcer(t), httpgate.WithPrincipal(userHeader), httpgate.WithIntentHeader(), quiet)(a.mux)
	do(t, bare, "POST", "/admin/wipe", `{}`, "X-Test-User", "u1", "X-AXAG-Intent", "system.ping").wantRefusal(t, axerr.CodeIntentNotFound)
	if n := a.calls.Load(); n != 0 {
		t.Fatalf("the wipe handler ran %d times", n)
	}
}

func TestMiddlewareIntentDispatchEndpoint(t *testing.T) {
	var s seen
	h, a := gated(t, []axgate.Option{capture(&s)}, httpgate.WithIntentHeaderOn("POST /rpc"))
	r := do(t, h, "POST", "/rpc", `{}`, "X-Test-User", "u1", "X-AXAG-Intent", "system.ping")
	if r.status != 200 || r.raw != "pong" || a.calls.Load() != 1 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	if call, _ := s.get(); call.Tool != "ping" {
		t.Fatalf("gated as %q, want ping", call.Tool)
	}
	do(t, h, "POST", "/rpc", `{}`, "X-Test-User", "u1", "X-AXAG-Intent", "nope.nothing").wantRefusal(t, axerr.CodeIntentNotFound)
	do(t, h, "POST", "/rpc", `{"city":"Oslo","x":1}`, "X-Test-User", "u1", "X-AXAG-Intent", "get_weather").wantRefusal(t, axerr.CodeUnknownParam)
	// A dispatch endpoint without the header is refused, not passed through.
	do(t, h, "POST", "/rpc", `{}`, "X-Test-User", "u1").wantRefusal(t, axerr.CodeIntentNotFound)
	if n := a.calls.Load(); n != 1 {
		t.Fatalf("handlers called %d times, want 1", n)
	}
	// A dispatch pattern conflicting with a bound route fails at start-up.
	if _, err := httpgate.NewMiddleware(enforcer(t), httpgate.WithRoute("POST /rpc", "ping"), httpgate.WithIntentHeaderOn("POST /rpc")); err == nil {
		t.Fatal("a dispatch pattern equal to a bound route was accepted")
	}
}

// Regression (security review): a bound route spelled in a form that is not
// canonical panicked (ServeMux's redirect wrote into a nil header map). It
// gets the redirect, and neither the chain nor the handler runs.
func TestMiddlewareNonCanonicalPathRedirects(t *testing.T) {
	var s seen
	h, a := gated(t, []axgate.Option{capture(&s)})
	for _, target := range []string{"/orders/./o-1", "/orders//o-1", "/x/../orders/o-1", "/./weather?city=Oslo"} {
		method := "POST"
		if strings.Contains(target, "weather") {
			method = "GET"
		}
		r := do(t, h, method, target, `{"quantity":1}`, "X-Test-User", "u1")
		if r.status != http.StatusMovedPermanently && r.status != http.StatusTemporaryRedirect && r.status != http.StatusPermanentRedirect {
			t.Fatalf("%s %s: %d %s, want ServeMux's redirect", method, target, r.status, r.raw)
		}
		if loc := r.header.Get("Location"); !strings.HasPrefix(loc, "/orders/o-1") && !strings.HasPrefix(loc, "/weather") {
			t.Fatalf("%s: Location %q", target, loc)
		}
	}
	if call, _ := s.get(); call.Tool != "" {
		t.Fatalf("the chain ran for a redirect: %+v", call)
	}
	if n := a.calls.Load(); n != 0 {
		t.Fatalf("handler called %d times", n)
	}
}

func TestMiddlewareCredentialsAndTrace(t *testing.T) {
	var s seen
	h, _ := gated(t, []axgate.Option{capture(&s)}, httpgate.WithPropagator(propagation.TraceContext{}))
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := do(t, h, "GET", "/weather?city=Oslo", "",
		"X-Test-User", "u1",
		"X-AXAG-Confirmation", "c.t.s",
		"X-AXAG-Approval", "a1.x.y, a2.x.y",
		"X-AXAG-Approval", "a3.x.y",
		"Idempotency-Key", "key-1",
		"X-AXAG-Tenant", "acme",
		"traceparent", "00-"+traceID+"-00f067aa0ba902b7-01",
	)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	call, ctx := s.get()
	cr := call.Credentials
	if cr.Confirmation != "c.t.s" || fmt.Sprint(cr.Approvals) != "[a1.x.y a2.x.y a3.x.y]" || cr.IdempotencyKey != "key-1" || cr.ClaimedTenant != "acme" {
		t.Fatalf("credentials = %+v", cr)
	}
	if got := trace.SpanContextFromContext(ctx).TraceID().String(); got != traceID {
		t.Fatalf("trace id in the chain = %s, want %s", got, traceID)
	}
}

func TestMiddlewareHandlerFailurePassesThrough(t *testing.T) {
	h, _ := gated(t, nil)
	r := do(t, h, "GET", "/broken?city=Oslo", "", "X-Test-User", "u1")
	if r.status != http.StatusServiceUnavailable || r.body["oops"] != "database down" {
		t.Fatalf("%d %s", r.status, r.raw)
	}
}

// Every refusal code maps to its status, the envelope and its headers, and
// the handler is not called, whichever gate refused.
func TestMiddlewareEveryRefusalCode(t *testing.T) {
	for _, code := range axerr.Codes() {
		t.Run(string(code), func(t *testing.T) {
			e := axerr.New(code, "refused for the test").With("reason", "test")
			if code == axerr.CodeRateLimited {
				e.RetryAfter = 2500 * time.Millisecond
			}
			h, a := gated(t, []axgate.Option{refuseWith(e)})
			r := do(t, h, "GET", "/weather?city=Oslo", "", "X-Test-User", "u1")
			r.wantRefusal(t, code)
			if a.calls.Load() != 0 {
				t.Fatal("handler called")
			}
			if r.details()["gate"] != "test_refusal" || r.details()["reason"] != "test" {
				t.Fatalf("details = %v", r.details())
			}
			if code == axerr.CodeRateLimited {
				if r.header.Get("Retry-After") != "3" || r.details()["retry_after"] != float64(3) {
					t.Fatalf("Retry-After = %q, details %v", r.header.Get("Retry-After"), r.details())
				}
			} else if r.header.Get("Retry-After") != "" {
				t.Fatalf("Retry-After on %s", code)
			}
		})
	}
}

func TestMiddlewareConfigurationErrors(t *testing.T) {
	enf := enforcer(t)
	for _, opts := range [][]httpgate.Option{
		{httpgate.WithRoute("POST /x", "no_such_tool")},
		{httpgate.WithRoute("POST /x/{", "ping")},
		{httpgate.WithRoute("POST /x", "ping"), httpgate.WithRoute("POST /x", "get_weather")},
		{httpgate.WithLimits(-1, 0)},
	} {
		if _, err := httpgate.NewMiddleware(enf, opts...); err == nil {
			t.Fatalf("no error for %d options", len(opts))
		}
	}
	if httpgate.MustMiddleware(enf, httpgate.WithRoute("GET /x", "ping")) == nil {
		t.Fatal("MustMiddleware returned nil for a good route")
	}
	_, want := httpgate.NewMiddleware(enf, httpgate.WithRoute("GET /x", "no_such_tool"))
	defer func() {
		p := recover()
		if err, ok := p.(error); !ok || err.Error() != want.Error() {
			t.Fatalf("MustMiddleware panicked with %v, want NewMiddleware's error %v", p, want)
		}
	}()
	httpgate.MustMiddleware(enf, httpgate.WithRoute("GET /x", "no_such_tool"))
}
