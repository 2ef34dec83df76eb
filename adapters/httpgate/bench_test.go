package httpgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/middleware"
)

// benchResult is what the benchmark tool answers: a small read result, about
// the shape of a search hit list.
var benchResult = map[string]any{
	"city": "Oslo", "temperature": 4.5, "units": "metric",
	"days": []any{map[string]any{"day": 1, "high": 6, "low": 1}, map[string]any{"day": 2, "high": 7, "low": 2}},
}

var benchTool = middleware.InvokerFunc(func(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	if _, err := call.Args(); err != nil {
		return middleware.Result{}, err
	}
	return middleware.Result{Value: benchResult}, nil
})

// sink is a ResponseWriter that keeps nothing but the status, reusing its
// header map, so that the benchmark measures the server and not a recorder.
type sink struct {
	h      http.Header
	status int
	n      int
}

func (s *sink) Header() http.Header         { return s.h }
func (s *sink) WriteHeader(code int)        { s.status = code }
func (s *sink) Write(b []byte) (int, error) { s.n += len(b); return len(b), nil }

func (s *sink) reset() { clear(s.h); s.status, s.n = 0, 0 }

// serve runs one request against h and fails unless it answers 200.
func serve(b *testing.B, h http.Handler, w *sink, target string, body []byte, header http.Header) {
	w.reset()
	r, err := http.NewRequest("POST", target, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	r.Header = header
	h.ServeHTTP(w, r)
	if w.status != 0 && w.status != http.StatusOK {
		b.Fatalf("status %d", w.status)
	}
}

// bareCall is the tool served without axgate, the way examples/shop's
// -unsafe-bare baseline does: read the body, call the tool, encode
// {"result": …}.
func bareCall(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpgate.DefaultMaxBodyBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	res, err := benchTool.Invoke(r.Context(), middleware.NewCall("get_weather", body, middleware.Principal{ID: "u1", Tenant: "acme"}))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"result": res.Value})
}

// BenchmarkToolServerRead is one read call (POST /tools/get_weather/call):
//
//   - bare: the tool behind a plain handler, no axgate;
//   - chain: the enforcer's chain and the tool, called directly (the core's
//     share, no HTTP);
//   - toolserver: the whole ToolServer (authentication hook, body, chain,
//     tool, response).
//
// toolserver − chain − bare is roughly the adapter's own cost.
func BenchmarkToolServerRead(b *testing.B) {
	body := []byte(`{"city":"Oslo","units":"metric"}`)
	header := http.Header{"Content-Type": {"application/json"}, "X-Test-User": {"u1"}}
	enf := enforcer(b)

	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		h := http.HandlerFunc(bareCall)
		w := &sink{h: http.Header{}}
		for b.Loop() {
			serve(b, h, w, "/tools/get_weather/call", body, header)
		}
	})
	b.Run("chain", func(b *testing.B) {
		b.ReportAllocs()
		chain := enf.Wrap(benchTool)
		ctx := context.Background()
		for b.Loop() {
			call := &middleware.Call{Tool: "get_weather", Action: enf.Manifest().Tool("get_weather"), Arguments: body, Principal: middleware.Principal{ID: "u1", Tenant: "acme", Roles: []string{"member"}}}
			if _, err := chain.Invoke(ctx, call); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("toolserver", func(b *testing.B) {
		b.ReportAllocs()
		srv, err := httpgate.NewToolServer(enf, map[string]middleware.Invoker{"get_weather": benchTool}, httpgate.WithPrincipal(userHeader))
		if err != nil {
			b.Fatal(err)
		}
		w := &sink{h: http.Header{}}
		for b.Loop() {
			serve(b, srv, w, "/tools/get_weather/call", body, header)
		}
	})
}

// BenchmarkMiddlewareRead is one read request through Middleware in front of
// an existing JSON handler, against the handler alone.
func BenchmarkMiddlewareRead(b *testing.B) {
	body := []byte(`{"city":"Oslo","units":"metric"}`)
	header := http.Header{"Content-Type": {"application/json"}, "X-Test-User": {"u1"}}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var args map[string]any
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(benchResult)
	})
	enf := enforcer(b)
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", handler},
		{"middleware", newMiddleware(b, enf, httpgate.WithRoute("POST /weather", "weather.get"), httpgate.WithPrincipal(userHeader))(handler)},
		{"middleware_pathvalue", newMiddleware(b, enf, httpgate.WithRoute("POST /weather/{city}", "weather.get"), httpgate.WithPrincipal(userHeader))(handler)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			w := &sink{h: http.Header{}}
			target := "/weather"
			if c.name == "middleware_pathvalue" {
				target = "/weather/Oslo"
			}
			for b.Loop() {
				serve(b, c.h, w, target, body, header)
			}
		})
	}
}

// BenchmarkToolServerWrite is one write call (order_update, declared
// idempotent: false) without an idempotency key: the duplicate-call detector
// looks every call up, and since the arguments repeat, warns on each.
func BenchmarkToolServerWrite(b *testing.B) {
	body := []byte(`{"order_id":"o-7","quantity":2}`)
	header := http.Header{"Content-Type": {"application/json"}, "X-Test-User": {"u1"}}
	srv, err := httpgate.NewToolServer(enforcer(b), map[string]middleware.Invoker{"order_update": benchTool}, httpgate.WithPrincipal(userHeader))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	w := &sink{h: http.Header{}}
	for b.Loop() {
		serve(b, srv, w, "/tools/order_update/call", body, header)
	}
}
