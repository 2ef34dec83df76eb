// Package upcreds holds the gateway's own credentials to an upstream MCP server.
//
// They are static headers and environment variables read from files, an
// OAuth 2.0 client credentials token, and per-caller tokens obtained by
// RFC 8693 token exchange. It never forwards the caller's own token: the
// HTTP requests it sees carry none (the gateway strips them), and it
// removes an Authorization header before it sets its own.
package upcreds

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/sync/singleflight"
)

// Token types and the grant of RFC 8693.
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeAccess    = "urn:ietf:params:oauth:token-type:access_token"
)

// DefaultMaxCallers bounds the exchanged tokens kept, one per caller.
const DefaultMaxCallers = 10000

// tokenTimeout bounds a request to a token endpoint: one that hangs
// fails the calls waiting on it rather than holding them.
const tokenTimeout = 30 * time.Second

// noExpiryTTL is how long an exchanged token that came without expires_in
// is kept.
const noExpiryTTL = time.Minute

// Exchange configures RFC 8693 token exchange.
type Exchange struct {
	TokenURL     string
	ClientID     string
	ClientSecret string
	Audience     string
	Resource     string
	Scopes       []string
	MaxCallers   int
}

// Config is what a Set is made from.
type Config struct {
	HeaderFiles       map[string]string
	EnvFiles          map[string]string
	ClientCredentials *clientcredentials.Config
	Exchange          *Exchange
	// HTTPClient carries the requests to the token endpoints (nil: a
	// client with a timeout of tokenTimeout).
	HTTPClient *http.Client
}

// Set is the credentials of one upstream.
type Set struct {
	headerFiles map[string]string
	envFiles    map[string]string
	headers     atomic.Pointer[http.Header]
	env         atomic.Pointer[[]string]
	cc          oauth2.TokenSource
	ex          *exchanger
	httpClient  *http.Client
}

// New reads the files of cfg and returns its Set.
func New(cfg Config) (*Set, error) {
	s := &Set{headerFiles: cfg.HeaderFiles, envFiles: cfg.EnvFiles, httpClient: cfg.HTTPClient}
	if s.httpClient == nil {
		s.httpClient = &http.Client{Timeout: tokenTimeout}
	}
	for name := range cfg.HeaderFiles {
		if name == "" || !validHeaderName(name) {
			return nil, fmt.Errorf("upstream credentials: %q is not an HTTP header name", name)
		}
	}
	for name := range cfg.EnvFiles {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return nil, fmt.Errorf("upstream credentials: %q is not an environment variable name", name)
		}
	}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	if cc := cfg.ClientCredentials; cc != nil {
		if cc.TokenURL == "" || cc.ClientID == "" {
			return nil, errors.New("upstream credentials: client credentials need a token URL and a client id")
		}
		s.cc = cc.TokenSource(s.tokenContext(context.Background()))
	}
	if ex := cfg.Exchange; ex != nil {
		if ex.TokenURL == "" || ex.ClientID == "" {
			return nil, errors.New("upstream credentials: token exchange needs a token URL and a client id")
		}
		if ex.Audience == "" && ex.Resource == "" {
			return nil, errors.New("upstream credentials: token exchange needs the upstream's audience or resource")
		}
		max := ex.MaxCallers
		if max <= 0 {
			max = DefaultMaxCallers
		}
		s.ex = &exchanger{cfg: *ex, max: max, byKey: map[string]*list.Element{}, order: list.New()}
	}
	return s, nil
}

func validHeaderName(name string) bool {
	for _, r := range name {
		if r > 0x7e || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}

// Reload reads the header and environment files again; on an error the
// values read before are kept.
func (s *Set) Reload() error {
	h := http.Header{}
	for name, path := range s.headerFiles {
		v, err := readSecret(path)
		if err != nil {
			return fmt.Errorf("upstream credentials: header %s: %w", name, err)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("upstream credentials: header %s: the file %s holds more than one line", name, path)
		}
		h.Set(name, v)
	}
	env := make([]string, 0, len(s.envFiles))
	for name, path := range s.envFiles {
		v, err := readSecret(path)
		if err != nil {
			return fmt.Errorf("upstream credentials: environment variable %s: %w", name, err)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("upstream credentials: environment variable %s: the file %s holds a NUL byte", name, path)
		}
		env = append(env, name+"="+v)
	}
	s.headers.Store(&h)
	s.env.Store(&env)
	return nil
}

// readSecret is a file's content without its trailing line ends. The
// error names the file, never its content.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("the file %s does not exist", path)
		}
		return "", fmt.Errorf("the file %s cannot be read", path)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// Env is the environment variables read from the files, NAME=VALUE.
func (s *Set) Env() []string {
	if s == nil {
		return nil
	}
	return *s.env.Load()
}

// PerCaller reports whether the Set exchanges each caller's token.
func (s *Set) PerCaller() bool { return s != nil && s.ex != nil }

// Caller is the caller of a request to the upstream: Key identifies it
// (its tenant and user), Token is the bearer token the gateway verified,
// Expires when that token expires (zero: unknown). An exchanged token is
// not kept past the caller's own.
type Caller struct {
	Key     string
	Token   string
	Expires time.Time
}

type callerKey struct{}

