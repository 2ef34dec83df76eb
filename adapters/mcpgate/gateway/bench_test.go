package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchManifest allows the one read tool, to any caller.
const benchManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "doc.read", "entity": "doc", "action_type": "read", "operation_id": "read",
     "description": "Read one document by its path.",
     "required_parameters": [{"name": "path", "type": "string", "description": "The document's path", "maxLength": 200}],
     "risk_level": "none", "idempotent": true, "scope": "global"}
  ]
}`

// readArgs are the read tool's arguments, as the upstream declares them.
type readArgs struct {
	Path string `json:"path" jsonschema:"the document's path"`
}

// benchDoc is what the read tool returns: a small document (~200 bytes).
var benchDoc = `{"path":"docs/intro.md","size":142,"text":"axgate enforces AXAG manifests on the tool calls of AI agents: intent, roles, parameters, constraints, rate limits, confirmations."}`

// benchUpstream serves a go-sdk server whose read tool takes work (0 for
// none: the worst case for the gateway's share) over streamable HTTP, its
// answers as event streams (the go-sdk's default), or as JSON bodies when
// AXGATE_BENCH_UPSTREAM_JSON is set.
func benchUpstream(work time.Duration) *httptest.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench-upstream", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "read", Description: "Read one document by its path."},
		func(ctx context.Context, req *mcp.CallToolRequest, in readArgs) (*mcp.CallToolResult, any, error) {
			if work > 0 {
				time.Sleep(work) // a file or database read, simulated: the work the benchmark measures, not a wait
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: benchDoc}}}, nil, nil
		})
	opts := &mcp.StreamableHTTPOptions{JSONResponse: os.Getenv("AXGATE_BENCH_UPSTREAM_JSON") != ""}
	return countingServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts))
}

// conns counts the TCP connections each test server accepted, to show
// whether the clients in front of it reuse their connections.
var conns sync.Map // *httptest.Server -> *atomic.Int64

// countingServer serves h on loopback and counts its new connections.
func countingServer(h http.Handler) *httptest.Server {
	n := new(atomic.Int64)
	hs := httptest.NewUnstartedServer(h)
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	hs.Start()
	conns.Store(hs, n)
	return hs
}

func connsOf(hs *httptest.Server) int64 {
	n, _ := conns.Load(hs)
	return n.(*atomic.Int64).Load()
}

// benchHTTPClient is the agents' HTTP client: keeps one idle connection per
// session open (the default transport keeps 2 per host, which makes
// concurrent sessions open a new connection for most calls).
func benchHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: t}
}

// benchProxy is the baseline of any gateway: net/http/httputil's reverse
// proxy in front of upstream, forwarding every request and answer as it is
// (event streams flushed as they come), checking nothing, with its copy
// buffers pooled and its upstream connections kept.
func benchProxy(upstream string) *httptest.Server {
	u, err := url.Parse(upstream)
	if err != nil {
		panic(err)
	}
	p := httputil.NewSingleHostReverseProxy(u)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256 // as the gateway keeps its upstream connections
	p.Transport = t
	p.BufferPool = copyBuffers{} // no 32 KiB copy buffer allocated per call
	// An agent that closes an event stream it has read its answer from is
	// logged as a "read error during body copy", in the middle of the
	// benchmark's lines; each call's answer is checked (readOnce).
	p.ErrorLog = log.New(io.Discard, "", 0)
	return countingServer(p)
}

// tcpRelay is the floor of any hop: it accepts connections and copies their
// bytes to and from a connection of its own to the upstream, as they are,
// without reading a single HTTP request (on Linux, io.Copy between two TCP
// connections is splice(2): the bytes do not even pass through this
// process). Whatever a gateway does, it also does this much.
type tcpRelay struct {
	ln    net.Listener
	URL   string
	conns atomic.Int64
}

func benchRelay(upstream string) *tcpRelay {
	u, err := url.Parse(upstream)
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	r := &tcpRelay{ln: ln, URL: "http://" + ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.conns.Add(1)
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", u.Host)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
				io.Copy(c, up)
			}()
		}
	}()
	return r
}

func (r *tcpRelay) Close() { r.ln.Close() }

// copyBuffers is the reverse proxy's pool of copy buffers.
type copyBuffers struct{}

var copyBufferPool = sync.Pool{New: func() any { return new([32 << 10]byte) }}

func (copyBuffers) Get() []byte { return copyBufferPool.Get().(*[32 << 10]byte)[:] }

func (copyBuffers) Put(b []byte) { copyBufferPool.Put((*[32 << 10]byte)(b)) }

// benchTarget is one upstream, the gateway in front of it, and a plain
// reverse proxy in front of it (the cost of any HTTP hop, for comparison).
type benchTarget struct {
	upstream *httptest.Server
	front    *httptest.Server
	proxy    *httptest.Server
	relay    *tcpRelay
	gw       *gateway.Gateway
	enf      *axgate.Enforcer
	// sdkFront is a second gateway with the direct path off
	// (gateway.WithoutDirect): path=gateway-sdk.
	sdkFront *httptest.Server
	sdkGW    *gateway.Gateway
	sdkEnf   *axgate.Enforcer
	direct   []*mcp.ClientSession // one per agent
	gateway  []*mcp.ClientSession
	sdkOnly  []*mcp.ClientSession
	proxied  []*mcp.ClientSession
	relayed  []*mcp.ClientSession
	// stateless and statelessSDK are agents on MCP 2026-07-28 (no
	// session) through the gateway and through the one without its direct
	// path.
	stateless    []*mcp.ClientSession
	statelessSDK []*mcp.ClientSession
}

var (
	benchMu      sync.Mutex
	benchTargets = map[string]*benchTarget{}
)

// benchWork is how long the upstream's read tool works per call
// (AXGATE_BENCH_WORK, a comma-separated list of milliseconds; default 0
// and 1).
func benchWork() []time.Duration {
	var out []time.Duration
	for _, f := range strings.Split(os.Getenv("AXGATE_BENCH_WORK"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n >= 0 {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
	}
	if len(out) == 0 {
		return []time.Duration{0, time.Millisecond}
	}
	return out
}

// benchClients are the numbers of concurrent agents to measure
// (AXGATE_BENCH_CLIENTS, a comma-separated list; default 1 and 8).
func benchClients() []int {
	var out []int
	for _, f := range strings.Split(os.Getenv("AXGATE_BENCH_CLIENTS"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return []int{1, 8}
	}
	return out
}

// target returns the upstream with the given work and its gateway, with
// their agents' sessions, started on first use and kept for the whole
// process so that every round of -count measures the same sessions.
func target(b *testing.B, work time.Duration, clients int) *benchTarget {
	b.Helper()
	key := fmt.Sprintf("%s/%d", work, clients)
	benchMu.Lock()
	defer benchMu.Unlock()
	if t := benchTargets[key]; t != nil {
		return t
	}
	t := newBenchTarget(b, work, clients)
	benchTargets[key] = t
	return t
}

// sessionsVersion is the protocol version of the benchmark's agents with
// sessions. The go-sdk's client asks for its latest version unless told
// (2026-07-28 since v1.8.0, which has no sessions): without it the paths
// with sessions would measure the stateless front.
const sessionsVersion = "2025-11-25"

// newBenchTarget starts an upstream whose read tool takes work, a gateway
// in front of it, and the sessions of clients agents on each. They are
// closed with tb only when tb is a test: a benchmark's are kept for the
// process.
func newBenchTarget(tb testing.TB, work time.Duration, clients int) *benchTarget {
	tb.Helper()
	t := &benchTarget{upstream: benchUpstream(work)}
	t.enf, t.gw = benchGateway(tb, t.upstream.URL)
	t.front = countingServer(t.gw.Handler())
	t.sdkEnf, t.sdkGW = benchGateway(tb, t.upstream.URL, gateway.WithoutDirect())
	t.sdkFront = countingServer(t.sdkGW.Handler())
	t.proxy = benchProxy(t.upstream.URL)
	t.relay = benchRelay(t.upstream.URL)
	hc := benchHTTPClient()
	for range clients {
		for _, s := range []struct {
			url     string
			to      *[]*mcp.ClientSession
			version string
		}{{t.upstream.URL, &t.direct, sessionsVersion}, {t.front.URL + "/mcp", &t.gateway, sessionsVersion}, {t.proxy.URL, &t.proxied, sessionsVersion}, {t.relay.URL, &t.relayed, sessionsVersion}, {t.sdkFront.URL + "/mcp", &t.sdkOnly, sessionsVersion},
			{t.front.URL + "/mcp", &t.stateless, statelessVersion}, {t.sdkFront.URL + "/mcp", &t.statelessSDK, statelessVersion}} {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).
				Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: s.version})
			if err != nil {
				tb.Fatal(err)
			}
			*s.to = append(*s.to, cs)
		}
	}
	if _, ok := tb.(*testing.T); ok {
		tb.Cleanup(t.close)
	}
	return t
}

// benchGateway is the benchmark's gateway in front of upstream: an
// in-memory enforcer of benchManifest, a fixed principal. The caller closes
// both.
func benchGateway(tb testing.TB, upstream string, opts ...gateway.Option) (*axgate.Enforcer, *gateway.Gateway) {
	tb.Helper()
	m, err := manifest.Parse([]byte(benchManifest))
	if err != nil {
		tb.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		tb.Fatal(err)
	}
	opts = append([]gateway.Option{gateway.WithPrincipal(mcpgate.StaticPrincipal(middleware.Principal{ID: "agent", Roles: []string{"user"}}))}, opts...)
	gw, err := gateway.New(enf, gateway.Upstream{URL: upstream}, opts...)
	if err != nil {
		enf.Close()
		tb.Fatal(err)
	}
	return enf, gw
}

// newGatewayTarget is newBenchTarget with the gateway path alone: the
// upstream, the gateway in front of it and the sessions of clients agents
// through it, closed with t.
func newGatewayTarget(t *testing.T, work time.Duration, clients int) *benchTarget {
	t.Helper()
	tg := &benchTarget{upstream: benchUpstream(work)}
	tg.enf, tg.gw = benchGateway(t, tg.upstream.URL)
	tg.front = countingServer(tg.gw.Handler())
	t.Cleanup(tg.close)
	hc := benchHTTPClient()
	for range clients {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).
			Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: tg.front.URL + "/mcp", HTTPClient: hc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tg.gateway = append(tg.gateway, cs)
	}
	return tg
}

// close closes what the target started (newGatewayTarget starts a part).
func (t *benchTarget) close() {
	for _, cs := range slices.Concat(t.direct, t.gateway, t.proxied, t.relayed, t.sdkOnly, t.stateless, t.statelessSDK) {
		cs.Close()
	}
	if t.sdkFront != nil {
		t.sdkFront.Close()
		t.sdkGW.Close()
		t.sdkEnf.Close()
		t.relay.Close()
		t.proxy.Close()
	}
	t.front.Close()
	t.gw.Close()
	t.upstream.Close()
	t.enf.Close()
}

// readOnce is one agent's call of the read tool, checked.
func readOnce(ctx context.Context, cs *mcp.ClientSession) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": "docs/intro.md"}})
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) != 1 {
		return fmt.Errorf("read failed: %+v", res.Content)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != benchDoc {
		return errors.New("read returned another document")
	}
	return nil
}

// BenchmarkGatewayRead calls the read tool from concurrent agents, each on
// its own session, through the gateway and directly, alternately (with
// -count, the rounds interleave). It reports calls/s and the p50 and p99
// latency of one call as the agent sees it. upstream=0ms is a read tool that
// does no work (the worst case for the gateway's share of the time);
// upstream=1ms sleeps 1 ms per call, as a small file or database read would
// (AXGATE_BENCH_WORK chooses others). path=relay is the same call through
// a TCP relay that copies its bytes without reading them (tcpRelay): what
// the hop itself costs. path=proxy goes through httputil's reverse proxy,
// which reads each HTTP request and answer but checks nothing: what any
// hop that can see the call costs on this machine, the floor of the
// gateway's cost. path=gateway-sdk is the gateway with its direct path
// off (gateway.WithoutDirect): the go-sdk's server and client on the hop.
// path=stateless and path=stateless-sdk are agents on MCP 2026-07-28 (no
// session, each call on its own) through the two gateways.
func BenchmarkGatewayRead(b *testing.B) {
	for _, work := range benchWork() {
		for _, clients := range benchClients() {
			name := fmt.Sprintf("upstream=%dms/clients=%d", work.Milliseconds(), clients)
			b.Run(name+"/path=direct", func(b *testing.B) {
				t := target(b, work, clients)
				benchRead(b, t.direct, t.upstream)
			})
			b.Run(name+"/path=relay", func(b *testing.B) {
				t := target(b, work, clients)
				benchRead(b, t.relayed, t.upstream)
			})
			b.Run(name+"/path=proxy", func(b *testing.B) {
				t := target(b, work, clients)
				benchRead(b, t.proxied, t.upstream, t.proxy)
			})
			b.Run(name+"/path=gateway", func(b *testing.B) {
				t := target(b, work, clients)
				benchRead(b, t.gateway, t.upstream, t.front)
			})
			b.Run(name+"/path=gateway-sdk", func(b *testing.B) {
				t := target(b, work, clients)
				benchRead(b, t.sdkOnly, t.upstream, t.sdkFront)
			})
			b.Run(name+"/path=stateless", func(b *testing.B) {
				t := target(b, work, clients)
				benchRead(b, t.stateless, t.upstream, t.front)
			})
			b.Run(name+"/path=stateless-sdk", func(b *testing.B) {
				t := target(b, work, clients)
				benchRead(b, t.statelessSDK, t.upstream, t.sdkFront)
			})
		}
	}
}

// benchRead spreads b.N calls over the sessions, one goroutine each, and
// reports throughput, latency percentiles and the new TCP connections per
// call that the servers on the path accepted (0 when every hop reuses its
// connections).
func benchRead(b *testing.B, sessions []*mcp.ClientSession, servers ...*httptest.Server) {
	ctx := context.Background()
	for _, cs := range sessions { // warm the connections
		if err := readOnce(ctx, cs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	var (
		next    atomic.Int64
		failure atomic.Pointer[error]
		wg      sync.WaitGroup
	)
	lat := make([][]time.Duration, len(sessions))
	var conns0 int64
	for _, hs := range servers {
		conns0 += connsOf(hs)
	}
	b.ResetTimer()
	cpu0, start := processCPU(), time.Now()
	for i, cs := range sessions {
		wg.Go(func() {
			own := make([]time.Duration, 0, b.N/len(sessions)+1)
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := readOnce(ctx, cs); err != nil {
					failure.CompareAndSwap(nil, &err)
					return
				}
				own = append(own, time.Since(t0))
			}
			lat[i] = own
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	b.StopTimer()
	if err := failure.Load(); err != nil {
		b.Fatal(*err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	// The CPU time of the whole process (agents, gateway, upstream) per
	// call: on a loaded machine it is steadier than the wall time, and the
	// gateway's cost is the difference between the two paths.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/call")
	b.ReportMetric(ms(percentile(all, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(all, 0.99)), "p99-ms")
	var conns1 int64
	for _, hs := range servers {
		conns1 += connsOf(hs)
	}
	b.ReportMetric(float64(conns1-conns0)/float64(b.N), "conns/op")
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TestBenchTargetsAnswerAlike checks what the benchmark measures: the read
// tool answers the same document on every path (direct, relay, proxy,
// gateway) and every session, so that the benchmark does not time
// refusals.
func TestBenchTargetsAnswerAlike(t *testing.T) {
	t.Parallel()
	tg := newBenchTarget(t, 0, 2)
	ctx := context.Background()
	// The paths with sessions measure sessions, the stateless ones none.
	for _, cs := range slices.Concat(tg.direct, tg.gateway, tg.proxied, tg.relayed, tg.sdkOnly) {
		if cs.ID() == "" {
			t.Fatalf("an agent of a path with sessions has none (protocol %s)", cs.InitializeResult().ProtocolVersion)
		}
	}
	for _, cs := range slices.Concat(tg.stateless, tg.statelessSDK) {
		if cs.ID() != "" {
			t.Fatal("a stateless agent has a session")
		}
	}
	for _, cs := range slices.Concat(tg.direct, tg.gateway, tg.proxied, tg.relayed, tg.sdkOnly, tg.stateless, tg.statelessSDK) {
		if err := readOnce(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	// The gateway refuses what the manifest does not allow: this is the
	// enforcing path, not a pass-through.
	res, err := tg.gateway[0].CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": 42}})
	if err != nil {
		t.Fatal(err)
	}
	if got := refusalOf(t, res); got.Code != "AXAG_INVALID_TYPE" {
		t.Fatalf("a non-string path: got %s, want AXAG_INVALID_TYPE", got.Code)
	}
}

// BenchmarkGatewayHop measures what the gateway itself costs a call: the
// same raw tools/call POST (no SDK client) to an upstream whose read tool
// is answered at once by a plain handler (no SDK server), directly, through
// a TCP relay, through httputil's reverse proxy and through the gateway, in
// turn. The difference between direct and relay is what the hop's bytes
// cost; between relay and proxy, reading and writing one more HTTP request
// and response; between proxy and gateway, the gateway's reading, checking
// and forwarding of the call; between gateway and gateway-sdk (the direct
// path off), what the direct path saves. upstream=json answers with a JSON body,
// upstream=sse with an event stream, as the SDK's servers do.
func BenchmarkGatewayHop(b *testing.B) {
	for _, sse := range []bool{false, true} {
		t := newHopTarget(b, sse)
		name := map[bool]string{false: "upstream=json", true: "upstream=sse"}[sse]
		for _, path := range []struct{ name, url, session, version string }{
			{"direct", t.upstream.URL, t.directSession, t.version},
			{"relay", t.relay.URL, t.relaySession, t.version},
			{"proxy", t.proxy.URL, t.proxySession, t.version},
			{"gateway", t.front.URL + "/mcp", t.gatewaySession, t.version},
			{"gateway-sdk", t.sdkFront.URL + "/mcp", t.sdkSession, t.version},
		} {
			b.Run(name+"/path="+path.name, func(b *testing.B) {
				hc := benchHTTPClient()
				b.ReportAllocs()
				cpu0, start := processCPU(), time.Now()
				for range b.N {
					if err := rawRead(hc, path.url, path.session, path.version); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/call")
				b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "wall-µs/call")
			})
		}
	}
}

// hopTarget is BenchmarkGatewayHop's upstream and gateway, with a session
// on each.
type hopTarget struct {
	upstream, front, proxy, sdkFront                                      *httptest.Server
	relay                                                                 *tcpRelay
	directSession, gatewaySession, proxySession, relaySession, sdkSession string
	version                                                               string
}

// hopAnswer is the read tool's answer, as a plain handler writes it.
const hopAnswer = `"result":{"content":[{"type":"text","text":"axgate enforces AXAG manifests on the tool calls of AI agents."}]}}`

func newHopTarget(b *testing.B, sse bool) *hopTarget {
	b.Helper()
	sdk := benchUpstream(0)
	inner := sdk.Config.Handler
	// The SDK's server handles the sessions (initialize, the tool list);
	// tools/call is answered by hand.
	sdk.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
				answer := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,` + hopAnswer
				if sse {
					w.Header().Set("Content-Type", "text/event-stream")
					io.WriteString(w, "event: message\ndata: "+answer+"\n\n")
				} else {
					w.Header().Set("Content-Type", "application/json")
					io.WriteString(w, answer)
				}
				return
			}
		}
		inner.ServeHTTP(w, r)
	})
	b.Cleanup(sdk.Close)
	enf, gw := benchGateway(b, sdk.URL)
	b.Cleanup(func() { gw.Close(); enf.Close() })
	front := httptest.NewServer(gw.Handler())
	b.Cleanup(front.Close)
	proxy := benchProxy(sdk.URL)
	b.Cleanup(proxy.Close)
	relay := benchRelay(sdk.URL)
	b.Cleanup(relay.Close)
	sdkEnf, sdkGW := benchGateway(b, sdk.URL, gateway.WithoutDirect())
	b.Cleanup(func() { sdkGW.Close(); sdkEnf.Close() })
	sdkFront := httptest.NewServer(sdkGW.Handler())
	b.Cleanup(sdkFront.Close)
	t := &hopTarget{upstream: sdk, front: front, proxy: proxy, relay: relay, sdkFront: sdkFront}
	for _, s := range []struct {
		url string
		id  *string
	}{{sdk.URL, &t.directSession}, {front.URL + "/mcp", &t.gatewaySession}, {proxy.URL, &t.proxySession}, {relay.URL, &t.relaySession}, {sdkFront.URL + "/mcp", &t.sdkSession}} {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: benchHTTPClient()},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		*s.id, t.version = cs.ID(), cs.InitializeResult().ProtocolVersion
	}
	return t
}

