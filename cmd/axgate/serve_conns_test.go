package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestServeKeepsUpstreamConnectionsOfConcurrentAgents: eight agents calling
// at once reuse serve's connections to the upstream; no call opens one
// while eight are open. (With http.DefaultTransport serve kept two idle
// connections: most calls of eight agents dialled the upstream anew, 24 for
// 200 calls.) The bound allows twice as many as agents: a call can dial
// while another's connection is on its way back to the pool.
func TestServeKeepsUpstreamConnectionsOfConcurrentAgents(t *testing.T) {
	const agents, calls = 8, 50
	pki := newServePKI(t)
	upSrv := httptest.NewUnstartedServer(&fakeUpstream{})
	var opened atomic.Int64
	upSrv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	upSrv.Start()
	defer upSrv.Close()
	u, _ := url.Parse(upSrv.URL)
	gw, err := newGateway(context.Background(), serveConfig{
		manifest: filepath.Join("testdata", "serve", "shop.json"),
		enforcerConfig: enforcerConfig{jwks: pki.jwks, issuer: "axgate", audience: "axgate",
			preconditions: conditionFlags{`cart is not empty=args.cart_id != ""`}},
		upstreamTimeout: 5 * time.Second,
	}, u, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer gw.close()
	srv := httptest.NewServer(gw)
	defer srv.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = agents
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()

	var wg sync.WaitGroup
	failed := make(chan string, agents)
	for range agents {
		wg.Go(func() {
			for range calls {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/tools/cart_add_item/call", strings.NewReader(`{"product_id":"p-1","quantity":1}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+pki.bearer)
				resp, err := client.Do(req)
				if err != nil {
					failed <- err.Error()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed <- resp.Status
					return
				}
			}
		})
	}
	wg.Wait()
	close(failed)
	for f := range failed {
		t.Fatalf("a call failed: %s", f)
	}
	if n := opened.Load(); n > 2*agents {
		t.Errorf("serve opened %d connections to the upstream for %d calls of %d agents, want at most %d", n, agents*calls, agents, 2*agents)
	}
}
