package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads the admin server's /metrics and parses the exposition.
func scrape(t *testing.T, admin string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not the Prometheus text format: %v", err)
	}
	return fams
}

// label returns a metric's label value.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func getStatus(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// TestServeAdminMetrics: after one refused and one allowed call through
// serve, /metrics on the admin server counts one of each, with the
// refusal's code, and the call-duration histogram holds two calls;
// /healthz answers, /readyz fails while the upstream is down, and pprof is
// not served unless asked.
func TestServeAdminMetrics(t *testing.T) {
	t.Parallel()
	pki := newServePKI(t)
	// Once the upstream is closed its port refuses connections: no other
	// test's server can take it (listenHeld).
	up := newHeldServer(t, &fakeUpstream{})
	defer up.Close()
	rs := startServe(t, nil, "--manifest", filepath.Join("testdata", "serve", "shop.json"), "--upstream", up.URL,
		"--listen", "127.0.0.1:0", "--jwks", pki.jwks, "--precondition", `cart is not empty=args.cart_id != ""`,
		"--admin", "127.0.0.1:0", "--audit", "off")

	if status, body := post(t, rs.base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-1","quantity":50}`); status != 400 || errorCode(body) != "AXAG_OUT_OF_RANGE" {
		t.Fatalf("refused call: %d %v", status, body)
	}
	if status, body := post(t, rs.base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-1","quantity":2}`); status != 200 {
		t.Fatalf("allowed call: %d %v", status, body)
	}

	fams := scrape(t, rs.admin)
	decisions := fams["axag_decisions_total"]
	if decisions == nil || decisions.GetType() != dto.MetricType_COUNTER {
		names := make([]string, 0, len(fams))
		for n := range fams {
			names = append(names, n)
		}
		t.Fatalf("no counter axag_decisions_total in /metrics; families: %v", names)
	}
	counts := map[string]float64{}
	for _, m := range decisions.GetMetric() {
		if label(m, "gen_ai_tool_name") != "" && label(m, "gen_ai_tool_name") != "cart_add_item" {
			continue
		}
		counts[label(m, "axag_decision")+" "+label(m, "axag_error_code")] += m.GetCounter().GetValue()
	}
	if counts["allow "] != 1 || counts["deny AXAG_OUT_OF_RANGE"] != 1 || len(counts) != 2 {
		t.Errorf("axag_decisions_total by decision and code: %v, want one allow and one deny AXAG_OUT_OF_RANGE\n%v", counts, decisions)
	}
	hist := fams["axag_call_duration_seconds"]
	if hist == nil || hist.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("no histogram axag_call_duration_seconds: %v", hist)
	}
	var n uint64
	for _, m := range hist.GetMetric() {
		n += m.GetHistogram().GetSampleCount()
		if b := m.GetHistogram().GetBucket(); len(b) == 0 || b[len(b)-1].GetCumulativeCount() > m.GetHistogram().GetSampleCount() {
			t.Errorf("histogram buckets: %v", b)
		}
	}
	if n != 2 {
		t.Errorf("axag_call_duration_seconds counts %d calls, want 2", n)
	}
	if fams["go_goroutines"] == nil {
		t.Errorf("no Go runtime metrics (go_goroutines)")
	}

	if status, body := getStatus(t, rs.admin+"/healthz"); status != 200 || body["status"] != "ok" {
		t.Errorf("/healthz: %d %v", status, body)
	}
	if status, body := getStatus(t, rs.admin+"/readyz"); status != 200 || body["status"] != "ready" {
		t.Errorf("/readyz with the upstream up: %d %v", status, body)
	}
	if status, _ := getStatus(t, rs.admin+"/debug/pprof/"); status != http.StatusNotFound {
		t.Errorf("pprof served without --pprof: %d", status)
	}
	if status, _ := getStatus(t, rs.base+"/metrics"); status == 200 {
		t.Errorf("/metrics is served on the gateway's port")
	}
	up.Close()
	status, body := getStatus(t, rs.admin+"/readyz")
	if problems, _ := json.Marshal(body["problems"]); status != http.StatusServiceUnavailable || !strings.Contains(string(problems), "upstream") {
		t.Errorf("/readyz with the upstream down: %d %v, want 503 naming the upstream", status, body)
	}
}

// newHeldServer starts an httptest server of h on a port listenHeld holds:
// once the server is closed, its port refuses connections.
func newHeldServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = listenHeld(t)
	srv.Start()
	return srv
}

// TestServeAdminPprof: --pprof serves the profiles on the admin server.
func TestServeAdminPprof(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(&fakeUpstream{})
	defer up.Close()
	rs := startServe(t, nil, "--manifest", filepath.Join("testdata", "serve", "shop.json"), "--upstream", up.URL,
		"--listen", "127.0.0.1:0", "--anonymous", "--allow-unbound-conditions", "--admin", "127.0.0.1:0", "--pprof", "--audit", "off")
	resp, err := http.Get(rs.admin + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("pprof with --pprof: %d", resp.StatusCode)
	}
}

// tcpProxy forwards connections to target until closed; closing it also
// cuts the connections it carries, as a network failure would.
type tcpProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	// Once closed, the proxy's port refuses connections: no other test's
	// server (another test's proxy to Redis) can take it (listenHeld).
	ln := listenHeld(t)
	p := &tcpProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// TestServeReadyzRedis: with --redis, /readyz fails while Redis cannot be
// reached (here: the connection to it is cut), naming Redis.
func TestServeReadyzRedis(t *testing.T) {
	t.Parallel()
	raw := os.Getenv("AXGATE_REDIS_URL")
	if raw == "" {
		t.Skip("no Redis: set AXGATE_REDIS_URL (bash .ci/redis.sh prints one)")
	}
	ru, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newTCPProxy(t, ru.Host)
	ru.Host = proxy.ln.Addr().String()
	up := httptest.NewServer(&fakeUpstream{})
	defer up.Close()
	rs := startServe(t, nil, "--manifest", filepath.Join("testdata", "serve", "shop.json"), "--upstream", up.URL,
		"--listen", "127.0.0.1:0", "--anonymous", "--allow-unbound-conditions", "--redis", ru.String(),
		"--admin", "127.0.0.1:0", "--audit", "off")
	if status, body := getStatus(t, rs.admin+"/readyz"); status != 200 {
		t.Fatalf("/readyz with Redis up: %d %v", status, body)
	}
	proxy.close()
	status, body := getStatus(t, rs.admin+"/readyz")
	if problems, _ := json.Marshal(body["problems"]); status != http.StatusServiceUnavailable || !strings.Contains(string(problems), "redis") {
		t.Errorf("/readyz with Redis cut off: %d %v, want 503 naming redis", status, body)
	}
}
