package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	mcpgw "github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// confirmOnly is confirmManifest's say without its approval: the person's
// confirmation is all it waits for.
func confirmOnly(t *testing.T) *manifest.Manifest {
	t.Helper()
	raw, err := os.ReadFile(confirmManifest)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	action := doc["entities"].([]any)[0].(map[string]any)["actions"].([]any)[0].(map[string]any)
	delete(action, "approval_required")
	delete(action, "approval_roles")
	raw, _ = json.Marshal(doc)
	m, err := manifest.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMCPElicitationKeyFromTheSigningKey: the key of the request state is
// the same for one --signing-key file, another for another, and never the
// key's own bytes.
func TestMCPElicitationKeyFromTheSigningKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string) string { return writeDevKeyFile(t, dir, name, "k") }
	a, b := write("a.jwk"), write("b.jwk")
	ka1, err := elicitationKey(a)
	if err != nil {
		t.Fatal(err)
	}
	ka2, _ := elicitationKey(a)
	kb, _ := elicitationKey(b)
	if len(ka1) != mcpgate.ElicitationKeySize || string(ka1) != string(ka2) || string(ka1) == string(kb) {
		t.Errorf("keys: %x %x %x", ka1, ka2, kb)
	}
}

// TestMCPStatelessRetryOnAnotherReplica: two MCP gateway replicas sharing
// Redis (database 13) and one --signing-key (the elicitation key derived
// from it, as axgate mcp does). A client of MCP 2026-07-28 (stateless, no
// fallback) calls say on replica A and gets input_required with the page
// of the call; the person confirms; the client's retry with A's request
// state lands on replica B, which runs it, once; the same retry again, on
// either replica, is refused and runs nothing. A replica with a key of its
// own refuses the state.
func TestMCPStatelessRetryOnAnotherReplica(t *testing.T) {
	t.Parallel()
	redisURL := os.Getenv("AXGATE_REDIS_URL")
	if redisURL == "" {
		t.Skip("no Redis: set AXGATE_REDIS_URL (bash .ci/redis.sh prints one)")
	}
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/13"
	m := confirmOnly(t)
	var ran atomic.Int32
	up := countingSay(t, &ran)
	prefix := "axgate-test-stateless:" + rand.Text()[:12] + ":"
	const pages = "http://people.example/"
	keyFile := writeDevKeyFile(t, t.TempDir(), "signing-key.jwk", "replicas")
	replica := func(shareKey bool) (*axgate.Enforcer, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := redisstore.Open(ctx, u.String(), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
		if err != nil {
			t.Skipf("Redis at %s: %v", u.Redacted(), err)
		}
		t.Cleanup(func() { s.Close() })
		enf, err := axgate.New(m, axgate.WithDecisionPages(pages), axgate.WithReplayStore(s.Replay), axgate.WithLimiter(s.Limiter),
			axgate.WithIdempotency(gates.IdempotencyOptions{Store: s.Idempotency}), axgate.WithApprovalStore(s.Approvals))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { enf.Close() })
		mcpOpts := []mcpgate.Option{mcpgate.WithElicitationReplayStore(s.Replay)}
		if shareKey {
			key, err := elicitationKey(keyFile)
			if err != nil {
				t.Fatal(err)
			}
			mcpOpts = append(mcpOpts, mcpgate.WithElicitationKey(key))
		}
		g, err := mcpgw.New(enf, mcpgw.Upstream{URL: up}, mcpgw.WithBearer(func(r *http.Request) (middleware.Principal, error) {
			name, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			p, ok := decisionPeople[name]
			if !ok {
				return middleware.Principal{}, errors.New("unknown token")
			}
			p.Claims = map[string]any{"exp": float64(time.Now().Add(time.Hour).Unix())}
			return p, nil
		}, &oauthex.ProtectedResourceMetadata{Resource: "https://gw.example.com/mcp"}),
			mcpgw.WithMCPOptions(mcpOpts...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		srv := httptest.NewServer(g.Handler())
		t.Cleanup(srv.Close)
		return enf, srv.URL + "/mcp"
	}
	enfA, urlA := replica(true)
	_, urlB := replica(true)
	_, urlC := replica(false) // a key of its own
	stateless := func(url string) *mcp.ClientSession {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, &mcp.ClientOptions{
			Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
			MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		}).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{"alice"}}},
			&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
			t.Fatalf("negotiated %s, want 2026-07-28", v)
		}
		return cs
	}
	a, b, c := stateless(urlA), stateless(urlB), stateless(urlC)
	_, say := sayArgs("stateless")
	first := callTool(t, a, "say", say)
	page, ok := first.InputRequests[mcpgate.DecisionInputID].(*mcp.ElicitParams)
	if !first.NeedsInput() || !ok || page.Mode != "url" || page.URL != pages+"requests/"+page.ElicitationID || first.RequestState == "" {
		t.Fatalf("want input_required with the page, got %+v (%s)", first, resultText(first))
	}
	if _, _, _, err := enfA.Approvals().Decide(context.Background(), decisionPeople["alice"], page.ElicitationID, true, ""); err != nil {
		t.Fatal(err)
	}
	retry := func(cs *mcp.ClientSession) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "say", Arguments: say, RequestState: first.RequestState,
			InputResponses: mcp.InputResponseMap{mcpgate.DecisionInputID: &mcp.ElicitResult{Action: "accept"}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if d := refused(t, retry(c), "AXAG_CONFIRMATION_MISSING", "elicitation_state_invalid"); d == nil {
		t.Error("replica C, with a key of its own, took the state")
	}
	if res := retry(b); res.IsError || res.NeedsInput() {
		t.Fatalf("the retry on replica B: %s", resultText(res))
	}
	for name, cs := range map[string]*mcp.ClientSession{"A": a, "B": b} {
		if res := retry(cs); !res.IsError {
			t.Errorf("a second retry on replica %s ran: %s", name, resultText(res))
		}
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("the upstream ran %d times, want 1", n)
	}
}
