package gateway_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// TestPinCheckedAgainAfterConfirmation: a call confirmed by the person does
// not reach a pinned tool that changed meanwhile.
//
// The fault: the upstream changes a pinned tool (and says so) while the
// person is being asked to confirm a call of it. The call passed the
// gateway's pin check before the question; it must not reach the changed
// tool after the answer.
func TestPinCheckedAgainAfterConfirmation(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, pinOf(t, upURL, "write_note"))
	url := serve(t, g)
	asked, answer := make(chan struct{}, 1), make(chan struct{})
	cs := connect(t, url, "alice-token", &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- struct{}{}
		select {
		case <-answer:
		case <-ctx.Done():
		}
		return &mcp.ElicitResult{Action: "accept"}, nil
	}})
	watcher := connect(t, url, "bob-token", nil)
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- callWithin(t, cs, "write_note", map[string]any{"name": "a", "text": "during"}) }()
	<-asked
	up.rugPull()
	// Wait until the gateway has seen the change and disabled the tool.
	if !eventually(20*time.Second, func() bool { return !slices.Contains(listNames(t, watcher), "write_note") }) {
		close(answer)
		t.Fatal("the gateway did not disable the changed tool")
	}
	close(answer)
	res := <-done
	if !res.IsError {
		t.Fatalf("a call confirmed before the rug pull reached the changed tool: %s", text(res))
	}
	wantRefusal(t, res, "AXGATE_TOOL_CHANGED", "upstream_changed")
	if n := len(up.seenTool("write_note")); n != 0 {
		t.Fatalf("the changed upstream tool was called %d times", n)
	}
}

// TestPinCheckedAgainBeforeForwarding: a call does not reach a pinned tool
// that changed while the chain decided it.
//
// The fault: the upstream changes a pinned tool (and says so) while the
// chain is still deciding a call of it, after the gateway's checks before
// the chain have passed. The call must not reach the changed tool: the
// gateway looks again right before it forwards.
func TestPinCheckedAgainBeforeForwarding(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	m, err := manifest.Parse(manifestFor(t, pinOf(t, upURL, "write_note")))
	if err != nil {
		t.Fatal(err)
	}
	// A stage at the end of the chain's checks stands for a slow gate: it
	// lets the upstream change the tool and waits until the gateway knows.
	pulled, changed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	slowGate := middleware.Stage{Name: "slow", Interceptor: func(ctx context.Context, c *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if c.Tool == "write_note" {
			once.Do(func() {
				up.rugPull()
				close(pulled)
				select {
				case <-changed:
				case <-time.After(20 * time.Second):
				}
			})
		}
		return next.Invoke(ctx, c)
	}}
	enf, err := axgate.New(m, axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		return append(std, slowGate)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	g, err := gateway.New(enf, gateway.Upstream{URL: upURL},
		gateway.WithBearer(authenticate, &oauthex.ProtectedResourceMetadata{
			Resource: "https://gw.example.com/mcp", AuthorizationServers: []string{"https://id.example.com"},
		}), gateway.WithTrustClientElicitation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	url := serve(t, g)
	cs := connect(t, url, "alice-token", &mcp.ClientOptions{ElicitationHandler: accept})
	watcher := connect(t, url, "bob-token", nil)
	go func() {
		defer close(changed)
		<-pulled
		eventually(20*time.Second, func() bool {
			res, err := watcher.ListTools(context.Background(), nil)
			return err != nil || !slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "write_note" })
		})
	}()
	res := callWithin(t, cs, "write_note", map[string]any{"name": "a", "text": "during"})
	if !res.IsError {
		t.Fatalf("a call decided while the tool changed reached the changed tool: %s", text(res))
	}
	wantRefusal(t, res, "AXGATE_TOOL_CHANGED", "upstream_changed")
	if n := len(up.seenTool("write_note")); n != 0 {
		t.Fatalf("the changed upstream tool was called %d times", n)
	}
}

// counter records the gateway's tool_changed counts.
type counter struct {
	noop.MeterProvider
	mu    sync.Mutex
	tools map[string]int
}

func (c *counter) Meter(string, ...metric.MeterOption) metric.Meter { return meter{c: c} }

type meter struct {
	noop.Meter
	c *counter
}

func (m meter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	if name != "axgate.gateway.tool_changed" {
		return noop.Int64Counter{}, nil
	}
	return changedCounter{c: m.c}, nil
}

