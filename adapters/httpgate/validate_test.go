package httpgate_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/middleware"
)

// The test criteria 1–11 of the Tool Validation API (seeds/002) against
// POST /tools/{name}/validate. Each server is built with a spy tool and an
// authentication hook that rejects everyone, so every test also shows that
// validation is not gated by authentication and never reaches a tool.

// validationServer returns a tool server whose tools are spies and whose
// PrincipalFunc rejects every request.
func validationServer(t *testing.T, opts ...httpgate.Option) (http.Handler, *spy) {
	t.Helper()
	s := &spy{}
	srv, err := httpgate.NewToolServer(enforcer(t), map[string]middleware.Invoker{
		"get_weather": s, "ping": s, "order_update": s,
	}, append([]httpgate.Option{httpgate.WithPrincipal(rejectAll)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n := s.calls.Load(); n != 0 {
			t.Errorf("the tool was called %d times by validation", n)
		}
	})
	return srv, s
}

func errorsOf(t *testing.T, r response) []map[string]any {
	t.Helper()
	list, ok := r.body["errors"].([]any)
	if !ok || len(list) == 0 {
		t.Fatalf("no errors in %s", r.raw)
	}
	out := make([]map[string]any, len(list))
	for i, e := range list {
		out[i] = e.(map[string]any)
	}
	return out
}

func TestValidateCriterion01ValidInput(t *testing.T) {
	h, _ := validationServer(t)
	r := do(t, h, "POST", "/tools/get_weather/validate", `{"city":"Oslo","count":3}`)
	if r.status != 200 || r.body["valid"] != true {
		t.Fatalf("%d %s", r.status, r.raw)
	}
}

func TestValidateCriterion02MissingRequiredField(t *testing.T) {
	h, _ := validationServer(t)
	r := do(t, h, "POST", "/tools/get_weather/validate", `{"count":3}`)
	if r.status != 200 || r.body["valid"] != false {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	errs := errorsOf(t, r)
	if len(errs) != 1 || errs[0]["keyword"] != "required" || errs[0]["path"] != "/city" || errs[0]["message"] == "" {
		t.Fatalf("errors = %v", errs)
	}
}

func TestValidateCriterion03WrongType(t *testing.T) {
	h, _ := validationServer(t)
	r := do(t, h, "POST", "/tools/get_weather/validate", `{"city":"Oslo","count":"three"}`)
	errs := errorsOf(t, r)
	if r.status != 200 || r.body["valid"] != false || len(errs) != 1 || errs[0]["keyword"] != "type" || errs[0]["path"] != "/count" {
		t.Fatalf("%d %s", r.status, r.raw)
	}
}

func TestValidateCriterion04MultipleViolations(t *testing.T) {
	h, _ := validationServer(t)
	r := do(t, h, "POST", "/tools/get_weather/validate", `{"count":0,"units":"kelvin"}`)
	if r.status != 200 || r.body["valid"] != false {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	got := map[string]string{}
	for _, e := range errorsOf(t, r) {
		got[e["path"].(string)] = e["keyword"].(string)
	}
	want := map[string]string{"/city": "required", "/count": "minimum", "/units": "enum"}
	if len(got) != len(want) {
		t.Fatalf("errors = %v, want %v", got, want)
	}
	for p, k := range want {
		if got[p] != k {
			t.Fatalf("errors = %v, want %v", got, want)
		}
	}
	// The order is the validator's own traversal: the same request twice
	// gives the same list.
	again := do(t, h, "POST", "/tools/get_weather/validate", `{"count":0,"units":"kelvin"}`)
	if again.raw != r.raw {
		t.Fatalf("order not stable:\n%s\n%s", r.raw, again.raw)
	}
}

func TestValidateCriterion05ToolNotFound(t *testing.T) {
	h, _ := validationServer(t)
	r := do(t, h, "POST", "/tools/nope/validate", `{}`)
	if r.status != 404 || strings.TrimSpace(r.raw) != `{"error":"Tool not found: nope"}` {
		t.Fatalf("%d %s", r.status, r.raw)
	}
}

func TestValidateCriterion06BodyNotJSON(t *testing.T) {
	h, _ := validationServer(t)
	for _, body := range []string{`{"city":`, `city=Oslo`, ``} {
		r := do(t, h, "POST", "/tools/get_weather/validate", body)
		if r.status != 400 || r.body["valid"] != false {
			t.Fatalf("%q: %d %s", body, r.status, r.raw)
		}
		errs := errorsOf(t, r)
		msg, _ := errs[0]["message"].(string)
		if len(errs) != 1 || errs[0]["path"] != "" || errs[0]["keyword"] != "format" || !strings.HasPrefix(msg, "Invalid JSON: ") {
			t.Fatalf("%q: errors = %v", body, errs)
		}
	}
}

func TestValidateCriterion07ToolWithoutInputSchema(t *testing.T) {
	h, _ := validationServer(t)
	for _, body := range []string{`{}`, `{"anything":[1,2,3]}`, `{"x":{"y":null}}`} {
		r := do(t, h, "POST", "/tools/ping/validate", body)
		if r.status != 200 || strings.TrimSpace(r.raw) != `{"valid":true}` {
			t.Fatalf("%q: %d %s", body, r.status, r.raw)
		}
	}
}

func TestValidateCriterion08ExecutionDisabled(t *testing.T) {
	h, _ := validationServer(t, httpgate.WithCallsDisabled())
	r := do(t, h, "POST", "/tools/get_weather/validate", `{"city":"Oslo"}`)
	if r.status != 200 || r.body["valid"] != true {
		t.Fatalf("validate: %d %s", r.status, r.raw)
	}
	// The switch does work on the call endpoint.
	if c := do(t, h, "POST", "/tools/get_weather/call", `{"city":"Oslo"}`, "X-Test-User", "u1"); c.status != 403 {
		t.Fatalf("call with execution disabled: %d %s", c.status, c.raw)
	}
}

func TestValidateCriterion09AuthHookRejects(t *testing.T) {
	h, _ := validationServer(t) // its PrincipalFunc rejects everyone
	r := do(t, h, "POST", "/tools/get_weather/validate", `{"city":"Oslo"}`)
	if r.status != 200 || r.body["valid"] != true {
		t.Fatalf("validate: %d %s", r.status, r.raw)
	}
	// The same hook does refuse the call endpoint.
	c := do(t, h, "POST", "/tools/get_weather/call", `{"city":"Oslo"}`)
	c.wantRefusal(t, "AXGATE_UNAUTHENTICATED")
}

func TestValidateCriterion10HandlerNeverInvoked(t *testing.T) {
	h, s := validationServer(t)
	for _, c := range []struct{ tool, body string }{
		{"get_weather", `{"city":"Oslo"}`},
		{"get_weather", `{"count":"x"}`},
		{"get_weather", `{"count":0,"units":"kelvin"}`},
		{"nope", `{}`},
		{"get_weather", `not json`},
		{"ping", `{"a":1}`},
		{"order_update", `{"order_id":"o1","quantity":2}`},
	} {
		do(t, h, "POST", "/tools/"+c.tool+"/validate", c.body, "X-Test-User", "u1")
	}
	if n := s.calls.Load(); n != 0 {
		t.Fatalf("tool called %d times", n)
	}
}

func TestValidateCriterion11NoErrorsKeyWhenValid(t *testing.T) {
	h, _ := validationServer(t)
	r := do(t, h, "POST", "/tools/order_update/validate", `{"order_id":"o1","quantity":2}`)
	if r.status != 200 || strings.TrimSpace(r.raw) != `{"valid":true}` {
		t.Fatalf("%d %q", r.status, r.raw)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q", ct)
	}
}

// shortBody declares a Content-Length and then ends early, as a client that
// sends slowly (or never finishes) looks to the server while it waits.
type shortBody struct{ r io.Reader }

func (b shortBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// Regression (security review): the validation endpoint, which nobody has
// to authenticate for, reserved the whole declared Content-Length (up to
// 1 MiB) before the first byte arrived, so a few slow clients could hold a
// lot of memory. Memory now follows the bytes that arrive.
func TestValidateMemoryFollowsTheBytesThatArrive(t *testing.T) {
	h, _ := validationServer(t)
	const declared = httpgate.DefaultMaxBodyBytes
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	req := httptest.NewRequest("POST", "/tools/get_weather/validate", shortBody{strings.NewReader(`{"city":`)})
	req.ContentLength = declared
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("%d %s, want 400 for a body that ended early", rec.Code, rec.Body)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > declared/2 {
		t.Fatalf("serving a 8-byte body that declared %d bytes allocated %d bytes", declared, grew)
	}

	// A large body that arrives in full is read byte for byte.
	big := `{"city":"` + strings.Repeat("x", 300<<10) + `"}`
	req = httptest.NewRequest("POST", "/tools/get_weather/validate", strings.NewReader(big))
	req.Header.Set("Content-Type", "application/json")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"valid":true`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	// And one over the limit is still refused.
	req = httptest.NewRequest("POST", "/tools/get_weather/validate", strings.NewReader(`{"city":"`+strings.Repeat("x", declared)+`"}`))
	req.Header.Set("Content-Type", "application/json")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}
