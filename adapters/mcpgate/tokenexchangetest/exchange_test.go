package tokenexchangetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/token"
)

const (
	gatewayClient = "axgate-gateway"
	gatewaySecret = "gateway-secret"
	upstreamAud   = "https://notes.example.com/mcp"
	gatewayAud    = "https://gw.example.com/mcp"
)

// idp signs the callers' tokens (the identity provider the gateway and
// the authorization server both trust).
type idp struct {
	signer *token.Signer
	keys   token.KeySet
}

func newIDP(t *testing.T) *idp {
	t.Helper()
	s, err := token.GenerateDevKey("idp")
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := s.PublicJWKS()
	if err != nil {
		t.Fatal(err)
	}
	ks, err := token.ParseJWKS(jwks)
	if err != nil {
		t.Fatal(err)
	}
	return &idp{signer: s, keys: ks}
}

func (i *idp) token(t *testing.T, sub string) string {
	t.Helper()
	now := time.Now()
	tok, err := i.signer.Sign("JWT", jwt.MapClaims{"iss": "https://id.example.com", "sub": sub, "aud": gatewayAud,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "roles": []string{"user"}})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// asStorage is zitadel's example storage, with token exchange of the
// IdP's tokens (TokenExchangeTokensVerifierStorage), JWT access tokens,
// a count of the exchanges, and subjects it refuses.
type asStorage struct {
	*storage.Storage
	idp       *idp
	exchanges atomic.Int64
	mu        sync.Mutex
	refused   map[string]bool
}

type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

func (s *asStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

// ClientCredentials authenticates the gateway's service user, its tokens JWTs.
func (s *asStorage) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	c, err := s.Storage.ClientCredentials(ctx, id, secret)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

// ClientCredentialsTokenRequest issues the gateway's own token for the upstream.
func (s *asStorage) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	return &oidc.JWTTokenRequest{Subject: id, Audience: []string{upstreamAud}, Scopes: scopes}, nil
}

func (s *asStorage) VerifyExchangeSubjectToken(_ context.Context, tok string, tt oidc.TokenType) (string, string, map[string]any, error) {
	if tt != oidc.AccessTokenType {
		return "", "", nil, errors.New("only access tokens")
	}
	claims := jwt.MapClaims{}
	if _, err := jwt.ParseWithClaims(tok, claims, token.Keyfunc(s.idp.keys), jwt.WithAudience(gatewayAud)); err != nil {
		return "", "", nil, err
	}
	sub, _ := claims.GetSubject()
	return tok, sub, claims, nil
}

func (s *asStorage) VerifyExchangeActorToken(context.Context, string, oidc.TokenType) (string, string, map[string]any, error) {
	return "", "", nil, errors.New("no actor tokens")
}

func (s *asStorage) ValidateTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) error {
	s.exchanges.Add(1)
	s.mu.Lock()
	refused := s.refused[req.GetExchangeSubject()]
	s.mu.Unlock()
	if refused {
		return oidc.ErrAccessDenied().WithDescription("this subject may not use the upstream")
	}
	if req.GetRequestedTokenType() == "" {
		req.SetRequestedTokenType(oidc.AccessTokenType)
	}
	req.SetCurrentScopes(req.GetScopes())
	return nil
}

// startAS starts zitadel's OpenID provider, with one client (the gateway)
// allowed token exchange.
func startAS(t *testing.T, i *idp) (*asStorage, string) {
	t.Helper()
	st := &asStorage{
		Storage: storage.NewStorageWithClients(storage.NewUserStore("http://as.invalid"),
			map[string]*storage.Client{gatewayClient: storage.WebClient(gatewayClient, gatewaySecret)}),
		idp:     i,
		refused: map[string]bool{"mallory": true},
	}
	var issuer string
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	issuer = hs.URL
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		t.Fatal(err)
	}
	provider, err := op.NewOpenIDProvider(issuer, &op.Config{
		CryptoKey:                sha256.Sum256(key[:]),
		DefaultLogoutRedirectURI: "/",
		GrantTypeRefreshToken:    true,
		SupportedUILocales:       nil,
	}, st, op.WithAllowInsecure(), op.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/", provider)
	return st, issuer
}

