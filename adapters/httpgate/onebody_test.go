package httpgate_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
)

// formApp is an application whose order handler answers every method and
// reads its arguments the way many handlers do: r.FormValue, which takes a
// urlencoded body when the request says it is one.
type formApp struct {
	mu    sync.Mutex
	runs  []formRun
	mux   *http.ServeMux
	calls int
}

type formRun struct {
	method, quantity, body string
	contentLength          int64
	headerLength           string
}

func newFormApp() *formApp {
	a := &formApp{mux: http.NewServeMux()}
	handle := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		run := formRun{method: r.Method, quantity: r.FormValue("quantity"), body: string(body),
			contentLength: r.ContentLength, headerLength: r.Header.Get("Content-Length")}
		a.mu.Lock()
		a.runs = append(a.runs, run)
		a.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
	a.mux.HandleFunc("/orders/{order_id}", handle) // every method
	a.mux.HandleFunc("/orders", handle)
	a.mux.HandleFunc("/weather", handle)
	a.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	return a
}

func (a *formApp) ran() []formRun {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]formRun(nil), a.runs...)
}

// listen serves the gated form app on a real listener.
func listen(t *testing.T, enfOpts []axgate.Option, opts ...httpgate.Option) (string, *formApp) {
	t.Helper()
	a := newFormApp()
	mw := newMiddleware(t, enforcer(t, enfOpts...), append([]httpgate.Option{
		httpgate.WithPrincipal(userHeader), quiet,
		httpgate.WithRoute("POST /orders/{order_id}", "order_update"),
		httpgate.WithRoute("POST /orders", "order_update"),
		httpgate.WithRoute("GET /weather", "weather.get"),
	}, opts...)...)
	srv := httptest.NewServer(mw(a.mux))
	t.Cleanup(srv.Close)
	return srv.URL, a
}

// send makes a request over the network; header is name, value pairs (a
// value per pair, so a name may repeat).
func send(t *testing.T, method, url string, body io.Reader, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Test-User", "u1")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	res := response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && method != "HEAD" {
		if err := json.Unmarshal(raw, &res.body); err != nil {
			t.Fatalf("%s %s: body is not a JSON object: %v\n%s", method, url, err, raw)
		}
	}
	return res
}

// Regression (issue 13): a body that is valid JSON and a valid form at once
// passed the schema as JSON (quantity 1) while the handler read the form
// (quantity 500). A body on a gated route must now be declared JSON.
func TestMiddlewareRefusesBodiesThatAreNotJSON(t *testing.T) {
	base, a := listen(t, nil)
	twoFaced := `{"note":"&quantity=500&","quantity":1}`
	r := send(t, "POST", base+"/orders/o-1", strings.NewReader(twoFaced), "Content-Type", "application/x-www-form-urlencoded")
	r.wantRefusal(t, axerr.CodeUnsupportedMediaType)
	if r.details()["reason"] != string(reasons.UnsupportedMediaType) {
		t.Fatalf("details = %v", r.details())
	}
	if runs := a.ran(); len(runs) != 0 {
		t.Fatalf("the handler ran: %+v", runs)
	}

	refused := [][]string{
		{},                   // no Content-Type at all
		{"Content-Type", ""}, // an empty one
		{"Content-Type", "text/plain"},
		{"Content-Type", "text/plain; charset=utf-8"},
		{"Content-Type", "multipart/form-data; boundary=x"},
		{"Content-Type", "application/json; charset=iso-8859-1"},
		{"Content-Type", "application/json; charset=utf-16"},
		{"Content-Type", "application/jsonx"},
		{"Content-Type", "application/+json"},
		{"Content-Type", "application/json;;"},
		{"Content-Type", "application/json", "Content-Type", "application/x-www-form-urlencoded"},
	}
	body := `{"quantity":1}`
	for _, h := range refused {
		send(t, "POST", base+"/orders/o-1", strings.NewReader(body), h...).wantRefusal(t, axerr.CodeUnsupportedMediaType)
		// Of unknown length (chunked): refused once it turns out not empty.
		send(t, "POST", base+"/orders/o-1", io.MultiReader(strings.NewReader(body)), h...).wantRefusal(t, axerr.CodeUnsupportedMediaType)
	}
	if runs := a.ran(); len(runs) != 0 {
		t.Fatalf("the handler ran: %+v", runs)
	}

	accepted := []string{
		"application/json",
		"Application/JSON; charset=UTF-8",
		"application/json;charset=\"utf-8\"",
		"application/merge-patch+json",
		"application/vnd.api+json; charset=utf-8; ext=x",
	}
	for _, ct := range accepted {
		if r := send(t, "POST", base+"/orders/o-1", strings.NewReader(body), "Content-Type", ct); r.status != http.StatusNoContent {
			t.Fatalf("%q: %d %s", ct, r.status, r.raw)
		}
	}
	// No body, no media type needed (the arguments come from the query).
	if r := send(t, "GET", base+"/weather?city=Oslo", nil, "Content-Type", "text/plain"); r.status != http.StatusNoContent {
		t.Fatalf("GET without a body: %d %s", r.status, r.raw)
	}
	if n := len(a.ran()); n != len(accepted)+1 {
		t.Fatalf("handler ran %d times, want %d", n, len(accepted)+1)
	}
}