// WithCaller carries c to the upstream requests made with ctx.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom is the caller WithCaller put in ctx, or nil.
func CallerFrom(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

// Error is why a credential for the upstream could not be had.
type Error struct {
	// Exchange: the token exchange failed (else the client credentials).
	Exchange bool
	// Refused: the token endpoint answered with an error (not passing).
	Refused bool
	// Code is the token endpoint's OAuth error code, if any.
	Code string
	err  error
}

func (e *Error) Error() string {
	what := "client credentials grant"
	if e.Exchange {
		what = "token exchange"
	}
	if e.Code != "" {
		return fmt.Sprintf("upstream credentials: the %s was refused: %s", what, e.Code)
	}
	return fmt.Sprintf("upstream credentials: the %s failed: %v", what, e.err)
}

func (e *Error) Unwrap() error { return e.err }

func credError(exchange bool, err error) *Error {
	e := &Error{Exchange: exchange, err: err}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		e.Code = re.ErrorCode
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		// 4xx is the endpoint's answer about this request; 5xx and 429 pass.
		e.Refused = status >= 400 && status < 500 && status != http.StatusTooManyRequests
		// The body is the endpoint's, not ours to log whole.
		e.err = errors.New(re.ErrorCode)
	}
	return e
}

// Authorization is the Authorization header value of a request made with
// ctx: the exchanged token of its caller (with token exchange and a
// caller), else the client credentials token, else "".
func (s *Set) Authorization(ctx context.Context) (string, error) {
	if s.ex != nil {
		if c := CallerFrom(ctx); c != nil {
			tok, err := s.ex.token(s.tokenContext(ctx), c)
			if err != nil {
				return "", err
			}
			return bearer(tok), nil
		}
	}
	if s.cc != nil {
		tok, err := s.cc.Token()
		if err != nil {
			return "", credError(false, err)
		}
		return bearer(tok), nil
	}
	return "", nil
}

func bearer(t *oauth2.Token) string { return "Bearer " + t.AccessToken }

func (s *Set) tokenContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, s.httpClient)
}

// Transport sets the Set's headers and Authorization on each request, and
// removes any Authorization it did not set. A credential that cannot be
// had fails the request: it is not sent.
func (s *Set) Transport(next http.RoundTripper) http.RoundTripper {
	return &transport{s: s, next: next}
}

type transport struct {
	s    *Set
	next http.RoundTripper
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	authz, err := t.s.Authorization(r.Context())
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	r2 := r.Clone(r.Context())
	r2.Header.Del("Authorization")
	r2.Header.Del("Proxy-Authorization")
	for name, vs := range *t.s.headers.Load() {
		r2.Header[name] = vs
	}
	if authz != "" {
		r2.Header.Set("Authorization", authz)
	}
	return t.next.RoundTrip(r2)
}

// exchanger exchanges callers' tokens, keeping the newest max of them
// until they expire.
type exchanger struct {
	cfg    Exchange
	max    int
	flight singleflight.Group
	// Exchanges counts the token requests sent.
	exchanges atomic.Int64

	mu    sync.Mutex
	byKey map[string]*list.Element // of *entry
	order *list.List               // most recently used first
}

type entry struct {
	key     string
	tok     *oauth2.Token
	expires time.Time
}

func (x *exchanger) cached(key string) *oauth2.Token {
	x.mu.Lock()
	defer x.mu.Unlock()
	el, ok := x.byKey[key]
	if !ok {
		return nil
	}
	e := el.Value.(*entry)
	// oauth2's Valid leaves a margin before the expiry.
	if !e.tok.Valid() || !time.Now().Before(e.expires) {
		x.order.Remove(el)
		delete(x.byKey, key)
		return nil
	}
	x.order.MoveToFront(el)
	return e.tok
}

func (x *exchanger) keep(key string, tok *oauth2.Token, callerExpires time.Time) {
	expires := tok.Expiry
	if expires.IsZero() {
		expires = time.Now().Add(noExpiryTTL)
	}
	if !callerExpires.IsZero() && callerExpires.Before(expires) {
		expires = callerExpires
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if el, ok := x.byKey[key]; ok {
		el.Value = &entry{key: key, tok: tok, expires: expires}
		x.order.MoveToFront(el)
		return
	}
	x.byKey[key] = x.order.PushFront(&entry{key: key, tok: tok, expires: expires})
	for x.order.Len() > x.max {
		last := x.order.Back()
		x.order.Remove(last)
		delete(x.byKey, last.Value.(*entry).key)
	}
}

func (x *exchanger) token(ctx context.Context, c *Caller) (*oauth2.Token, error) {
	if c.Key == "" || c.Token == "" {
		return nil, &Error{Exchange: true, Refused: true, err: errors.New("the call has no verified bearer token to exchange")}
	}
	if tok := x.cached(c.Key); tok != nil {
		return tok, nil
	}
	// One exchange per caller at a time; the key holds no token.
	ch := x.flight.DoChan(c.Key, func() (any, error) {
		if tok := x.cached(c.Key); tok != nil {
			return tok, nil
		}
		params := map[string][]string{
			"grant_type":           {grantTokenExchange},
			"subject_token":        {c.Token},
			"subject_token_type":   {tokenTypeAccess},
			"requested_token_type": {tokenTypeAccess},
		}
		if x.cfg.Audience != "" {
			params["audience"] = []string{x.cfg.Audience}
		}
		if x.cfg.Resource != "" {
			params["resource"] = []string{x.cfg.Resource}
		}
		conf := clientcredentials.Config{
			ClientID: x.cfg.ClientID, ClientSecret: x.cfg.ClientSecret, TokenURL: x.cfg.TokenURL,
			Scopes: x.cfg.Scopes, EndpointParams: params, AuthStyle: oauth2.AuthStyleInHeader,
		}
		x.exchanges.Add(1)
		// The exchange outlives one caller's cancellation: others may wait on it.
		tok, err := conf.Token(context.WithoutCancel(ctx))
		if err != nil {
			return nil, credError(true, err)
		}
		if tok.AccessToken == "" {
			return nil, &Error{Exchange: true, err: errors.New("the token endpoint answered without an access token")}
		}
		x.keep(c.Key, tok, c.Expires)
		return tok, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*oauth2.Token), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