// upstream is a Go MCP server over HTTP that takes only bearer tokens of
// its own audience, signed by the authorization server, and records whom
// each call came for and every token it saw.
type upstream struct {
	mu     sync.Mutex
	calls  []string // the sub of each tools/call
	tokens map[string]bool
	srv    *httptest.Server
}

func startUpstream(t *testing.T, issuer string) (*upstream, string) {
	t.Helper()
	ks, err := token.NewRemoteKeySet(issuer+"/keys", token.RemoteKeySetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ks.Close() })
	verify, err := httpgate.JWTBearer(httpgate.BearerConfig{Keyfunc: token.Keyfunc(ks), Issuer: issuer, Audience: upstreamAud})
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{tokens: map[string]bool{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "Who the call is for."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct {
			Sub string `json:"sub"`
		}, error) {
			sub, _ := ctx.Value(subKey{}).(string)
			u.mu.Lock()
			u.calls = append(u.calls, sub)
			u.mu.Unlock()
			return nil, struct {
				Sub string `json:"sub"`
			}{sub}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		u.mu.Lock()
		u.tokens[raw] = true
		u.mu.Unlock()
		p, err := verify(r)
		if err != nil {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), subKey{}, p.ID)))
	}))
	t.Cleanup(hs.Close)
	u.srv = hs
	return u, hs.URL
}

type subKey struct{}

