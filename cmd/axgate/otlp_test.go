package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/axgate/axgate/internal/otelcollector"
)

// buildAxgate builds the axgate binary into a temporary directory.
func buildAxgate(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "axgate")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestServeOTLPToCollector: the serve binary, configured by the standard
// OTEL_* variables only, sends its spans, its metrics and (with --audit
// otlp) its audit records to a real OpenTelemetry Collector over OTLP/HTTP;
// stopping it flushes them. The audit record names the parameters, never
// their values.
func TestServeOTLPToCollector(t *testing.T) {
	t.Parallel()
	col := otelcollector.Start(t)
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildAxgate(t)
	pki := newServePKI(t)
	up := httptest.NewServer(&fakeUpstream{})
	defer up.Close()

	cmd := exec.Command(bin, "serve", "--manifest", filepath.Join("testdata", "serve", "shop.json"), "--upstream", up.URL,
		"--listen", "127.0.0.1:0", "--jwks", pki.jwks, "--precondition", `cart is not empty=args.cart_id != ""`, "--audit", "otlp")
	cmd.Env = append(os.Environ(),
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+col.Endpoint(),
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME=axgate-ops-test",
	)
	stderr, stderrW := io.Pipe()
	cmd.Stderr = stderrW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	}()
	log := newLineWatcher(stderr)
	go func() { exited <- cmd.Wait() }()
	m := regexp.MustCompile(`addr=(http://\S+)`).FindStringSubmatch(log.waitFor(t, "serve: listening"))
	if m == nil {
		t.Fatalf("no address:\n%s", log.all())
	}
	base := m[1]

	if status, body := post(t, base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-SECRET-1","quantity":50}`); status != 400 {
		t.Fatalf("refused call: %d %v", status, body)
	}
	if status, body := post(t, base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-SECRET-2","quantity":2}`); status != 200 {
		t.Fatalf("allowed call: %d %v", status, body)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("axgate serve: %v\n%s", err, log.all())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("axgate serve did not stop\n%s", log.all())
	}
	stderrW.Close()

	want := []string{
		"service.name: Str(axgate-ops-test)",
		"Name           : execute_tool cart_add_item",
		"axag.decision: Str(deny)",
		"axag.error.code: Str(AXAG_OUT_OF_RANGE)",
		"Name: axag.decisions",
		"Name: axag.call.duration",
		"Body: Str(axgate decision)",
		"github.com/axgate/axgate/cmd/axgate/audit",
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
	if got := col.Output(); strings.Contains(got, "p-SECRET") {
		t.Errorf("an argument value reached the collector:\n%s", got)
	}
	if strings.Contains(log.all(), "axgate decision") {
		t.Errorf("with --audit otlp the audit records still went to stderr:\n%s", log.all())
	}
}

