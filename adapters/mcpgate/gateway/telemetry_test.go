package gateway_test

import (
	"context"
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
