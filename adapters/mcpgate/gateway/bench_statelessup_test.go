package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// statelessUpTarget is a gateway, and one without its direct path, in
// front of an upstream without sessions, with agents on MCP 2026-07-28.
type statelessUpTarget struct {
	upstream, front, sdkFront *httptest.Server
	gw, sdkGW                 *gateway.Gateway
	enf, sdkEnf               *axgate.Enforcer
	direct, sdk               []*mcp.ClientSession
}

var statelessUpTargets = map[string]*statelessUpTarget{}

// statelessUpstream is benchUpstream served without sessions
// (StreamableHTTPOptions.Stateless). With strict, it refuses initialize,
// so that the gateway's client speaks MCP 2026-07-28 to it; otherwise
// the gateway's client is on 2025-11-25 with no session id (what a go-sdk
// v1.8.0 server with Stateless answers it).
func statelessUpstream(work time.Duration, strict bool) *httptest.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench-upstream", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "read", Description: "Read one document by its path."},
		func(ctx context.Context, req *mcp.CallToolRequest, in readArgs) (*mcp.CallToolResult, any, error) {
			if work > 0 {
				time.Sleep(work) // a file or database read, simulated: the work the benchmark measures, not a wait
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: benchDoc}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: os.Getenv("AXGATE_BENCH_UPSTREAM_JSON") != ""})
	if !strict {
		return countingServer(h)
	}
	return countingServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "initialize" {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"unsupported protocol version"}}`, m.ID)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
}

func statelessUpTargetFor(tb testing.TB, work time.Duration, clients int, strict bool) *statelessUpTarget {
	tb.Helper()
	key := fmt.Sprintf("%s/%d/%v", work, clients, strict)
	benchMu.Lock()
	defer benchMu.Unlock()
	if t := statelessUpTargets[key]; t != nil {
		return t
	}
	t := &statelessUpTarget{upstream: statelessUpstream(work, strict)}
	t.enf, t.gw = benchGateway(tb, t.upstream.URL)
	t.front = countingServer(t.gw.Handler())
	t.sdkEnf, t.sdkGW = benchGateway(tb, t.upstream.URL, gateway.WithoutDirect())
	t.sdkFront = countingServer(t.sdkGW.Handler())
	hc := benchHTTPClient()
	for range clients {
		for _, s := range []struct {
			url string
			to  *[]*mcp.ClientSession
		}{{t.front.URL + "/mcp", &t.direct}, {t.sdkFront.URL + "/mcp", &t.sdk}} {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).
				Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: statelessVersion})
			if err != nil {
				tb.Fatal(err)
			}
			*s.to = append(*s.to, cs)
		}
	}
	if _, ok := tb.(*testing.T); ok {
		tb.Cleanup(func() {
			for _, cs := range slices.Concat(t.direct, t.sdk) {
				cs.Close()
			}
			t.front.Close()
			t.sdkFront.Close()
			t.gw.Close()
			t.sdkGW.Close()
			t.enf.Close()
			t.sdkEnf.Close()
			t.upstream.Close()
			delete(statelessUpTargets, key)
		})
	}
	statelessUpTargets[key] = t
	return t
}

// BenchmarkGatewayReadStatelessUpstream: agents on MCP 2026-07-28 (no
// session) read through the gateway (path=stateless) and through the one
// without its direct path (path=stateless-sdk) from an upstream without
// sessions: upstream=sessionless, a go-sdk server with Stateless, which
// the gateway's client reaches on 2025-11-25 with no session id;
// upstream=2026-07-28, the same server refusing initialize, which the
// gateway's client reaches on 2026-07-28 (the protocol's _meta on every
// request).
func BenchmarkGatewayReadStatelessUpstream(b *testing.B) {
	for _, work := range benchWork() {
		for _, clients := range benchClients() {
			for _, kind := range []struct {
				name   string
				strict bool
			}{{"sessionless", false}, {"2026-07-28", true}} {
				name := fmt.Sprintf("upstream=%s/work=%dms/clients=%d", kind.name, work.Milliseconds(), clients)
				b.Run(name+"/path=stateless", func(b *testing.B) {
					t := statelessUpTargetFor(b, work, clients, kind.strict)
					benchRead(b, t.direct, t.upstream, t.front)
				})
				b.Run(name+"/path=stateless-sdk", func(b *testing.B) {
					t := statelessUpTargetFor(b, work, clients, kind.strict)
					benchRead(b, t.sdk, t.upstream, t.sdkFront)
				})
			}
		}
	}
}

// TestStatelessUpstreamBenchAnswers checks what
// BenchmarkGatewayReadStatelessUpstream measures: every agent reads the
// document through both gateways from both upstreams.
func TestStatelessUpstreamBenchAnswers(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{false, true} {
		tg := statelessUpTargetFor(t, 0, 2, strict)
		for _, cs := range slices.Concat(tg.direct, tg.sdk) {
			if err := readOnce(context.Background(), cs); err != nil {
				t.Errorf("strict=%v: %v", strict, err)
			}
		}
	}
}
