package gateway_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// spans records the attributes of every span the chain starts.
type spans struct {
	tracenoop.TracerProvider
	mu    sync.Mutex
	attrs map[attribute.Key]string
}

func (s *spans) Tracer(string, ...trace.TracerOption) trace.Tracer { return tracer{s: s} }

type tracer struct {
	tracenoop.Tracer
	s *spans
}

func (t tracer) Start(ctx context.Context, _ string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	sp := span{s: t.s}
	return trace.ContextWithSpan(ctx, sp), sp
}

type span struct {
	tracenoop.Span
	s *spans
}

func (span) IsRecording() bool { return true }

func (sp span) SetAttributes(kv ...attribute.KeyValue) {
	sp.s.mu.Lock()
	defer sp.s.mu.Unlock()
	for _, a := range kv {
		sp.s.attrs[a.Key] = a.Value.Emit()
	}
}

// TestSpanAttributes: the span of a forwarded call carries the MCP method
// and the client's session id (OpenTelemetry's MCP conventions).
func TestSpanAttributes(t *testing.T) {
	t.Parallel()
	_, upURL := httpUpstream(t)
	m, err := manifest.Parse(manifestFor(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	tp := &spans{attrs: map[attribute.Key]string{}}
	enf, err := axgate.New(m, axgate.WithTelemetry(middleware.TelemetryConfig{TracerProvider: tp}))
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	g, err := gateway.New(enf, gateway.Upstream{URL: upURL}, gateway.WithPrincipal(func(context.Context, *mcp.CallToolRequest) (middleware.Principal, error) {
		return principals["alice-token"], nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	cs := connect(t, serve(t, g), "", nil)
	if res := call(t, cs, "read_note", map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("read: %s", text(res))
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if got := tp.attrs["mcp.method.name"]; got != "tools/call" {
		t.Errorf("mcp.method.name = %q", got)
	}
	if got := tp.attrs["mcp.session.id"]; got == "" || got != cs.ID() {
		t.Errorf("mcp.session.id = %q, want the client's session %q", got, cs.ID())
	}
}

// TestTraceContextReachesUpstream: the trace context a client sends in
// _meta reaches the upstream's call, in its _meta (W3C traceparent), on
// the direct path as on the SDK's; a call without one sends none.
func TestTraceContextReachesUpstream(t *testing.T) {
	t.Parallel()
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, opts := range [][]gateway.Option{nil, {gateway.WithoutDirect()}} {
		up, upURL := httpUpstream(t)
		cs := connect(t, serve(t, newGateway(t, gateway.Upstream{URL: upURL}, "", opts...)), "alice-token", nil)
		for _, traced := range []bool{true, false} {
			var meta mcp.Meta
			if traced {
				meta = mcp.Meta{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}
			}
			before := len(up.seenTool("read_note"))
			// No note "a": the upstream's answer is an error, but the call
			// reached it.
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"name": "a"}, Meta: meta}); err != nil {
				t.Fatal(err)
			}
			seen := up.seenTool("read_note")
			if len(seen) != before+1 {
				t.Fatalf("direct=%v: the upstream saw %d calls, want 1", opts == nil, len(seen)-before)
			}
			got, _ := seen[len(seen)-1].Meta["traceparent"].(string)
			switch {
			case traced && !strings.Contains(got, traceID):
				t.Errorf("direct=%v: the upstream got traceparent %q, want the client's trace %s", opts == nil, got, traceID)
			case !traced && got != "":
				t.Errorf("direct=%v: a call without a trace context sent the upstream traceparent %q", opts == nil, got)
			}
		}
	}
}
