package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/middleware"
)

// replicasManifest declares countingUpstream's tools: peek (a read anyone
// runs), tick (a read three times a minute), say (the person confirms) and
// pay (an admin approves).
var replicasManifest = filepath.Join("testdata", "mcp", "replicas.axag.json")

// balanced is one request the balancer passed on: to which replica, the
// request's MCP method and name (the Mcp-Method and Mcp-Name headers of
// 2026-07-28, which the gateway checks against the body), its session
// (Mcp-Session-Id, 2025-11-25), its method and path, and the replica's
// HTTP status.
type balanced struct {
	replica               int
	method, name, session string
	httpMethod, path      string
	status                int
}

// routing is how the balancer picks a replica.
type routing int

const (
	roundRobin routing = iota // each request to the next replica
	learnt                    // a session's requests to the replica that began it (learnt from its answer)
	hashed                    // a session's requests by a hash of Mcp-Session-Id
)

// balancer is an HTTP balancer (net/http/httputil.ReverseProxy) in front of
// the replicas: round-robin per request, or with affinity on Mcp-Session-Id,
// learnt from the answer that names a new session or hashed; a request
// without a session goes round-robin. It records every request it passed
// on.
type balancer struct {
	replicas []*url.URL
	routing  routing
	proxy    *httputil.ReverseProxy

	mu       sync.Mutex
	next     int
	sessions map[string]int // Mcp-Session-Id → replica
	log      []balanced
}

type replicaKey struct{}

// newBalancer listens on a loopback port of its own; serve starts it once
// the replicas are known.
func newBalancer(t *testing.T, routing routing) (*balancer, net.Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{routing: routing, sessions: map[string]int{}}
	b.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(b.replicas[pr.In.Context().Value(replicaKey{}).(int)])
		},
		FlushInterval: -1, // the event streams of 2025-11-25 as they come
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, _ error) {
			b.mu.Lock()
			b.log = append(b.log, balanced{replica: r.Context().Value(replicaKey{}).(int), method: r.Header.Get("Mcp-Method"),
				name: r.Header.Get("Mcp-Name"), session: r.Header.Get("Mcp-Session-Id"), status: http.StatusBadGateway})
			b.mu.Unlock()
			w.WriteHeader(http.StatusBadGateway)
		},
		ModifyResponse: func(resp *http.Response) error {
			i := resp.Request.Context().Value(replicaKey{}).(int)
			session := resp.Request.Header.Get("Mcp-Session-Id")
			b.mu.Lock()
			defer b.mu.Unlock()
			if id := resp.Header.Get("Mcp-Session-Id"); b.routing == learnt && id != "" && session == "" {
				b.sessions[id] = i
			}
			b.log = append(b.log, balanced{replica: i, method: resp.Request.Header.Get("Mcp-Method"), name: resp.Request.Header.Get("Mcp-Name"),
				session: session, httpMethod: resp.Request.Method, path: resp.Request.URL.Path, status: resp.StatusCode})
			return nil
		},
	}
	return b, ln
}

// serve passes requests on to the replicas at urls (each scheme://host).
func (b *balancer) serve(t *testing.T, ln net.Listener, urls ...string) string {
	t.Helper()
	for _, u := range urls {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		b.replicas = append(b.replicas, &url.URL{Scheme: p.Scheme, Host: p.Host})
	}
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	session := r.Header.Get("Mcp-Session-Id")
	b.mu.Lock()
	i, ok := b.sessions[session]
	switch {
	case b.routing == hashed && session != "":
		h := fnv.New32a()
		h.Write([]byte(session))
		i = int(h.Sum32() % uint32(len(b.replicas)))
	case b.routing != learnt || !ok:
		i = b.next % len(b.replicas)
		b.next++
	}
	b.mu.Unlock()
	b.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), replicaKey{}, i)))
}

// calls is what the balancer passed on of method (name "" for any).
func (b *balancer) calls(method, name string) []balanced {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []balanced
	for _, r := range b.log {
		if r.method == method && (name == "" || r.name == name) {
			out = append(out, r)
		}
	}
	return out
}

// requests is every request the balancer passed on.
func (b *balancer) requests() []balanced {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]balanced(nil), b.log...)
}

// lastCall is the replica that answered the latest tools/call.
func (b *balancer) lastCall(t *testing.T) int {
	t.Helper()
	c := b.calls("tools/call", "")
	if len(c) == 0 {
		t.Fatal("the balancer passed on no tools/call")
	}
	return c[len(c)-1].replica
}