type changedCounter struct {
	noop.Int64Counter
	c *counter
}

func (cc changedCounter) Add(_ context.Context, n int64, opts ...metric.AddOption) {
	attrs := metric.NewAddConfig(opts).Attributes()
	tool, _ := attrs.Value(attribute.Key("gen_ai.tool.name"))
	cc.c.mu.Lock()
	cc.c.tools[tool.AsString()] += int(n)
	cc.c.mu.Unlock()
}

// TestToolChanged: the upstream changes write_note's definition while the
// gateway runs and says so; the gateway disables it, tells the client,
// logs and counts it, and refuses its calls with AXGATE_TOOL_CHANGED.
func TestToolChanged(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	mp := &counter{tools: map[string]int{}}
	var lg logs
	g := newGateway(t, gateway.Upstream{URL: upURL}, pinOf(t, upURL, "write_note"),
		gateway.WithMeterProvider(mp), gateway.WithLogger(slog.New(slog.NewTextHandler(&lg, nil))))
	url := serve(t, g)
	changed := make(chan struct{}, 10)
	cs := connect(t, url, "alice-token", &mcp.ClientOptions{
		ElicitationHandler:     accept,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	if !slices.Contains(listNames(t, cs), "write_note") {
		t.Fatal("write_note is not listed before the change")
	}
	if res := call(t, cs, "write_note", map[string]any{"name": "a", "text": "b"}); res.IsError {
		t.Fatalf("write before the change: %s", text(res))
	}

	up.rugPull()
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the client was not told that the tools changed")
	}
	if slices.Contains(listNames(t, cs), "write_note") {
		t.Error("a changed tool is still listed")
	}
	before := len(up.seenTool("write_note"))
	r := wantRefusal(t, call(t, cs, "write_note", map[string]any{"name": "a", "text": "c"}), "AXGATE_TOOL_CHANGED", "upstream_changed")
	if !strings.Contains(r.Message, "write_note") {
		t.Errorf("the refusal does not name the tool: %q", r.Message)
	}
	if len(up.seenTool("write_note")) != before {
		t.Error("a call of a changed tool reached the upstream")
	}
	// Other tools go on.
	if res := call(t, cs, "read_note", map[string]any{"name": "a"}); res.IsError {
		t.Errorf("read after the change: %s", text(res))
	}
	// A new session of another caller sees the same.
	bob := connect(t, url, "bob-token", nil)
	if slices.Contains(listNames(t, bob), "write_note") {
		t.Error("a changed tool is listed to a new session")
	}
	mp.mu.Lock()
	n := mp.tools["write_note"]
	mp.mu.Unlock()
	if n != 1 {
		t.Errorf("tool_changed counted %d for write_note, want 1", n)
	}
	if out := lg.String(); !strings.Contains(out, "upstream tool changed") || !strings.Contains(out, "tool=write_note") {
		t.Errorf("the log does not name the changed tool:\n%s", out)
	}
}

// TestPinMismatchAtStart: a tool whose definition differs from its pin when
// the gateway starts is disabled from the first call.
func TestPinMismatchAtStart(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	g := newGateway(t, gateway.Upstream{URL: upURL}, strings.Repeat("0", 64))
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{ElicitationHandler: accept})
	if got, want := listNames(t, cs), []string{"read_note", "fail_note", "ask_note"}; !slices.Equal(got, want) {
		t.Errorf("lists %v, want %v", got, want)
	}
	wantRefusal(t, call(t, cs, "write_note", map[string]any{"name": "a", "text": "b"}), "AXGATE_TOOL_CHANGED", "upstream_changed")
	if len(up.seenTool("write_note")) != 0 {
		t.Error("the upstream was called")
	}
}

// TestNoPin: without upstream_sha256 the definition is not checked.
func TestNoPin(t *testing.T) {
	t.Parallel()
	up, upURL := httpUpstream(t)
	up.rugPull() // changed before the gateway ever saw it: nothing to compare with
	g := newGateway(t, gateway.Upstream{URL: upURL}, "")
	cs := connect(t, serve(t, g), "alice-token", &mcp.ClientOptions{ElicitationHandler: accept})
	if res := call(t, cs, "write_note", map[string]any{"name": "a", "text": "b"}); res.IsError {
		t.Fatalf("unpinned write: %s", text(res))
	}
}