// The tool server's call and validation endpoints read bodies too: same rule.
func TestToolServerRefusesBodiesThatAreNotJSON(t *testing.T) {
	tool := &spy{}
	srv := httptest.NewServer(toolServer(t, tool, nil))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/tools/get_weather/call", "/tools/get_weather/validate"} {
		for _, h := range [][]string{{}, {"Content-Type", "application/x-www-form-urlencoded"}, {"Content-Type", "text/plain"}} {
			r := send(t, "POST", srv.URL+path, strings.NewReader(`{"city":"Oslo"}`), h...)
			r.wantRefusal(t, axerr.CodeUnsupportedMediaType)
			if r.details()["reason"] != string(reasons.UnsupportedMediaType) {
				t.Fatalf("details = %v", r.details())
			}
		}
		if r := send(t, "POST", srv.URL+path, strings.NewReader(`{"city":"Oslo"}`), "Content-Type", "application/json"); r.status != http.StatusOK {
			t.Fatalf("%s as JSON: %d %s", path, r.status, r.raw)
		}
	}
	if n := tool.calls.Load(); n != 1 {
		t.Fatalf("tool called %d times, want 1", n)
	}
}

// Regression (issue 13): the handler read the body as sent, so a parser
// other than the gate's (one that reads numbers or escapes differently, or
// keeps the last of two keys) could act on another value than the one
// checked. The handler now reads the RFC 8785 encoding of the checked
// arguments that came from the body.
func TestMiddlewareHandsTheHandlerCanonicalArguments(t *testing.T) {
	var s seen
	base, a := listen(t, []axgate.Option{capture(&s)})
	cases := []struct {
		name, target, body, want string
	}{
		{"body only", "/orders",
			"{ \"quantity\" : 9.0E0 ,\n \"order_id\":\"o-1\", \"note\":\"caf\\u00e9 \\u0026 co\" }",
			`{"note":"café & co","order_id":"o-1","quantity":9}`},
		{"path values stay in the path", "/orders/o-2?gift=true",
			`{"tags":["b","a"],   "quantity":1e1}`,
			`{"quantity":10,"tags":["b","a"]}`},
	}
	for _, c := range cases {
		r := send(t, "POST", base+c.target, strings.NewReader(c.body), "Content-Type", "application/json")
		if r.status != http.StatusNoContent {
			t.Fatalf("%s: %d %s", c.name, r.status, r.raw)
		}
		runs := a.ran()
		got := runs[len(runs)-1]
		if got.body != c.want {
			t.Fatalf("%s: handler read %s, want %s", c.name, got.body, c.want)
		}
		if got.contentLength != int64(len(c.want)) || got.headerLength != strconv.Itoa(len(c.want)) {
			t.Fatalf("%s: ContentLength %d, Content-Length %q, want %d", c.name, got.contentLength, got.headerLength, len(c.want))
		}
		// What the handler reads decodes to what the gates checked.
		call, _ := s.get()
		var checked, handed map[string]any
		if err := json.Unmarshal(call.Arguments, &checked); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(got.body), &handed); err != nil {
			t.Fatal(err)
		}
		for k, v := range handed {
			if !reflect.DeepEqual(checked[k], v) {
				t.Fatalf("%s: handler has %s=%v, the gates checked %v", c.name, k, v, checked[k])
			}
		}
	}
	// A body sent chunked reaches the handler with its length known.
	if r := send(t, "POST", base+"/orders", io.MultiReader(strings.NewReader(` {"quantity":3,"order_id":"o-3"} `)), "Content-Type", "application/json"); r.status != http.StatusNoContent {
		t.Fatalf("chunked: %d %s", r.status, r.raw)
	}
	if runs := a.ran(); runs[len(runs)-1].body != `{"order_id":"o-3","quantity":3}` || runs[len(runs)-1].contentLength != 31 {
		t.Fatalf("chunked: handler read %+v", runs[len(runs)-1])
	}
	// A request without a body gets none.
	if r := send(t, "GET", base+"/weather?city=Oslo", nil); r.status != http.StatusNoContent {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	if runs := a.ran(); runs[len(runs)-1].body != "" || runs[len(runs)-1].contentLength != 0 {
		t.Fatalf("handler read %+v", runs[len(runs)-1])
	}
}