// nextIs makes the next request of the round-robin go to replica want,
// with peek calls of cs if needed (each runs on the replica its turn
// names, as any call does).
func (b *balancer) nextIs(t *testing.T, cs *mcp.ClientSession, want int) {
	t.Helper()
	for range len(b.replicas) {
		b.mu.Lock()
		at := b.next % len(b.replicas)
		b.mu.Unlock()
		if at == want {
			return
		}
		if res := callTool(t, cs, "peek", map[string]any{"text": "turn"}); res.IsError {
			t.Fatalf("peek: %s", resultText(res))
		}
	}
	t.Fatalf("the round-robin never reached replica %d", want)
}

// countingUpstream is an HTTP MCP server with countingUpstream's tools,
// counting the runs of each tool and text.
func countingUpstream(t *testing.T) (string, func(tool, text string) int) {
	t.Helper()
	var mu sync.Mutex
	runs := map[string]int{}
	s := mcp.NewServer(&mcp.Implementation{Name: "counting", Version: "v1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	type out struct {
		Done string `json:"done"`
	}
	for _, tool := range []string{"peek", "tick", "say", "pay"} {
		mcp.AddTool(s, &mcp.Tool{Name: tool, Description: tool + "s the text."},
			func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, out, error) {
				mu.Lock()
				runs[tool+" "+a.Text]++
				mu.Unlock()
				return nil, out{Done: tool + " " + a.Text}, nil
			})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp", func(tool, text string) int {
		mu.Lock()
		defer mu.Unlock()
		return runs[tool+" "+text]
	}
}

// personWithRoles is a person at the test's OpenID provider, with roles.
type personWithRoles struct {
	sub, tenant string
	roles       []string
}

func (u personWithRoles) ID() string { return u.sub }
func (u personWithRoles) Userinfo([]string) ([]byte, error) {
	return json.Marshal(map[string]string{"sub": u.sub})
}
func (u personWithRoles) Claims(_ []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	return &struct {
		*mockoidc.IDTokenClaims
		Tenant string   `json:"tenant"`
		Roles  []string `json:"roles"`
	}{base, u.tenant, u.roles}, nil
}

// decideOnPage signs person in at the OpenID provider from the page of a
// call (a browser of their own) and decides there (confirm, approve).
func decideOnPage(t *testing.T, op *mockoidc.MockOIDC, person personWithRoles, page, decision string) {
	t.Helper()
	if err := signInAndDecide(op, person, page, decision); err != nil {
		t.Fatal(err)
	}
}

// signInAndDecide is decideOnPage for any goroutine: it returns what went
// wrong.
func signInAndDecide(op *mockoidc.MockOIDC, person personWithRoles, page, decision string) error {
	op.QueueUser(person)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(page)
	if err != nil {
		return err
	}
	html, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(html)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.String() != page || csrf == nil {
		return fmt.Errorf("%s signed in: %d at %s\n%s", person.sub, resp.StatusCode, resp.Request.URL, html)
	}
	resp, err = browser.PostForm(page, url.Values{"decision": {decision}, "csrf": {string(csrf[1])}})
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s deciding %s on %s: %d", person.sub, decision, page, resp.StatusCode)
	}
	return nil
}

// replicaRedis is the URL of the replica tests' Redis database (10), or
// the test is skipped without one.
func replicaRedis(t *testing.T) string {
	t.Helper()
	redisURL := os.Getenv("AXGATE_REDIS_URL")
	if redisURL == "" {
		t.Skip("no Redis: set AXGATE_REDIS_URL (bash .ci/redis.sh prints one)")
	}
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/10"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redisstore.Open(ctx, u.String(), redisstore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Skipf("Redis at %s: %v", u.Redacted(), err)
	}
	s.Close()
	return u.String()
}

