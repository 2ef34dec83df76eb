package httpgate_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
)

// watchedBody is a request body that records whether anyone read it.
type watchedBody struct {
	r    io.Reader
	read *atomic.Bool
}

func (b watchedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.r.Read(p)
}

// The gated routes, the tool server's call endpoint and the human endpoints
// share one request prelude: the same order (trace, authenticate, then the
// body), the same refusals for the same request.
func TestPreludeIsTheSameOnEveryEndpoint(t *testing.T) {
	var s seen
	enf := enforcer(t, axgate.WithTokens(axgate.TokenOptions{Issuer: "test", Audience: "test"}), capture(&s))
	opts := []httpgate.Option{httpgate.WithPrincipal(userHeader), httpgate.WithLimits(256, 0),
		httpgate.WithPropagator(propagation.TraceContext{}), quiet}
	app := http.NewServeMux()
	app.HandleFunc("POST /weather", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "sunny") })
	gate := newMiddleware(t, enf, append(opts, httpgate.WithRoute("POST /weather", "get_weather"))...)(app)
	tools, err := httpgate.NewToolServer(enf, map[string]middleware.Invoker{"get_weather": &spy{}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	human := httpgate.NewHumanHandler(enf, userHeader, opts...)

	type endpoint struct {
		name, target string
		h            http.Handler
		body         string
		chain        bool // the chain runs for an allowed request
	}
	endpoints := []endpoint{
		{"middleware", "/weather", gate, `{"city":"Oslo"}`, true},
		{"tool server", "/tools/get_weather/call", tools, `{"city":"Oslo"}`, true},
		{"confirmations", "/confirmations", human, `{"tool":"get_weather","arguments":{"city":"Oslo"}}`, false},
		{"approvals", "/approvals/some-id", human, `{"approve":false}`, false},
	}
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, ep := range endpoints {
		send := func(user, contentType, body string, header ...string) (response, bool) {
			t.Helper()
			var read atomic.Bool
			req := httptest.NewRequest("POST", ep.target, watchedBody{strings.NewReader(body), &read})
			req.ContentLength = -1 // unknown, so that only reading tells the size
			if user != "" {
				req.Header.Set("X-Test-User", user)
			}
			if contentType != "" {
				req.Header.Set("Content-Type", contentType)
			}
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			rec := httptest.NewRecorder()
			ep.h.ServeHTTP(rec, req)
			res := response{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
			if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
				if err := json.Unmarshal(rec.Body.Bytes(), &res.body); err != nil {
					t.Fatalf("%s: body is not a JSON object: %v\n%s", ep.name, err, res.raw)
				}
			}
			return res, read.Load()
		}
		t.Run(ep.name, func(t *testing.T) {
			// Not authenticated, and a body no endpoint takes: 401, and the
			// body is never read for a caller nobody knows.
			r, read := send("", "text/plain", ep.body)
			r.wantRefusal(t, axerr.CodeUnauthenticated)
			if read {
				t.Fatal("the body was read before the caller was authenticated")
			}
			// Authenticated, a body that is not declared JSON: 415.
			r, _ = send("u1", "text/plain", ep.body)
			r.wantRefusal(t, axerr.CodeUnsupportedMediaType)
			if r.details()["reason"] != string(reasons.UnsupportedMediaType) {
				t.Fatalf("details = %v", r.details())
			}
			// Over the body limit: 413.
			r, _ = send("u1", "application/json", `{"city":"`+strings.Repeat("x", 300)+`"}`)
			r.wantRefusal(t, axerr.CodePayloadTooLarge)
			if !ep.chain {
				return
			}
			// Allowed: the chain runs in the request's trace.
			s = seen{}
			r, _ = send("u1", "application/json", ep.body, "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
			if r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			call, ctx := s.get()
			if call.Tool != "get_weather" || call.Principal.ID != "u1" || string(call.Arguments) != ep.body {
				t.Fatalf("call = %+v", call)
			}
			if got := trace.SpanContextFromContext(ctx).TraceID().String(); got != traceID {
				t.Fatalf("trace id in the chain = %s, want %s", got, traceID)
			}
		})
	}
}