// otlpReceiver records the OTLP/HTTP exports it gets: the signal paths and
// decoded requests.
type otlpReceiver struct {
	mu      sync.Mutex
	traces  []*coltracepb.ExportTraceServiceRequest
	metrics []*colmetricpb.ExportMetricsServiceRequest
	logs    []*collogspb.ExportLogsServiceRequest
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(r.Body)
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want protobuf", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var msg proto.Message
	switch r.URL.Path {
	case "/v1/traces":
		m := &coltracepb.ExportTraceServiceRequest{}
		o.traces, msg = append(o.traces, m), m
	case "/v1/metrics":
		m := &colmetricpb.ExportMetricsServiceRequest{}
		o.metrics, msg = append(o.metrics, m), m
	case "/v1/logs":
		m := &collogspb.ExportLogsServiceRequest{}
		o.logs, msg = append(o.logs, m), m
	default:
		http.NotFound(w, r)
		return
	}
	if err := proto.Unmarshal(data, msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// TestServeOTLPEnv: serve, in process, exports over OTLP/HTTP exactly when
// the standard variables say so: spans, metrics and audit logs after the
// calls, flushed on shutdown; with no OTEL_* variable nothing is sent.
func TestServeOTLPEnv(t *testing.T) {
	// Not parallel: t.Setenv.
	recv := &otlpReceiver{}
	rsrv := httptest.NewServer(recv)
	defer rsrv.Close()
	pki := newServePKI(t)
	up := httptest.NewServer(&fakeUpstream{})
	defer up.Close()
	args := []string{"--manifest", filepath.Join("testdata", "serve", "shop.json"), "--upstream", up.URL,
		"--listen", "127.0.0.1:0", "--jwks", pki.jwks, "--precondition", `cart is not empty=args.cart_id != ""`, "--audit", "otlp"}

	t.Run("configured", func(t *testing.T) {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rsrv.URL)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
		rs := startServe(t, nil, args...)
		if status, _ := post(t, rs.base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-SECRET","quantity":2}`); status != 200 {
			t.Fatalf("allowed call: %d", status)
		}
		if code := rs.stop(); code != exitOK {
			t.Fatalf("serve exited with %d", code)
		}
		recv.mu.Lock()
		defer recv.mu.Unlock()
		var spans, metricNames, bodies []string
		for _, r := range recv.traces {
			for _, rs := range r.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					for _, s := range ss.Spans {
						spans = append(spans, s.Name)
					}
				}
			}
		}
		for _, r := range recv.metrics {
			for _, rm := range r.ResourceMetrics {
				for _, sm := range rm.ScopeMetrics {
					for _, m := range sm.Metrics {
						metricNames = append(metricNames, m.Name)
					}
				}
			}
		}
		for _, r := range recv.logs {
			for _, rl := range r.ResourceLogs {
				for _, sl := range rl.ScopeLogs {
					for _, l := range sl.LogRecords {
						bodies = append(bodies, l.Body.GetStringValue())
						if strings.Contains(l.String(), "p-SECRET") {
							t.Errorf("an argument value is in the audit record: %v", l)
						}
					}
				}
			}
		}
		if !slices.Contains(spans, "execute_tool cart_add_item") {
			t.Errorf("spans exported: %v", spans)
		}
		if !slices.Contains(metricNames, "axag.decisions") || !slices.Contains(metricNames, "axag.call.duration") {
			t.Errorf("metrics exported: %v", metricNames)
		}
		if !slices.Contains(bodies, "axgate decision") {
			t.Errorf("audit logs exported: %v", bodies)
		}
	})

	t.Run("not configured", func(t *testing.T) {
		recv.mu.Lock()
		recv.traces, recv.metrics, recv.logs = nil, nil, nil
		recv.mu.Unlock()
		rs := startServe(t, nil, append(args[:len(args)-2:len(args)-2], "--audit", "off")...)
		if status, _ := post(t, rs.base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-1","quantity":2}`); status != 200 {
			t.Fatalf("allowed call: %d", status)
		}
		rs.stop()
		recv.mu.Lock()
		defer recv.mu.Unlock()
		if len(recv.traces)+len(recv.metrics)+len(recv.logs) != 0 {
			t.Errorf("exported without any OTEL_* variable")
		}
	})
}

// grpcReceiver is an OTLP/gRPC receiver that records the span names,
// metric names and log bodies it gets.
type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	colmetricpb.UnimplementedMetricsServiceServer
	collogspb.UnimplementedLogsServiceServer
	mu   sync.Mutex
	seen []string
}

func (g *grpcReceiver) add(s string) {
	g.mu.Lock()
	g.seen = append(g.seen, s)
	g.mu.Unlock()
}

func (g *grpcReceiver) Export(ctx context.Context, r *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	for _, rs := range r.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				g.add("span " + s.Name)
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

type grpcMetrics struct{ *grpcReceiver }

func (g grpcMetrics) Export(ctx context.Context, r *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	for _, rm := range r.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				g.add("metric " + m.Name)
			}
		}
	}
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

type grpcLogs struct{ *grpcReceiver }

func (g grpcLogs) Export(ctx context.Context, r *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	for _, rl := range r.ResourceLogs {
		for _, sl := range rl.ScopeLogs {
			for _, l := range sl.LogRecords {
				g.add("log " + l.Body.GetStringValue())
			}
		}
	}
	return &collogspb.ExportLogsServiceResponse{}, nil
}

// TestServeOTLPGRPC: OTEL_EXPORTER_OTLP_PROTOCOL=grpc sends the same over
// OTLP/gRPC.
func TestServeOTLPGRPC(t *testing.T) {
	// Not parallel: t.Setenv.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	recv := &grpcReceiver{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, recv)
	colmetricpb.RegisterMetricsServiceServer(srv, grpcMetrics{recv})
	collogspb.RegisterLogsServiceServer(srv, grpcLogs{recv})
	go srv.Serve(ln)
	defer srv.Stop()

	pki := newServePKI(t)
	up := httptest.NewServer(&fakeUpstream{})
	defer up.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	rs := startServe(t, nil, "--manifest", filepath.Join("testdata", "serve", "shop.json"), "--upstream", up.URL,
		"--listen", "127.0.0.1:0", "--jwks", pki.jwks, "--precondition", `cart is not empty=args.cart_id != ""`, "--audit", "otlp")
	if status, _ := post(t, rs.base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-1","quantity":2}`); status != 200 {
		t.Fatalf("allowed call: %d", status)
	}
	if code := rs.stop(); code != exitOK {
		t.Fatalf("serve exited with %d", code)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	for _, want := range []string{"span execute_tool cart_add_item", "metric axag.decisions", "log axgate decision"} {
		if !slices.Contains(recv.seen, want) {
			t.Errorf("OTLP/gRPC receiver did not get %q; got %v", want, recv.seen)
		}
	}
}