// Regression (issue 13): PUT and PATCH reached a handler bound for POST with
// no check at all. A method not bound on a bound path is now 405 with Allow.
func TestMiddlewareRefusesMethodsNotBound(t *testing.T) {
	base, a := listen(t, nil)
	for _, method := range []string{"PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "GET"} {
		var body io.Reader
		if method != "HEAD" {
			body = strings.NewReader(`{"quantity":500}`)
		}
		r := send(t, method, base+"/orders/o-1", body, "Content-Type", "application/json")
		if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "POST" {
			t.Fatalf("%s: %d Allow %q %s", method, r.status, r.header.Get("Allow"), r.raw)
		}
		if method == "HEAD" {
			continue // no body to read
		}
		r.wantRefusal(t, axerr.CodeMethodNotAllowed)
		if d := r.details(); d["reason"] != string(reasons.MethodNotAllowed) || !reflect.DeepEqual(d["allowed_methods"], []any{"POST"}) {
			t.Fatalf("%s: details %v", method, d)
		}
	}
	// A GET route answers HEAD (ServeMux's rule), gated as GET; others are
	// refused with both in Allow.
	if r := send(t, "POST", base+"/weather?city=Oslo", nil); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST /weather: %d Allow %q", r.status, r.header.Get("Allow"))
	}
	if runs := a.ran(); len(runs) != 0 {
		t.Fatalf("the handler ran unchecked: %+v", runs)
	}
	// The bound method is gated as before, and a path that is not bound
	// passes through.
	if r := send(t, "POST", base+"/orders/o-1", strings.NewReader(`{"quantity":500}`), "Content-Type", "application/json"); r.status != http.StatusBadRequest {
		t.Fatalf("POST out of range: %d %s", r.status, r.raw)
	}
	if r := send(t, "GET", base+"/health", nil); r.status != http.StatusOK || r.raw != "ok" {
		t.Fatalf("GET /health: %d %s", r.status, r.raw)
	}
}

// WithPassThroughMethods lets the named methods (a CORS preflight) reach the
// handler unchecked; the others stay refused, and the intent header still
// cannot pick a tool for them.
func TestMiddlewarePassThroughMethods(t *testing.T) {
	base, a := listen(t, nil, httpgate.WithPassThroughMethods("OPTIONS"), httpgate.WithRequireIntent(), httpgate.WithIntentHeader())
	if r := send(t, "OPTIONS", base+"/orders/o-1", nil); r.status != http.StatusNoContent {
		t.Fatalf("OPTIONS: %d %s", r.status, r.raw)
	}
	if runs := a.ran(); len(runs) != 1 || runs[0].method != "OPTIONS" {
		t.Fatalf("runs = %+v", runs)
	}
	send(t, "PUT", base+"/orders/o-1", strings.NewReader(`{"quantity":1}`), "Content-Type", "application/json").wantRefusal(t, axerr.CodeMethodNotAllowed)
	send(t, "OPTIONS", base+"/orders/o-1", nil, httpgate.HeaderIntent, "order.update").wantRefusal(t, axerr.CodeIntentNotFound)
	if n := len(a.ran()); n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
	if _, err := httpgate.NewMiddleware(enforcer(t), httpgate.WithPassThroughMethods("")); err == nil {
		t.Fatal("an empty method was accepted")
	}
}
