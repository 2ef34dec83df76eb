package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axgate/axgate/internal/otelcollector"
)

// lockedBuffer is the shop's output, written by run while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestOTLPToCollector runs the shop as its command does (run, with -otlp
// pointing at a real OpenTelemetry Collector that the test starts), makes an
// allowed call and a refused one over HTTP with a W3C traceparent, stops the
// shop (which flushes its spans), and finds both execute_tool spans, their
// AXAG attributes and gate events, and the continued trace in the
// collector's debug output. It skips, saying how to get a collector, when
// AXGATE_OTELCOL names none (.ci/otelcol.sh builds one).
func TestOTLPToCollector(t *testing.T) {
	col := otelcollector.Start(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-redis", "", "-otlp", "http://" + col.Endpoint()}, out)
	}()
	vars := map[string]string{}
	deadline := time.Now().Add(30 * time.Second)
	for vars["SHOP"] == "" {
		select {
		case err := <-done:
			t.Fatalf("the shop stopped before serving: %v\n%s", err, out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shop did not print its address within 30s:\n%s", out)
		}
		if o := out.String(); strings.Contains(o, "export SHOP=") {
			for _, m := range regexp.MustCompile(`export (\w+)='([^']*)'`).FindAllStringSubmatch(o, -1) {
				vars[m[1]] = m[2]
			}
		}
	}

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	call := func(tool, args string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, vars["SHOP"]+"/tools/"+tool+"/call", strings.NewReader(args))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+vars[tokenVar("alice")])
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := call("product_search", `{"query":"lamp"}`); st != http.StatusOK {
		t.Fatalf("allowed call: status %d", st)
	}
	if st := call("product_search", `{"query":"lamp","limit":500}`); st != http.StatusBadRequest {
		t.Fatalf("refused call: status %d", st)
	}

	// Stopping the shop shuts its tracer provider down, which exports what
	// is still batched.
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}

	want := []string{
		"Name           : execute_tool product_search",
		"Trace ID       : " + traceID,
		"Parent ID      : 00f067aa0ba902b7",
		"service.name: Str(axgate-shop)",
		"gen_ai.operation.name: Str(execute_tool)",
		"gen_ai.tool.name: Str(product_search)",
		"axag.intent: Str(product.search)",
		"axag.action_type: Str(read)",
		"axag.risk_level: Str(none)",
		"axag.decision: Str(allow)",
		"axag.decision: Str(deny)",
		"axag.error.code: Str(AXAG_OUT_OF_RANGE)",
		"axag.gate: Str(params)",
		"axag.gates.passed: Slice(", // the default summary event of the gates passed
		"axag.gate.outcome: Str(deny)",
		"Status code    : Error",
	}
	if !col.WaitFor(30*time.Second, want...) {
		got := col.Output()
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("collector output lacks %q", w)
			}
		}
		t.Logf("collector output:\n%s", got)
	}
	if got := col.Output(); strings.Contains(got, `"limit":500`) || strings.Contains(got, "Str(lamp)") {
		t.Errorf("an argument value reached the collector:\n%s", got)
	}
}

// -otlp takes a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT does; anything else
// is refused at start rather than exporting nowhere.
func TestOTLPFlag(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	for _, bad := range []string{"localhost:4318", "grpc://localhost:4317", "http://"} {
		if _, err := tracerProvider(context.Background(), bad); err == nil {
			t.Errorf("-otlp %q accepted", bad)
		}
	}
	tp, err := tracerProvider(context.Background(), "")
	if err != nil || tp != nil {
		t.Fatalf("no -otlp and no OTEL_EXPORTER_OTLP_*: got %v, %v; want no export", tp, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	tp, err = tracerProvider(context.Background(), "")
	if err != nil || tp == nil {
		t.Fatalf("OTEL_EXPORTER_OTLP_ENDPOINT set: got %v, %v; want an exporting provider", tp, err)
	}
	_ = tp.Shutdown(context.Background())
}