// rawRead posts one tools/call of the read tool on a session and checks
// the answer.
func rawRead(hc *http.Client, url, session, version string) error {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"path":"docs/intro.md"}}}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", version)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("AI agents.")) {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	}
	return nil
}

// upstreamsTarget is BenchmarkGatewayUpstreams's: a one-upstream gateway
// (New) and a five-upstream one (NewMulti), each with an agent's session;
// kept for the process, so that -count rounds interleave on the same.
type upstreamsTarget struct {
	one, five *mcp.ClientSession
}

var (
	upstreamsOnce sync.Once
	upstreams     *upstreamsTarget
)

func newUpstreamsTarget(b *testing.B) *upstreamsTarget {
	b.Helper()
	principal := gateway.WithPrincipal(mcpgate.StaticPrincipal(middleware.Principal{ID: "agent", Roles: []string{"user"}}))
	enforcer := func() *axgate.Enforcer {
		m, err := manifest.Parse([]byte(benchManifest))
		if err != nil {
			b.Fatal(err)
		}
		enf, err := axgate.New(m)
		if err != nil {
			b.Fatal(err)
		}
		return enf
	}
	var named []gateway.Named
	for i := range 5 {
		named = append(named, gateway.Named{Name: fmt.Sprintf("u%d", i), Enforcer: enforcer(), Upstream: gateway.Upstream{URL: benchUpstream(0).URL}})
	}
	one, err := gateway.New(enforcer(), gateway.Upstream{URL: benchUpstream(0).URL}, principal)
	if err != nil {
		b.Fatal(err)
	}
	five, err := gateway.NewMulti(named, principal)
	if err != nil {
		b.Fatal(err)
	}
	t := &upstreamsTarget{}
	hc := benchHTTPClient()
	for _, s := range []struct {
		g  *gateway.Gateway
		to **mcp.ClientSession
	}{{one, &t.one}, {five, &t.five}} {
		front := httptest.NewServer(s.g.Handler())
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).
			Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: front.URL + "/mcp", HTTPClient: hc}, nil)
		if err != nil {
			b.Fatal(err)
		}
		*s.to = cs
	}
	return t
}

