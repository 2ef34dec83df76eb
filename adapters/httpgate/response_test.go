package httpgate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// results records the result value each call's chain saw coming back from
// the handler.
type results struct {
	mu   sync.Mutex
	last []any
}

func (r *results) option() axgate.Option {
	return axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		return append(std, middleware.Stage{Name: "test_results", Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
			res, err := next.Invoke(ctx, call)
			r.mu.Lock()
			r.last = append(r.last, res.Value)
			r.mu.Unlock()
			return res, err
		}})
	})
}

func (r *results) get() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.last...)
}

// A response nothing after the tool needs goes to the client as the handler
// wrote it, status and headers included, and the chain sees no result;
// WithResponseBuffering hands it to the chain.
func TestMiddlewareStreamsUnlessAResultIsNeeded(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprint("buffered=", buffered), func(t *testing.T) {
			var rs results
			var opts []httpgate.Option
			if buffered {
				opts = append(opts, httpgate.WithResponseBuffering())
			}
			h, _ := gated(t, []axgate.Option{rs.option()}, opts...)
			r := do(t, h, "POST", "/orders/o-7", `{"quantity":1}`, "X-Test-User", "u1")
			if r.status != http.StatusCreated || r.header.Get("Location") != "/orders/o-7" || r.body["order_id"] != "o-7" {
				t.Fatalf("%d %v %s", r.status, r.header, r.raw)
			}
			got := rs.get()
			if len(got) != 1 {
				t.Fatalf("results %v", got)
			}
			raw, isRaw := got[0].(json.RawMessage)
			switch {
			case buffered && (!isRaw || !strings.Contains(string(raw), `"order_id":"o-7"`)):
				t.Fatalf("buffered: chain saw %#v", got[0])
			case !buffered && got[0] != nil:
				t.Fatalf("streamed: chain saw %#v, want nil", got[0])
			}
		})
	}
}

// A streamed handler can flush (server-sent events, long responses).
func TestMiddlewareStreamedHandlerCanFlush(t *testing.T) {
	enf := enforcer(t)
	h := newMiddleware(t, enf, httpgate.WithRoute("GET /events", "ping"), httpgate.WithPrincipal(userHeader))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f, ok := w.(http.Flusher)
			if !ok {
				t.Error("the handler's writer is not an http.Flusher")
				return
			}
			io.WriteString(w, "data: 1\n\n")
			f.Flush()
		}))
	req := httptest.NewRequest("GET", "/events", nil)
	req.Header.Set("X-Test-User", "u1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 || !rec.Flushed || rec.Body.String() != "data: 1\n\n" {
		t.Fatalf("%d flushed=%v %q", rec.Code, rec.Flushed, rec.Body)
	}
}

// withPostcondition is testdata/tools.json with weather.get declaring the
// postcondition "temperature is plausible".
func withPostcondition(t *testing.T) *manifest.Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, a := range doc["actions"].([]any) {
		if a := a.(map[string]any); a["intent"] == "weather.get" {
			a["postconditions"] = []any{"temperature is plausible"}
		}
	}
	data, _ = json.Marshal(doc)
	m, err := manifest.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A declared postcondition sees the handler's JSON response, and its
