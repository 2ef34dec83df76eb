package main

import (
	"context"
	"crypto/rand"
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
	mcpgw "github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// decisionPeople are the callers of the replicas: alice asks and confirms,
// bob (an admin) approves.
var decisionPeople = map[string]middleware.Principal{
	"alice": {ID: "alice", Roles: []string{"editor"}},
	"bob":   {ID: "bob", Roles: []string{"admin"}},
}

// TestMCPDecisionRepeatOnAnotherReplica: two MCP gateway replicas whose
// enforcers keep their decisions in one Redis (database 7, a prefix of
// this run), with decision pages: alice's call refused on replica A names
// its confirmation page, she confirms; the repeat on A names the approval
// page, bob approves; the repeat on replica B runs the upstream once, and
// the next repeat, on either replica, is refused and runs nothing. With a
// client that declares URL-mode elicitation on replica B, the person sent
// to the page confirms there and the retry runs once.
func TestMCPDecisionRepeatOnAnotherReplica(t *testing.T) {
	t.Parallel()
	redisURL := os.Getenv("AXGATE_REDIS_URL")
	if redisURL == "" {
		t.Skip("no Redis: set AXGATE_REDIS_URL (bash .ci/redis.sh prints one)")
	}
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/7"
	m, err := manifest.LoadFile(confirmManifest)
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int32
	up := countingSay(t, &ran)
	prefix := "axgate-test-mrtr:" + rand.Text()[:12] + ":"
	const pages = "http://people.example/"
	replica := func() (*axgate.Enforcer, string) {
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
		g, err := mcpgw.New(enf, mcpgw.Upstream{URL: up}, mcpgw.WithBearer(func(r *http.Request) (middleware.Principal, error) {
			name, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			p, ok := decisionPeople[name]
			if !ok {
				return middleware.Principal{}, errors.New("unknown token")
			}
			p.Claims = map[string]any{"exp": float64(time.Now().Add(time.Hour).Unix())}
			return p, nil
		}, &oauthex.ProtectedResourceMetadata{Resource: "https://gw.example.com/mcp"}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		srv := httptest.NewServer(g.Handler())
		t.Cleanup(srv.Close)
		return enf, srv.URL + "/mcp"
	}
	enfA, urlA := replica()
	enfB, urlB := replica()
	ctx := context.Background()
	decide := func(enf *axgate.Enforcer, who, id string) {
		t.Helper()
		if _, _, _, err := enf.Approvals().Decide(ctx, decisionPeople[who], id, true, ""); err != nil {
			t.Fatalf("%s deciding %s: %v", who, id, err)
		}
	}
	pageOf := func(d map[string]any) string {
		t.Helper()
		id, _ := d["decision_id"].(string)
		if id == "" || d["decision_url"] != pages+"requests/"+id {
			t.Fatalf("the refusal does not name the page: %v", d)
		}
		return id
	}

	a, b := agent(t, urlA, "alice", nil), agent(t, urlB, "alice", nil)
	_, say := sayArgs("replicas")
	decide(enfA, "alice", pageOf(refused(t, callTool(t, a, "say", say), "AXAG_CONFIRMATION_MISSING", "")))
	decide(enfB, "bob", pageOf(refused(t, callTool(t, a, "say", say), "AXAG_APPROVAL_MISSING", "")))
	if res := callTool(t, b, "say", say); res.IsError {
		t.Fatalf("the repeat on replica B: %s", resultText(res))
	}
	for name, cs := range map[string]*mcp.ClientSession{"A": a, "B": b} {
		if res := callTool(t, cs, "say", say); !res.IsError {
			t.Errorf("another repeat on replica %s ran: %s", name, resultText(res))
		}
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("the upstream ran %d times, want 1", n)
	}

	// A client that declares URL-mode elicitation, on B: sent to the
	// confirmation page, alice confirms there (through A), the retry then
	// waits for the approval and is refused with its page; once bob
	// approved (on A), the same call runs, once.
	var sent []string
	browser := agent(t, urlB, "alice", &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			sent = append(sent, req.Params.URL)
			if strings.HasPrefix(req.Params.ElicitationID, "cnf_") {
				decide(enfA, "alice", req.Params.ElicitationID)
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	_, urlMode := sayArgs("urlmode")
	decide(enfA, "bob", pageOf(refused(t, callTool(t, browser, "say", urlMode), "AXAG_APPROVAL_MISSING", "")))
	if len(sent) != 1 || !strings.HasPrefix(sent[0], pages+"requests/cnf_") {
		t.Errorf("the client was sent to %q", sent)
	}
	if res := callTool(t, browser, "say", urlMode); res.IsError {
		t.Fatalf("confirmed and approved: %s", resultText(res))
	}
	if res := callTool(t, a, "say", urlMode); !res.IsError {
		t.Errorf("a repeat on replica A ran: %s", resultText(res))
	}
	if n := ran.Load(); n != 2 {
		t.Errorf("the upstream ran %d times, want 2", n)
	}
}

// countingSay is an upstream whose say tool counts its runs in ran.
func countingSay(t *testing.T, ran *atomic.Int32) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "counting-say", Version: "v1"}, nil)
	type in struct {
		Text  string `json:"text"`
		Times int    `json:"times"`
	}
	type out struct {
		Said string `json:"said"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "say", Description: "Says the text."},
		func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, out, error) {
			ran.Add(1)
			return nil, out{Said: strings.Repeat(a.Text, a.Times)}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}