const manifestDoc = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "notes.whoami", "entity": "notes", "action_type": "read", "operation_id": "whoami",
     "description": "Who the call is for.", "required_parameters": [], "optional_parameters": [],
     "required_roles": ["user"], "risk_level": "none", "idempotent": true, "scope": "global"}
  ]
}`

// TestTokenExchangePerCaller: a caller's call reaches the upstream with a
// token the authorization server issued for that caller and the
// upstream's audience, never the caller's own; two callers get two
// tokens, a second call hits the cache, and a refused exchange refuses
// the call before anything reaches the upstream.
func TestTokenExchangePerCaller(t *testing.T) {
	for path, opts := range map[string][]gateway.Option{
		"direct path": nil,
		// A call timeout over an eighth of the session timeout sends every
		// call through the SDK's server and client.
		"SDK path": {gateway.WithCallTimeout(time.Minute), gateway.WithSessionTimeout(2 * time.Minute)},
	} {
		t.Run(path, func(t *testing.T) { testTokenExchangePerCaller(t, opts) })
	}
}

func testTokenExchangePerCaller(t *testing.T, opts []gateway.Option) {
	r := newRig(t)
	as, up := r.as, r.up
	var logs strings.Builder
	var logMu sync.Mutex
	r.start(t, 0, slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug})), opts...)
	callerTokens, connect, whoami := r.callerTokens, r.connect, func(cs *mcp.ClientSession) string { t.Helper(); return r.whoami(t, cs) }

	alice, err := connect("alice")
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	bob, err := connect("bob")
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	if got := whoami(alice); got != "alice" {
		t.Errorf("alice's call reached the upstream for %q", got)
	}
	if got := whoami(alice); got != "alice" {
		t.Errorf("alice's second call reached the upstream for %q", got)
	}
	if got := whoami(bob); got != "bob" {
		t.Errorf("bob's call reached the upstream for %q", got)
	}
	// One exchange per caller: the second call of alice (and her session's
	// other requests) hit the cache.
	if n := as.exchanges.Load(); n != 2 {
		t.Errorf("the authorization server saw %d exchanges, want 2 (one per caller)", n)
	}

	up.mu.Lock()
	for user, tok := range callerTokens {
		if up.tokens[tok] {
			t.Errorf("the upstream saw %s's own token", user)
		}
	}
	seen := len(up.tokens)
	calls := len(up.calls)
	up.mu.Unlock()
	// The gateway's service user, alice's and bob's exchanged tokens.
	if seen != 3 {
		t.Errorf("the upstream saw %d distinct tokens, want 3 (the gateway's, alice's, bob's)", seen)
	}

	// mallory's exchange is refused: her session is refused, with the
	// reason, and nothing of hers reaches the upstream.
	_, err = connect("mallory")
	var re *jsonrpc.Error
	if !errors.As(err, &re) || !strings.Contains(string(re.Data), `"reason":"upstream_credentials"`) {
		t.Errorf("mallory's connect: %v, want a refusal with reason upstream_credentials", err)
	}
	up.mu.Lock()
	if len(up.tokens) != seen || len(up.calls) != calls {
		t.Errorf("mallory's refused session reached the upstream")
	}
	up.mu.Unlock()

	logMu.Lock()
	defer logMu.Unlock()
	for _, tok := range callerTokens {
		if strings.Contains(logs.String(), tok) {
			t.Errorf("a caller's token is in the gateway's log")
		}
	}
}

// rig is the authorization server, the upstream and the callers' IdP;
// start adds a gateway in front of the upstream.
type rig struct {
	idp          *idp
	as           *asStorage
	issuer       string
	up           *upstream
	upURL        string
	gwURL        string
	callerTokens map[string]string
}

func newRig(t *testing.T) *rig {
	r := &rig{idp: newIDP(t)}
	r.as, r.issuer = startAS(t, r.idp)
	r.up, r.upURL = startUpstream(t, r.issuer)
	r.callerTokens = map[string]string{"alice": r.idp.token(t, "alice"), "bob": r.idp.token(t, "bob"), "mallory": r.idp.token(t, "mallory")}
	return r
}

// start serves a gateway that exchanges the callers' tokens, keeping at
// most maxCallers of them (0: the default).
func (r *rig) start(t *testing.T, maxCallers int, logger *slog.Logger, opts ...gateway.Option) {
	t.Helper()
	m, err := manifest.Parse([]byte(manifestDoc))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	bearer, err := httpgate.JWTBearer(httpgate.BearerConfig{Keyfunc: token.Keyfunc(r.idp.keys), Issuer: "https://id.example.com", Audience: gatewayAud})
	if err != nil {
		t.Fatal(err)
	}
	te := &gateway.TokenExchange{TokenURL: r.issuer + "/oauth/token", ClientID: gatewayClient, ClientSecret: gatewaySecret,
		Audience: upstreamAud, MaxCallers: maxCallers}
	g, err := gateway.New(enf, gateway.Upstream{URL: r.upURL, Credentials: &gateway.UpstreamCredentials{
		// The gateway's own session (the pins at start) has no caller: the
		// gateway's service user.
		ClientCredentials: &clientcredentials.Config{TokenURL: r.issuer + "/oauth/token", ClientID: "sid1", ClientSecret: "verysecret"},
		TokenExchange:     te,
	}}, append([]gateway.Option{gateway.WithBearer(bearer, &oauthex.ProtectedResourceMetadata{Resource: gatewayAud}), gateway.WithLogger(logger)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	hs := httptest.NewServer(g.Handler())
	t.Cleanup(hs.Close)
	r.gwURL = hs.URL + "/mcp"
}

func (r *rig) connect(user string) (*mcp.ClientSession, error) {
	return r.connectOn(user, onSession)
}

// onSession makes the client speak MCP 2025-11-25, with a session (the
// exchange happens at its initialize); nil lets it ask for 2026-07-28,
// stateless (the exchange happens at the caller's first request).
var onSession = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// connectOn connects user's client with opts.
func (r *rig) connectOn(user string, opts *mcp.ClientSessionOptions) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: user, Version: "v1"}, nil)
	return c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: r.gwURL,
		HTTPClient: &http.Client{Transport: withBearer{r.callerTokens[user], http.DefaultTransport}}}, opts)
}

// TestTokenExchangeStatelessCaller: a 2026-07-28 caller (no session, no
// initialize) reaches the upstream with its own exchanged token too, and a
// caller whose exchange is refused is refused at its call, with the
// reason, and reaches nothing.
func TestTokenExchangeStatelessCaller(t *testing.T) {
	r := newRig(t)
	r.start(t, 0, slog.New(slog.DiscardHandler))
	alice, err := r.connectOn("alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if v := alice.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("alice's client negotiated %s, want 2026-07-28", v)
	}
	if got := r.whoami(t, alice); got != "alice" {
		t.Errorf("alice's stateless call reached the upstream for %q", got)
	}
	r.up.mu.Lock()
	seen, calls := len(r.up.tokens), len(r.up.calls)
	for user, tok := range r.callerTokens {
		if r.up.tokens[tok] {
			t.Errorf("the upstream saw %s's own token", user)
		}
	}
	r.up.mu.Unlock()

	mallory, err := r.connectOn("mallory", nil)
	if err == nil {
		defer mallory.Close()
		res, cerr := mallory.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
		raw, _ := json.Marshal(res)
		var re *jsonrpc.Error
		switch {
		case errors.As(cerr, &re) && strings.Contains(string(re.Data), `"reason":"upstream_credentials"`):
		case cerr == nil && res.IsError && strings.Contains(string(raw), "upstream_credentials"):
		default:
			t.Errorf("mallory's stateless call: %v %s, want a refusal with reason upstream_credentials", cerr, raw)
		}
	} else if re := (*jsonrpc.Error)(nil); !errors.As(err, &re) || !strings.Contains(string(re.Data), `"reason":"upstream_credentials"`) {
		t.Errorf("mallory's connect: %v, want it to succeed or be refused with reason upstream_credentials", err)
	}
	r.up.mu.Lock()
	if len(r.up.calls) != calls || len(r.up.tokens) != seen {
		t.Errorf("mallory's refused call reached the upstream")
	}
	r.up.mu.Unlock()
}

// call calls whoami as cs's caller.
func (r *rig) call(t *testing.T, cs *mcp.ClientSession) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// whoami is whom the upstream saw cs's call for.
func (r *rig) whoami(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	res := r.call(t, cs)
	if res.IsError {
		raw, _ := json.Marshal(res)
		t.Fatalf("whoami refused: %s", raw)
	}
	var out struct {
		Sub string `json:"sub"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out.Sub
}