// refusal replaces the response: the client never gets what the handler
// wrote.
func TestMiddlewarePostconditionRefusesTheResponse(t *testing.T) {
	enf, err := axgate.New(withPostcondition(t), axgate.WithPostcondition("temperature is plausible",
		func(_ context.Context, _ *middleware.Call, res middleware.Result) error {
			m, _ := res.Value.(map[string]any)
			if temp, ok := m["temp"].(float64); !ok || temp > 60 {
				return fmt.Errorf("temp %v", m["temp"])
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	var temp atomic.Int32
	h := newMiddleware(t, enf, httpgate.WithRoute("GET /weather", "weather.get"), httpgate.WithPrincipal(userHeader), quiet)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Header().Set("X-Handler", "yes")
			fmt.Fprintf(w, `{"city":"Oslo","temp":%d}`, temp.Load())
		}))

	temp.Store(21)
	if r := do(t, h, "GET", "/weather?city=Oslo", "", "X-Test-User", "u1"); r.status != 200 || r.body["temp"] != float64(21) || r.header.Get("X-Handler") != "yes" {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	temp.Store(500)
	r := do(t, h, "GET", "/weather?city=Oslo", "", "X-Test-User", "u1")
	r.wantRefusal(t, axerr.CodePostconditionFailed)
	if strings.Contains(r.raw, "500") || r.header.Get("X-Handler") != "" {
		t.Fatalf("the refused response leaked: %v %s", r.header, r.raw)
	}
}

// With an Idempotency-Key the response is kept, and a retry gets it back
// without the handler running again.
func TestMiddlewareIdempotentReplay(t *testing.T) {
	h, a := gated(t, nil)
	first := do(t, h, "POST", "/orders/o-7", `{"quantity":1}`, "X-Test-User", "u1", "Idempotency-Key", "k-1")
	again := do(t, h, "POST", "/orders/o-7", `{"quantity":1}`, "X-Test-User", "u1", "Idempotency-Key", "k-1")
	if first.status != http.StatusCreated || first.header.Get(httpgate.HeaderReplayed) != "" {
		t.Fatalf("first: %d %v %s", first.status, first.header, first.raw)
	}
	if again.status != 200 || again.header.Get(httpgate.HeaderReplayed) != "true" || again.body["n"] != first.body["n"] {
		t.Fatalf("retry: %d %v %s (first %s)", again.status, again.header, again.raw, first.raw)
	}
	if n := a.calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
}

// A body without a declared length (chunked) is bounded by the limit too.
func TestMiddlewareBodyOfUnknownLength(t *testing.T) {
	h, a := gated(t, nil, httpgate.WithLimits(64, 0))
	send := func(body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/orders/o-1", io.MultiReader(strings.NewReader(body)))
		req.Header.Set("X-Test-User", "u1")
		req.Header.Set("Content-Type", "application/json")
		if req.ContentLength != -1 {
			t.Fatalf("ContentLength = %d, want unknown", req.ContentLength)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := send(`{"quantity":1}`); rec.Code != http.StatusCreated || a.lastBody.Load() != `{"quantity":1}` {
		t.Fatalf("%d %s (handler read %v)", rec.Code, rec.Body, a.lastBody.Load())
	}
	if rec := send(`{"quantity":1,"note":"` + strings.Repeat("x", 100) + `"}`); rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

// Paths that only look like a call route are the mux's business.
func TestToolServerCallRouteEdges(t *testing.T) {
	tool := &spy{}
	h := toolServer(t, tool, nil)
	for _, c := range []struct {
		method, target string
		status         int
	}{
		{"POST", "/tools/get_weather/call", 200},
		{"GET", "/tools/get_weather/call", http.StatusMethodNotAllowed},
		{"POST", "/tools/nope/call", http.StatusNotFound},
		{"POST", "/tools//call", http.StatusTemporaryRedirect},
		{"POST", "/tools/x/get_weather/call", http.StatusNotFound},
	} {
		req := httptest.NewRequest(c.method, c.target, strings.NewReader(`{"city":"Oslo"}`))
		req.Header.Set("X-Test-User", "u1")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.target, rec.Code, rec.Body, c.status)
		}
	}
	if n := tool.calls.Load(); n != 1 {
		t.Fatalf("tool called %d times", n)
	}
}

// Small and large answers both go out with a Content-Length, never chunked.
func TestToolServerContentLength(t *testing.T) {
	for _, size := range []int{10, 5000} {
		ts := httptest.NewServer(toolServer(t, &spy{value: map[string]any{"text": strings.Repeat("x", size)}}, nil))
		req, _ := http.NewRequest("POST", ts.URL+"/tools/ping/call", strings.NewReader(`{}`))
		req.Header.Set("X-Test-User", "u1")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ts.Close()
		if resp.StatusCode != 200 || resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) > 0 {
			t.Fatalf("size %d: %d, Content-Length %d for %d bytes, Transfer-Encoding %v", size, resp.StatusCode, resp.ContentLength, len(body), resp.TransferEncoding)
		}
		if resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("size %d: headers %v", size, resp.Header)
		}
	}
}
