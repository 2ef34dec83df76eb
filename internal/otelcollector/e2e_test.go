package otelcollector_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/otelcollector"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// observeManifest has a read action every standard gate lets through for
// any authenticated caller, and a write action with a required parameter.
const observeManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "product.search", "entity": "product", "action_type": "read", "description": "Search products",
     "required_parameters": [{"name": "query", "type": "string", "description": "text"}],
     "risk_level": "none", "idempotent": true, "scope": "global"},
    {"intent": "cart.add_item", "entity": "cart", "action_type": "write", "description": "Add to cart",
     "required_parameters": [{"name": "product_id", "type": "string", "description": "id"}],
     "risk_level": "low", "idempotent": true, "scope": "global"}
  ]
}`

var okTool = middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
	return middleware.Result{Value: map[string]any{"items": []any{}}}, nil
})

// toolServer is a minimal HTTP tool server: POST /tools/{name} with the
// arguments as the body, the caller in X-User, a W3C traceparent continued.
func toolServer(e *axgate.Enforcer) http.Handler {
	prop := propagation.TraceContext{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tools/{name}", func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		call := middleware.NewCall(r.PathValue("name"), body, middleware.Principal{ID: r.Header.Get("X-User")})
		res, err := e.Invoke(ctx, call, okTool)
		w.Header().Set("Content-Type", "application/json")
		if ae, ok := axerr.As(err); ok {
			w.WriteHeader(ae.HTTPStatus())
			_ = json.NewEncoder(w).Encode(ae.Envelope())
			return
		}
		_ = json.NewEncoder(w).Encode(res.Value)
	})
	return mux
}

// TestCollectorEndToEnd exports the spans of an HTTP tool server over
// OTLP to a real OpenTelemetry Collector and finds them in its debug output.
// It skips when no collector binary is configured (see .ci/otelcol.sh).
func TestCollectorEndToEnd(t *testing.T) {
	col := otelcollector.Start(t)

	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpoint(col.Endpoint()), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("axgate-e2e"))))
	defer tp.Shutdown(context.Background())

	m, err := manifest.Parse([]byte(observeManifest))
	if err != nil {
		t.Fatal(err)
	}
	e, err := axgate.New(m, axgate.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	srv := httptest.NewServer(toolServer(e))
	defer srv.Close()

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	post := func(tool, args string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/tools/"+tool, strings.NewReader(args))
		req.Header.Set("X-User", "u1")
		req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post("product_search", `{"query":"shoes"}`); st != http.StatusOK {
		t.Fatalf("allowed call: status %d", st)
	}
	if st := post("cart_add_item", `{}`); st != http.StatusBadRequest {
		t.Fatalf("refused call: status %d", st)
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatalf("exporting to the collector: %v", err)
	}

	want := []string{
		"Name           : execute_tool product_search",
		"Name           : execute_tool cart_add_item",
		"Trace ID       : " + traceID,
		"Parent ID      : 00f067aa0ba902b7",
		"gen_ai.operation.name: Str(execute_tool)",
		"axag.decision: Str(allow)",
		"axag.decision: Str(deny)",
		"axag.error.code: Str(AXAG_MISSING_PARAM)",
		"axag.gate: Str(params)",
		"Status code    : Error",
		"service.name: Str(axgate-e2e)",
	}
	if !col.WaitFor(30*time.Second, want...) {
		out := col.Output()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("collector output lacks %q", w)
			}
		}
		t.Logf("collector output:\n%s", out)
	}
}