// TestTokenExchangeCacheBoundRefusedCall: with room for one caller's
// token, bob's evicts alice's; her next call exchanges again, and when the
// authorization server now refuses her, that call is refused with reason
// upstream_credentials and does not reach the upstream.
func TestTokenExchangeCacheBoundRefusedCall(t *testing.T) {
	r := newRig(t)
	r.start(t, 1, slog.New(slog.DiscardHandler))
	alice, err := r.connect("alice")
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if got := r.whoami(t, alice); got != "alice" {
		t.Fatalf("alice's call reached the upstream for %q", got)
	}
	bob, err := r.connect("bob")
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	if got := r.whoami(t, bob); got != "bob" {
		t.Fatalf("bob's call reached the upstream for %q", got)
	}
	r.as.mu.Lock()
	r.as.refused["alice"] = true
	r.as.mu.Unlock()
	r.up.mu.Lock()
	before := len(r.up.calls)
	r.up.mu.Unlock()

	res := r.call(t, alice)
	raw, _ := json.Marshal(res)
	if !res.IsError || !strings.Contains(string(raw), `upstream_credentials`) || !strings.Contains(string(raw), `access_denied`) {
		t.Errorf("alice's call after her exchange is refused: %s, want a refusal with reason upstream_credentials naming access_denied", raw)
	}
	r.up.mu.Lock()
	defer r.up.mu.Unlock()
	if len(r.up.calls) != before {
		t.Errorf("a call whose exchange was refused reached the upstream: %v", r.up.calls[before:])
	}
}

type withBearer struct {
	token string
	next  http.RoundTripper
}

func (b withBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