// BenchmarkGatewayUpstreams is one call through a gateway with five
// upstreams (NewMulti; the call goes to the third, u2_read) against the
// same call through the one-upstream gateway (New), in the same run: what
// routing by prefix costs (issue 31: within 5 %). One agent, its calls one
// after another, the upstream doing no work. -count runs each
// sub-benchmark's rounds in a row: run the test binary several times
// (bench/README.md) for rounds that interleave.
func BenchmarkGatewayUpstreams(b *testing.B) {
	upstreamsOnce.Do(func() { upstreams = newUpstreamsTarget(b) })
	for _, c := range []struct {
		name string
		cs   *mcp.ClientSession
		tool string
	}{{"upstreams=1", upstreams.one, "read"}, {"upstreams=5", upstreams.five, "u2_read"}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			params := &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{"path": "docs/intro.md"}}
			b.ReportAllocs()
			cpu0, n := processCPU(), 0
			for b.Loop() {
				res, err := c.cs.CallTool(ctx, params)
				if err != nil {
					b.Fatal(err)
				}
				if res.IsError || len(res.Content) != 1 {
					b.Fatalf("%s failed: %+v", c.tool, res.Content)
				}
				n++
			}
			// The process's CPU time per call (agent, gateway, upstream):
			// steadier than the wall time on a shared machine.
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(n), "cpu-µs/call")
		})
	}
}