// TestMCPReplicasShareCallsAndDecisionsBehindARoundRobin: two axgate mcp
// processes (the real binary) with the same manifest, --redis, --signing-key
// and key set, in front of one HTTP upstream that counts its runs, behind a
// balancer that sends each request to the next replica. Through it, the
// go-sdk's client negotiates MCP 2026-07-28 (no session) and:
//   - its plain calls run, answered by both replicas;
//   - a rate limit holds across the replicas, not once per replica;
//   - a call held for the person's confirmation names the same request on
//     either replica; confirmed on the page of the replica that refused it,
//     it runs when repeated on the other replica, once: the next repeat is
//     refused;
//   - a call held for an admin's approval (input_required, its request
//     state signed by one replica), approved on that replica's page, runs
//     when the client's retry with that state reaches the other replica,
//     once: the same state again is refused, and so is a plain repeat; the
//     go-sdk's client as it comes (it retries input_required itself) is
//     sent to one replica's page and its retry runs on the other, once;
//   - a confirmation token, spent through one replica, is refused by the
//     other (already_used); a fresh one sent to both replicas at once runs
//     the call once.
func TestMCPReplicasShareCallsAndDecisionsBehindARoundRobin(t *testing.T) {
	redisURL := replicaRedis(t)
	op, secret := startOIDCProvider(t)
	upURL, runs := countingUpstream(t)
	pki := newServePKI(t)
	// People and a tenant of this run: approval requests stay in Redis.
	run := strings.ToLower(rand.Text()[:10])
	tenant := "acme-" + run
	alice := personWithRoles{sub: "alice-" + run, tenant: tenant, roles: []string{"editor"}}
	bob := personWithRoles{sub: "bob-" + run, tenant: tenant, roles: []string{"admin"}}
	agentToken := mint(t, "principal", "--key", pki.key, "--sub", alice.sub, "--tenant", tenant, "--roles", "editor", "--aud", agentsAudience)
	personToken := mint(t, "principal", "--key", pki.key, "--sub", alice.sub, "--tenant", tenant, "--roles", "editor", "--aud", peopleAudience)

	lb, ln := newBalancer(t, roundRobin)
	resource := "http://" + ln.Addr().String() + "/mcp"
	args := []string{"--manifest", replicasManifest, "--upstream-url", upURL, "--redis", redisURL,
		"--jwks", pki.jwks, "--signing-key", pki.key, "--audience", agentsAudience, "--resource-url", resource,
		"--human-audience", peopleAudience,
		"--oidc-issuer", op.Issuer(), "--oidc-client-id", op.Config().ClientID, "--oidc-client-secret-file", secret}
	replicas := []*gatewayProcess{startGatewayProcess(t, args...), startGatewayProcess(t, args...)}
	lbURL := lb.serve(t, ln, replicas[0].url, replicas[1].url)
	pagesOf := func(i int) string { return replicas[i].human + "/requests/" }

	cs := connect(t, lbURL, &http.Client{Transport: bearerTransport{agentToken}})
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s through the balancer, want 2026-07-28", v)
	}

	// Plain calls, answered by both replicas.
	for i := range 4 {
		text := "plain" + string(rune('a'+i))
		if res := callTool(t, cs, "peek", map[string]any{"text": text}); res.IsError || runs("peek", text) != 1 {
			t.Fatalf("peek %s: %s (ran %d times)", text, resultText(res), runs("peek", text))
		}
	}
	served := map[int]int{}
	for _, c := range lb.calls("tools/call", "peek") {
		served[c.replica]++
	}
	if served[0] == 0 || served[1] == 0 {
		t.Fatalf("the replicas answered %v of the peek calls, want some each", served)
	}

	// A rate limit (3/minute) holds across the replicas: three ticks, then
	// refused by either.
	for i := range 5 {
		res := callTool(t, cs, "tick", map[string]any{"text": "tick"})
		if i < 3 && res.IsError {
			t.Fatalf("tick %d: %s", i+1, resultText(res))
		}
		if i >= 3 {
			refused(t, res, "AXAG_RATE_LIMITED", "")
		}
	}
	served = map[int]int{}
	for _, c := range lb.calls("tools/call", "tick") {
		served[c.replica]++
	}
	if n := runs("tick", "tick"); n != 3 || served[0] == 0 || served[1] == 0 {
		t.Errorf("tick ran %d times, want 3; the replicas answered %v of the calls, want some each", n, served)
	}

	// A confirmation on one replica's page, the repeat on the other.
	say := map[string]any{"text": "confirmed"}
	d := refused(t, callTool(t, cs, "say", say), "AXAG_CONFIRMATION_MISSING", "")
	held := lb.lastCall(t)
	page, _ := d["decision_url"].(string)
	if !strings.HasPrefix(page, pagesOf(held)) {
		t.Fatalf("the refusal of replica %d names %q, want its page under %s", held, page, pagesOf(held))
	}
	// Repeated on the other replica before the person decided: the same
	// request, the same page.
	again := refused(t, callTool(t, cs, "say", say), "AXAG_CONFIRMATION_MISSING", "")
	if lb.lastCall(t) == held || again["decision_id"] != d["decision_id"] {
		t.Fatalf("the repeat before the decision, on replica %d, names request %v; want replica %d's request %v", lb.lastCall(t), again["decision_id"], held, d["decision_id"])
	}
	decideOnPage(t, op, alice, page, "confirm")
	lb.nextIs(t, cs, 1-held)
	if res := callTool(t, cs, "say", say); res.IsError {
		t.Fatalf("the repeat on replica %d after the person confirmed on replica %d: %s", 1-held, held, resultText(res))
	}
	if at := lb.lastCall(t); at != 1-held {
		t.Fatalf("the repeat reached replica %d, want %d", at, 1-held)
	}
	refused(t, callTool(t, cs, "say", say), "AXAG_CONFIRMATION_MISSING", "")
	if n := runs("say", "confirmed"); n != 1 {
		t.Errorf("the confirmed say ran %d times, want 1", n)
	}

	// An approval: input_required with one replica's request state, the
	// retry on the other.
	asker := connectWith(t, lbURL, agentToken, &mcp.ClientOptions{
		Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	pay := map[string]any{"text": "approved"}
	first := callTool(t, asker, "pay", pay)
	held = lb.lastCall(t)
	ask, ok := first.InputRequests[mcpgate.DecisionInputID].(*mcp.ElicitParams)
	if !first.NeedsInput() || !ok || ask.Mode != "url" || !strings.HasPrefix(ask.URL, pagesOf(held)) || first.RequestState == "" {
		t.Fatalf("want input_required with replica %d's page, got %+v (%s)", held, first, resultText(first))
	}
	decideOnPage(t, op, bob, ask.URL, "approve")
	retry := func() *mcp.CallToolResult {
		t.Helper()
		res, err := asker.CallTool(context.Background(), &mcp.CallToolParams{Name: "pay", Arguments: pay, RequestState: first.RequestState,
			InputResponses: mcp.InputResponseMap{mcpgate.DecisionInputID: &mcp.ElicitResult{Action: "accept"}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	lb.nextIs(t, asker, 1-held)
	if res := retry(); res.IsError || res.NeedsInput() {
		t.Fatalf("the retry on replica %d after the admin approved on replica %d: %s", 1-held, held, resultText(res))
	}
	if at := lb.lastCall(t); at != 1-held {
		t.Fatalf("the retry reached replica %d, want %d", at, 1-held)
	}
	if res := retry(); !res.IsError {
		t.Errorf("the same request state again, on replica %d, ran: %s", lb.lastCall(t), resultText(res))
	}
	refused(t, callTool(t, cs, "pay", pay), "AXAG_APPROVAL_MISSING", "")
	if n := runs("pay", "approved"); n != 1 {
		t.Errorf("the approved pay ran %d times, want 1", n)
	}

	// The go-sdk client as it comes (it takes input_required itself): sent
	// to the page of one replica, where the admin approves; its own retry
	// reaches the other replica and runs, once.
	var sentTo []string
	auto := connectWith(t, lbURL, agentToken, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			sentTo = append(sentTo, req.Params.URL)
			if err := signInAndDecide(op, bob, req.Params.URL, "approve"); err != nil {
				return nil, err
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	before := len(lb.calls("tools/call", "pay"))
	if res := callTool(t, auto, "pay", map[string]any{"text": "auto"}); res.IsError {
		t.Fatalf("the go-sdk's own retry after the approval: %s", resultText(res))
	}
	tries := lb.calls("tools/call", "pay")[before:]
	if len(sentTo) != 1 || len(tries) != 2 || !strings.HasPrefix(sentTo[0], pagesOf(tries[0].replica)) || tries[0].replica == tries[1].replica {
		t.Errorf("sent to %q; the call and its retry reached %+v, want the page of the first replica and the retry on the other", sentTo, tries)
	}
	if n := runs("pay", "auto"); n != 1 {
		t.Errorf("the go-sdk's approved pay ran %d times, want 1", n)
	}

	// A confirmation token: spent on one replica, refused by the other.
	confirm := func(text string) middleware.Credentials {
		t.Helper()
		code, body := post(t, replicas[0].human, "/confirmations", personToken, `{"tool":"say","arguments":{"text":"`+text+`"}}`)
		tok, _ := body["token"].(string)
		if code != http.StatusOK || tok == "" {
			t.Fatalf("confirmation of %s: %d %v", text, code, body)
		}
		return middleware.Credentials{Confirmation: tok}
	}
	spent := confirm("token")
	if res := callTool(t, cs, "say", map[string]any{"text": "token"}, spent); res.IsError {
		t.Fatalf("the call with its confirmation token: %s", resultText(res))
	}
	first1 := lb.lastCall(t)
	refused(t, callTool(t, cs, "say", map[string]any{"text": "token"}, spent), "AXAG_CONFIRMATION_MISSING", "already_used")
	if at := lb.lastCall(t); at == first1 {
		t.Fatalf("both calls with the token reached replica %d", at)
	}
	if n := runs("say", "token"); n != 1 {
		t.Errorf("the say of the token ran %d times, want 1", n)
	}
	// A fresh token sent to both replicas at once: one of them runs it.
	fresh := confirm("race")
	before = len(lb.calls("tools/call", "say"))
	results := make(chan *mcp.CallToolResult, 2)
	for range 2 {
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "say", Arguments: map[string]any{"text": "race"},
				Meta: mcpgate.CredentialsMeta(fresh)})
			if err != nil {
				res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
			}
			results <- res
		}()
	}
	ok1 := 0
	for range 2 {
		if res := <-results; !res.IsError {
			ok1++
		}
	}
	raced := lb.calls("tools/call", "say")[before:]
	if len(raced) != 2 || raced[0].replica == raced[1].replica {
		t.Errorf("the two calls with one token reached %v, want one replica each", raced)
	}
	if n := runs("say", "race"); ok1 != 1 || n != 1 {
		t.Errorf("one token sent to both replicas at once: %d answered, the upstream ran %d times; want 1 and 1", ok1, n)
	}
	for _, r := range replicas {
		r.stop(t)
	}
}

// connectWith connects the go-sdk's client with opts to url as the bearer
// of token.
func connectWith(t *testing.T, url, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, opts).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestMCPSessionsNeedAffinityOnMcpSessionId: MCP 2025-11-25 sessions live
// in the replica that began them. Behind a balancer with affinity on
// Mcp-Session-Id, learnt from the initialize answer, two clients pinned to
// 2025-11-25 each get a session of one replica, and every request of a
// session reaches its replica: lists and calls work end to end, including a
// confirmation. Behind a plain per-request round-robin, the second request
// of a session reaches the other replica, which answers HTTP 404 (the
// session is unknown there), and the client's connect fails with
// mcp.ErrSessionMissing.
func TestMCPSessionsNeedAffinityOnMcpSessionId(t *testing.T) {
	redisURL := replicaRedis(t)
	upURL, runs := countingUpstream(t)
	pki := newServePKI(t)
	run := strings.ToLower(rand.Text()[:10])
	tenant := "acme-" + run
	sub := "alice-" + run
	agentToken := mint(t, "principal", "--key", pki.key, "--sub", sub, "--tenant", tenant, "--roles", "editor", "--aud", agentsAudience)
	personToken := mint(t, "principal", "--key", pki.key, "--sub", sub, "--tenant", tenant, "--roles", "editor", "--aud", peopleAudience)
	pinned := func(url string) (*mcp.ClientSession, error) {
		return mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{agentToken}}},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	}

	sticky, stickyLn := newBalancer(t, learnt)
	plain, plainLn := newBalancer(t, roundRobin)
	hash, hashLn := newBalancer(t, hashed)
	args := func(ln net.Listener) []string {
		return []string{"--manifest", replicasManifest, "--upstream-url", upURL, "--redis", redisURL,
			"--jwks", pki.jwks, "--signing-key", pki.key, "--audience", agentsAudience, "--resource-url", "http://" + ln.Addr().String() + "/mcp",
			"--human-audience", peopleAudience}
	}
	a, b := startGatewayProcess(t, args(stickyLn)...), startGatewayProcess(t, args(stickyLn)...)
	stickyURL := sticky.serve(t, stickyLn, a.url, b.url)

	// With affinity: two sessions, one on each replica, each served by its
	// own replica alone.
	var sessions []*mcp.ClientSession
	for i := range 2 {
		cs, err := pinned(stickyURL)
		if err != nil {
			t.Fatalf("connect through the balancer with affinity: %v", err)
		}
		t.Cleanup(func() { cs.Close() })
		sessions = append(sessions, cs)
		if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" || cs.ID() == "" {
			t.Fatalf("negotiated %q, session %q; want 2025-11-25 with a session", v, cs.ID())
		}
		text := "sticky" + string(rune('a'+i))
		if tools := listed(t, cs); strings.Join(tools, " ") != "pay peek say tick" {
			t.Errorf("listed %v", tools)
		}
		if res := callTool(t, cs, "peek", map[string]any{"text": text}); res.IsError {
			t.Fatalf("peek in a session: %s", resultText(res))
		}
		refused(t, callTool(t, cs, "say", map[string]any{"text": text}), "AXAG_CONFIRMATION_MISSING", "")
		code, body := post(t, a.human, "/confirmations", personToken, `{"tool":"say","arguments":{"text":"`+text+`"}}`)
		tok, _ := body["token"].(string)
		if code != http.StatusOK || tok == "" {
			t.Fatalf("confirmation: %d %v", code, body)
		}
		if res := callTool(t, cs, "say", map[string]any{"text": text}, middleware.Credentials{Confirmation: tok}); res.IsError {
			t.Fatalf("the confirmed say in a session: %s", resultText(res))
		}
		if runs("peek", text) != 1 || runs("say", text) != 1 {
			t.Errorf("session %d: peek ran %d times, say %d; want 1 each", i, runs("peek", text), runs("say", text))
		}
	}
	bySession := map[string]map[int]int{}
	for _, r := range sticky.requests() {
		if r.session == "" {
			continue
		}
		if bySession[r.session] == nil {
			bySession[r.session] = map[int]int{}
		}
		bySession[r.session][r.replica]++
		if r.status == http.StatusNotFound {
			t.Errorf("replica %d did not know session %s", r.replica, r.session)
		}
	}
	replicaOf := map[int]bool{}
	for id, at := range bySession {
		if len(at) != 1 {
			t.Errorf("session %s reached replicas %v, want one", id, at)
		}
		for i := range at {
			replicaOf[i] = true
		}
	}
	if len(bySession) != 2 || len(replicaOf) != 2 {
		t.Errorf("sessions and their replicas: %v, want one session on each replica", bySession)
	}

	// A plain round-robin: the other replica does not know the session.
	// (The client's connect may pass: its GET for the server's messages
	// is allowed a 404.) Its calls alternate between the replicas, and the
	// one that reaches the other replica fails.
	plainURL := plain.serve(t, plainLn, a.url, b.url)
	cs, err := pinned(plainURL)
	if err == nil {
		sessions = append(sessions, cs)
		for range 2 {
			if _, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "peek", Arguments: map[string]any{"text": "plain"}}); err != nil {
				break
			}
		}
	}
	if !errors.Is(err, mcp.ErrSessionMissing) {
		t.Fatalf("a session through a plain round-robin: %v, want mcp.ErrSessionMissing; requests %+v", err, plain.requests())
	}
	var lost []balanced
	for _, r := range plain.requests() {
		if r.session != "" && r.status == http.StatusNotFound {
			lost = append(lost, r)
		}
	}
	if len(lost) == 0 || lost[0].replica != 1 {
		t.Errorf("requests through the plain round-robin: %+v, want replica 1 answering 404 to the session replica 0 began", plain.requests())
	}

	// Hashing Mcp-Session-Id is no affinity: the replica that began a
	// session (the initialize, which has no id yet) is not the one its id
	// hashes to, for about half of the sessions, and those fail as above.
	hashURL := hash.serve(t, hashLn, a.url, b.url)
	worked, failed := 0, 0
	for range 20 {
		cs, err := pinned(hashURL)
		if err == nil {
			sessions = append(sessions, cs)
			_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "peek", Arguments: map[string]any{"text": "hashed"}})
		}
		switch {
		case err == nil:
			worked++
		case errors.Is(err, mcp.ErrSessionMissing):
			failed++
		default:
			t.Fatalf("a session through a balancer hashing Mcp-Session-Id: %v", err)
		}
		if worked > 0 && failed > 0 {
			break
		}
	}
	t.Logf("hashed: %d worked, %d failed", worked, failed)
	if failed == 0 {
		t.Errorf("20 sessions through a balancer hashing Mcp-Session-Id all worked (%d): the replica of each was the one its id hashes to", worked)
	}

	for _, cs := range sessions {
		cs.Close()
	}
	a.stop(t)
	b.stop(t)
}
