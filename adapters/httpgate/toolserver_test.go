package httpgate_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

func toolServer(t *testing.T, tool *spy, enfOpts []axgate.Option, opts ...httpgate.Option) http.Handler {
	t.Helper()
	srv, err := httpgate.NewToolServer(enforcer(t, enfOpts...), map[string]middleware.Invoker{
		"get_weather": tool, "ping": tool, "order.update": tool,
	}, append([]httpgate.Option{httpgate.WithPrincipal(userHeader), quiet}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestToolServerDiscovery(t *testing.T) {
	h := toolServer(t, &spy{}, nil, httpgate.WithPrincipal(rejectAll))
	r := do(t, h, "GET", "/tools", "")
	tools, _ := r.body["tools"].([]any)
	if r.status != 200 || len(tools) != 3 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	first := tools[0].(map[string]any)
	schema, _ := first["inputSchema"].(map[string]any)
	safety, _ := first["axag"].(map[string]any)
	if first["name"] != "get_weather" || first["description"] == "" || schema["type"] != "object" || safety["intent"] != "weather.get" {
		t.Fatalf("first tool = %v", first)
	}
	one := do(t, h, "GET", "/tools/order_update", "")
	if one.status != 200 || one.body["name"] != "order_update" {
		t.Fatalf("%d %s", one.status, one.raw)
	}
	nf := do(t, h, "GET", "/tools/nope", "")
	if nf.status != 404 || strings.TrimSpace(nf.raw) != `{"error":"Tool not found: nope"}` {
		t.Fatalf("%d %s", nf.status, nf.raw)
	}
}

func TestToolServerOnlyServesToolsWithHandlers(t *testing.T) {
	srv, err := httpgate.NewToolServer(enforcer(t), map[string]middleware.Invoker{"ping": &spy{}}, httpgate.WithPrincipal(userHeader))
	if err != nil {
		t.Fatal(err)
	}
	r := do(t, srv, "GET", "/tools", "")
	if tools, _ := r.body["tools"].([]any); len(tools) != 1 {
		t.Fatalf("%s", r.raw)
	}
	if r := do(t, srv, "GET", "/tools/get_weather", ""); r.status != 404 {
		t.Fatalf("%d", r.status)
	}
	do(t, srv, "POST", "/tools/get_weather/call", `{"city":"Oslo"}`, "X-Test-User", "u1").wantRefusal(t, axerr.CodeIntentNotFound)

	for _, hs := range []map[string]middleware.Invoker{
		{"no_such_tool": &spy{}},
		{"ping": nil},
		{"ping": &spy{}, "system.ping": &spy{}},
	} {
		if _, err := httpgate.NewToolServer(enforcer(t), hs); err == nil {
			t.Fatalf("no error for %v", hs)
		}
	}
}

func TestToolServerCall(t *testing.T) {
	var s seen
	tool := &spy{}
	h := toolServer(t, tool, []axgate.Option{capture(&s)})
	r := do(t, h, "POST", "/tools/get_weather/call", `{"city":"Oslo","count":2}`, "X-Test-User", "u1", "X-AXAG-Approval", "a,b")
	if r.status != 200 || tool.calls.Load() != 1 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	res, _ := r.body["result"].(map[string]any)
	echo, _ := res["echo"].(map[string]any)
	if echo["city"] != "Oslo" || echo["count"] != float64(2) {
		t.Fatalf("result = %s", r.raw)
	}
	call, _ := s.get()
	if call.Principal.ID != "u1" || len(call.Credentials.Approvals) != 2 {
		t.Fatalf("call = %+v", call)
	}
	// An empty body is an empty argument object.
	if r := do(t, h, "POST", "/tools/ping/call", "", "X-Test-User", "u1"); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
}

func TestToolServerCallRefusals(t *testing.T) {
	tool := &spy{}
	h := toolServer(t, tool, nil, httpgate.WithLimits(128, 0))
	cases := []struct {
		name, tool, body string
		header           []string
		code             axerr.Code
	}{
		{"unauthenticated", "get_weather", `{"city":"Oslo"}`, nil, axerr.CodeUnauthenticated},
		{"unknown tool", "nope", `{}`, []string{"X-Test-User", "u1"}, axerr.CodeIntentNotFound},
		{"missing parameter", "get_weather", `{}`, []string{"X-Test-User", "u1"}, axerr.CodeMissingParam},
		{"out of range", "order_update", `{"order_id":"o","quantity":100}`, []string{"X-Test-User", "u1"}, axerr.CodeOutOfRange},
		{"not an object", "get_weather", `"Oslo"`, []string{"X-Test-User", "u1"}, axerr.CodeInvalidArguments},
		{"too large", "get_weather", `{"city":"` + strings.Repeat("O", 200) + `"}`, []string{"X-Test-User", "u1"}, axerr.CodePayloadTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			do(t, h, "POST", "/tools/"+c.tool+"/call", c.body, c.header...).wantRefusal(t, c.code)
		})
	}
	if n := tool.calls.Load(); n != 0 {
		t.Fatalf("tool called %d times", n)
	}
}

func TestToolServerToolErrors(t *testing.T) {
	// A plain error becomes AXGATE_TOOL_FAILED without its text.
	failing := &spy{err: errors.New("connect to 10.0.0.7:5432: refused")}
	r := do(t, toolServer(t, failing, nil), "POST", "/tools/ping/call", `{}`, "X-Test-User", "u1")
	r.wantRefusal(t, axerr.CodeToolFailed)
	if strings.Contains(r.raw, "10.0.0.7") {
		t.Fatalf("cause leaked: %s", r.raw)
	}
	// An *axerr.Error from the tool passes through.
	refusing := &spy{err: axerr.New(axerr.CodePreconditionFailed, "the cart is empty").With("failed_precondition", "cart is not empty")}
	r = do(t, toolServer(t, refusing, nil), "POST", "/tools/ping/call", `{}`, "X-Test-User", "u1")
	r.wantRefusal(t, axerr.CodePreconditionFailed)
	if r.details()["failed_precondition"] != "cart is not empty" {
		t.Fatalf("details = %v", r.details())
	}
}

func TestToolServerEveryRefusalCode(t *testing.T) {
	for _, code := range axerr.Codes() {
		t.Run(string(code), func(t *testing.T) {
			e := axerr.New(code, "refused for the test")
			if code == axerr.CodeRateLimited || code == axerr.CodeStoreUnavailable {
				e.RetryAfter = time.Second
			}
			tool := &spy{}
			r := do(t, toolServer(t, tool, []axgate.Option{refuseWith(e)}), "POST", "/tools/get_weather/call", `{"city":"Oslo"}`, "X-Test-User", "u1")
			r.wantRefusal(t, code)
			if tool.calls.Load() != 0 {
				t.Fatal("tool called")
			}
			if e.RetryAfter > 0 && r.header.Get("Retry-After") != "1" {
				t.Fatalf("Retry-After = %q", r.header.Get("Retry-After"))
			}
		})
	}
}

// One round trip over a real listener with the standard client.
func TestToolServerRealListener(t *testing.T) {
	tool := &spy{value: map[string]any{"temp": 21}}
	ts := httptest.NewServer(toolServer(t, tool, nil))
	defer ts.Close()
	client := &http.Client{Timeout: 10 * time.Second}

	post := func(path, body string, user string) (*http.Response, []byte) {
		req, err := http.NewRequest("POST", ts.URL+path, bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if user != "" {
			req.Header.Set("X-Test-User", user)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	resp, body := post("/tools/get_weather/call", `{"city":"Oslo"}`, "u1")
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"result":{"temp":21}}` {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	resp, body = post("/tools/get_weather/call", `{"city":"Oslo"}`, "")
	var env axerr.Envelope
	if err := json.Unmarshal(body, &env); err != nil || resp.StatusCode != 401 || env.Error.Code != axerr.CodeUnauthenticated || resp.Header.Get("WWW-Authenticate") != "" ||
		env.Error.Message != "the request is not authenticated: no X-Test-User header" {
		t.Fatalf("%d %s %v", resp.StatusCode, body, err)
	}
	resp, body = post("/tools/get_weather/validate", `{"city":1}`, "")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"keyword":"type"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if tool.calls.Load() != 1 {
		t.Fatalf("tool called %d times", tool.calls.Load())
	}
}

// TestToolServerRefusesAWrappedTool: the tool server wraps the bare tool
// itself; a tool the enforcer already wrapped (which would run every gate
// twice, so that a confirmed call finds its token spent by the first run)
// is refused at construction, naming the handler.
func TestToolServerRefusesAWrappedTool(t *testing.T) {
	enf := enforcer(t)
	_, err := httpgate.NewToolServer(enf, map[string]middleware.Invoker{"get_weather": enf.Wrap(&spy{})}, httpgate.WithPrincipal(userHeader), quiet)
	if !errors.Is(err, axgate.ErrWrapped) || !strings.Contains(err.Error(), `"get_weather"`) {
		t.Fatalf("NewToolServer with a wrapped tool: %v; want axgate.ErrWrapped naming the handler", err)
	}
}
