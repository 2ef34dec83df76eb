package httpgate

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"

	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// OIDCConfig configures the people's sign-in to the pages of NewHumanHandler
// with an OpenID Connect provider (WithOIDCSignIn).
type OIDCConfig struct {
	// Issuer is the provider's issuer URL (required); its discovery
	// document is fetched at the first sign-in (and again until it loads).
	Issuer string
	// ClientID is this application's client at the provider (required).
	ClientID string
	// ClientSecret is the client's secret; empty for a public client (the
	// code is protected by PKCE in both cases).
	ClientSecret string
	// RedirectURL is the public URL of the handler's /callback, as
	// registered at the provider (required), e.g.
	// https://axgate.example/people/callback. An https URL marks the
	// session cookie Secure even behind a proxy that terminates TLS.
	RedirectURL string
	// Scopes asked for besides "openid"; default "profile" and "email".
	Scopes []string
	// TenantClaim and RolesClaim name the ID token's claims holding the
	// person's tenant (a string) and roles (an array of strings, or one
	// space-separated string), as in BearerConfig; default "tenant" and
	// "roles". The person is the token's "sub".
	TenantClaim, RolesClaim string
	// HTTPClient talks to the provider; default a client with a 15 s
	// timeout.
	HTTPClient *http.Client
	// CookieKey signs the pages' cookies (the sign-in in progress and the
	// session, HS256), at least 32 random bytes: replicas given the same
	// key, and the same store of spent tokens for their enforcer
	// (axgate.WithReplayStore), sign a person in on one and let them
	// decide on another. Use it for nothing else. When nil, each handler
	// signs with a random key of its own, which no other process accepts;
	// a shorter key makes every sign-in fail with 500 and a logged error.
	CookieKey []byte
}

// WithOIDCSignIn signs people in to the pages of NewHumanHandler with an OpenID Connect provider.
//
// It uses the authorization code flow with PKCE (S256), a nonce, and a
// state bound to the browser that started the sign-in. A configuration
// missing Issuer, ClientID or RedirectURL makes every sign-in fail with 500
// and a logged error; other handlers ignore the option.
func WithOIDCSignIn(cfg OIDCConfig) Option {
	return func(c *config) { c.signIn = &signIn{oidc: &oidcSignIn{cfg: cfg}} }
}

// DevSignIn lets anyone who can reach the pages of NewHumanHandler sign in as one of users, by picking one.
//
// It is for demonstrations and tests on a developer's machine only (the
// examples/shop walkthrough): there is no password. It is never enabled
// unless a program passes it by name, and WithOIDCSignIn, when given too,
// takes precedence. Users without an ID are left out.
func DevSignIn(users ...middleware.Principal) Option {
	var list []middleware.Principal
	for _, u := range users {
		if u.ID != "" {
			list = append(list, u)
		}
	}
	return func(c *config) {
		if c.signIn == nil || c.signIn.oidc == nil {
			c.signIn = &signIn{dev: list}
		}
	}
}

// signIn is how people sign in to the pages: an OIDC provider, or the dev
// list.
type signIn struct {
	oidc *oidcSignIn
	dev  []middleware.Principal
}

type oidcSignIn struct {
	cfg OIDCConfig

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
	oauth    *oauth2.Config
}

// load fetches the provider's discovery document once it succeeds.
func (o *oidcSignIn) load(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.oauth != nil {
		return o.oauth, o.verifier, nil
	}
	c := o.cfg
	if c.Issuer == "" || c.ClientID == "" || c.RedirectURL == "" {
		return nil, nil, errors.New("httpgate: WithOIDCSignIn needs an Issuer, a ClientID and a RedirectURL")
	}
	// The key set the provider returns keeps this context for its later
	// fetches: not the request's, which ends with it.
	pctx := oidc.ClientContext(context.WithoutCancel(ctx), o.client())
	p, err := oidc.NewProvider(pctx, c.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("httpgate: OIDC discovery of %s: %w", c.Issuer, err)
	}
	scopes := c.Scopes
	if scopes == nil {
		scopes = []string{"profile", "email"}
	}
	o.oauth = &oauth2.Config{
		ClientID: c.ClientID, ClientSecret: c.ClientSecret, RedirectURL: c.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: append([]string{oidc.ScopeOpenID}, scopes...),
	}
	o.verifier = p.Verifier(&oidc.Config{ClientID: c.ClientID})
	return o.oauth, o.verifier, nil
}

func (o *oidcSignIn) client() *http.Client {
	if o.cfg.HTTPClient != nil {
		return o.cfg.HTTPClient
	}
	return defaultOIDCClient
}

// defaultOIDCClient talks to the provider when OIDCConfig has no client:
// bounded in time, so that a provider that hangs does not hold sign-ins
// (and the discovery's lock) forever.
var defaultOIDCClient = &http.Client{Timeout: 15 * time.Second}

// principal maps an ID token's claims to the person, as JWTBearer maps a
// bearer token's.
func (o *oidcSignIn) principal(claims map[string]any) (middleware.Principal, error) {
	p := middleware.Principal{Claims: claims}
	var ok bool
	if p.ID, ok = claims["sub"].(string); !ok || p.ID == "" {
		return p, errors.New("the ID token names no subject (sub)")
	}
	tc, rc := o.cfg.TenantClaim, o.cfg.RolesClaim
	if tc == "" {
		tc = defaultTenantClaim
	}
	if rc == "" {
		rc = defaultRolesClaim
	}
	if v, ok := claims[tc]; ok {
		if p.Tenant, ok = v.(string); !ok {
			return p, fmt.Errorf("the ID token's %q claim is not a string", tc)
		}
	}
	if v, ok := claims[rc]; ok {
		if p.Roles, ok = stringList(v); !ok {
			return p, fmt.Errorf("the ID token's %q claim is not a list of strings", rc)
		}
	}
	return p, nil
}

// Lifetimes and names of the pages' cookies.
const (
	sessionLifetime = 8 * time.Hour
	signInLifetime  = 10 * time.Minute
	sessionCookie   = "axgate_session"
	signInCookie    = "axgate_signin"
	// maxCookieBytes bounds the session cookie (browsers keep about 4 KiB
	// of a cookie): a person whose roles would not fit is not signed in.
	maxCookieBytes = 3800
	// cookieKeySize is the least length of OIDCConfig.CookieKey.
	cookieKeySize = 32
	// cookieLeeway is the clock skew between replicas a cookie's times
	// are given.
	cookieLeeway = 30 * time.Second
)

// session is a signed-in person: who they are, the session's id, and the
// token their forms carry against cross-site requests.
type session struct {
	id      string
	person  middleware.Principal
	csrf    string
	expires time.Time
}

// pendingSignIn is a sign-in sent to the provider and not yet back: the
// PKCE verifier, the nonce, and where to go afterwards. It is kept by the
// browser that started it, in its sign-in cookie (a JWT the handler signs,
// named by the sign-in's state), not by the server: a flood of sign-ins
// started by others fills no store and evicts no one's sign-in.
type pendingSignIn struct {
	verifier, nonce, next string
	state                 string    // the sign-in's state (the cookie's JWT id)
	expires               time.Time // the cookie's expiry
}

// pendingClaims is a pendingSignIn as the claims of the sign-in cookie.
type pendingClaims struct {
	Verifier string `json:"pkce"`
	Nonce    string `json:"nonce"`
	Next     string `json:"next"`
	jwt.RegisteredClaims
}

// sessionClaims is a session as the claims of the session cookie: the
// person is the subject, the session's id the JWT id.
type sessionClaims struct {
	Tenant string   `json:"tenant,omitempty"`
	Roles  []string `json:"roles,omitempty"`
	CSRF   string   `json:"csrf"`
	jwt.RegisteredClaims
}

// The audiences separate the two cookies from each other and from any
// other use of the key.
const (
	signInAudience  = "axgate/httpgate/signin/v1"
	sessionAudience = "axgate/httpgate/session/v1"
)

// Prefixes of the ids the pages record in the replay store, and the tenant
// they are recorded under (a memory store bounds each tenant's share: the
// pages' records never crowd out a tenant's spent tokens).
const (
	signInUse   = "httpgate-signin:"
	sessionUse  = "httpgate-session:"
	pagesTenant = "axgate/httpgate/pages"
)

// sessions signs and checks the pages' cookies. Nothing of a session is
// kept by the server but what must be remembered across replicas: the
// sign-in states that came back (each is taken once) and the sessions that
// ended (signed out, or replaced by a new sign-in), in the replay store
// until they expire.
type sessions struct {
	key    []byte // signs the cookies
	keyErr error  // a CookieKey too short: no cookie is signed or accepted
	replay token.ReplayStore
	now    func() time.Time
}

// newSessions signs with key (a random key of the process when nil) and
// records in replay (a memory store of its own when nil).
func newSessions(key []byte, replay token.ReplayStore) *sessions {
	s := &sessions{replay: replay, now: time.Now}
	switch {
	case key == nil:
		s.key = make([]byte, cookieKeySize)
		rand.Read(s.key) // crypto/rand.Read never fails (it crashes the program instead).
	case len(key) < cookieKeySize:
		s.keyErr = fmt.Errorf("httpgate: OIDCConfig.CookieKey has %d bytes, at least %d are needed", len(key), cookieKeySize)
	default:
		s.key = bytes.Clone(key)
	}
	if s.replay == nil {
		s.replay = token.NewMemoryReplayStore(token.MemoryReplayOptions{Now: func() time.Time { return s.now() }})
	}
	return s
}

// errStore is a replay store that failed: the page answers 503, never a
// sign-in it could not check.
var errStore = errors.New("httpgate: the store of the pages' sessions is unavailable")

// parse verifies a cookie of audience aud signed with the key, unexpired,
// and issued after the replay store began to remember (a store that
// forgets on restart could not tell an ended session from a live one).
func (s *sessions) parse(raw, aud string, claims jwt.Claims) bool {
	if s.keyErr != nil || raw == "" || len(raw) > maxCookieBytes {
		return false
	}
	_, err := jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return s.key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(), jwt.WithLeeway(cookieLeeway), jwt.WithAudience(aud), jwt.WithTimeFunc(s.now))
	if err != nil {
		return false
	}
	iat, _ := claims.GetIssuedAt()
	if iat == nil {
		return false
	}
	if r, ok := s.replay.(interface{ RemembersSince() time.Time }); ok && iat.Before(r.RemembersSince().Truncate(time.Second)) {
		return false
	}
	return true
}

func (s *sessions) sign(claims jwt.Claims) (string, error) {
	if s.keyErr != nil {
		return "", s.keyErr
	}
	v, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.key)
	if err == nil && len(v) > maxCookieBytes {
		return "", fmt.Errorf("httpgate: the cookie would have %d bytes, more than %d (too many roles?)", len(v), maxCookieBytes)
	}
	return v, err
}

// start signs a session for p under a new random id (never one the
// browser brought: no fixation) and ends the session of the cookie old,
// if any.
func (s *sessions) start(ctx context.Context, p middleware.Principal, old string) (cookie string, sess *session, err error) {
	if prev, err := s.get(ctx, old); err != nil {
		return "", nil, err
	} else if prev != nil {
		if err := s.end(ctx, prev); err != nil {
			return "", nil, err
		}
	}
	now := s.now()
	sess = &session{id: rand.Text() + rand.Text(), person: p, csrf: rand.Text() + rand.Text(), expires: now.Add(sessionLifetime).Truncate(time.Second)}
	claims := sessionClaims{Tenant: p.Tenant, Roles: p.Roles, CSRF: sess.csrf, RegisteredClaims: jwt.RegisteredClaims{
		Subject: p.ID, ID: sess.id, Audience: jwt.ClaimStrings{sessionAudience},
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(sess.expires),
	}}
	cookie, err = s.sign(claims)
	return cookie, sess, err
}

// get returns the live session of the session cookie, nil when there is
// none (absent, forged, expired, ended), or errStore.
func (s *sessions) get(ctx context.Context, cookie string) (*session, error) {
	var c sessionClaims
	if !s.parse(cookie, sessionAudience, &c) || c.Subject == "" || c.ID == "" || c.CSRF == "" {
		return nil, nil
	}
	ended, err := s.replay.Used(ctx, sessionUse+c.ID)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errStore, err)
	}
	if ended {
		return nil, nil
	}
	p := middleware.Principal{ID: c.Subject, Tenant: c.Tenant, Roles: c.Roles}
	return &session{id: c.ID, person: p, csrf: c.CSRF, expires: c.ExpiresAt.Time}, nil
}

// end records the session ended, until it would have expired, on every
// replica sharing the replay store.
func (s *sessions) end(ctx context.Context, sess *session) error {
	err := s.replay.Consume(ctx, []token.Use{{ID: sessionUse + sess.id, Expires: sess.expires, Tenant: pagesTenant}})
	if err != nil && !errors.Is(err, token.ErrReplayed) {
		return fmt.Errorf("%w: %w", errStore, err)
	}
	return nil
}

// begin returns the state of a new sign-in and the value of the
// browser's sign-in cookie that holds it.
func (s *sessions) begin(p *pendingSignIn) (state, cookie string, err error) {
	state = rand.Text() + rand.Text()
	now := s.now()
	claims := pendingClaims{Verifier: p.verifier, Nonce: p.nonce, Next: p.next, RegisteredClaims: jwt.RegisteredClaims{
		ID: state, Audience: jwt.ClaimStrings{signInAudience},
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(signInLifetime)),
	}}
	cookie, err = s.sign(claims)
	return state, cookie, err
}

// pending returns the sign-in of state if the browser's sign-in cookie is
// the one begin gave for it and it has not expired, or nil. It records
// nothing: take does, once the provider has confirmed the sign-in, so that
// callbacks made up by anyone (a sign-in cookie costs a GET) fill no store.
func (s *sessions) pending(state, cookie string) *pendingSignIn {
	if state == "" {
		return nil
	}
	var c pendingClaims
	if !s.parse(cookie, signInAudience, &c) || subtle.ConstantTimeCompare([]byte(state), []byte(c.ID)) != 1 {
		return nil
	}
	return &pendingSignIn{verifier: c.Verifier, nonce: c.Nonce, next: c.Next, state: c.ID, expires: c.ExpiresAt.Time}
}

// take records the sign-in taken, once across the replicas sharing the
// replay store, until it would have expired: false when it was taken
// before, or errStore.
func (s *sessions) take(ctx context.Context, p *pendingSignIn) (bool, error) {
	err := s.replay.Consume(ctx, []token.Use{{ID: signInUse + p.state, Expires: p.expires, Tenant: pagesTenant}})
	switch {
	case errors.Is(err, token.ErrReplayed):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%w: %w", errStore, err)
	}
	return true, nil
}

// nextPath matches where a sign-in may send the person afterwards: the
// inbox or one request's page, relative to the handler. Anything else (an
// absolute URL, //host, a backslash, javascript:) goes to the inbox: no
// open redirect.
var nextPath = regexp.MustCompile(`^/(requests/[A-Za-z0-9_-]{1,128})?$`)

func safeNext(v string) string {
	if nextPath.MatchString(v) {
		return v
	}
	return "/"
}

// basePath is the path the handler is mounted under (http.StripPrefix's
// prefix), read off the request line, or "" at the root: links and
// redirects are that plus the handler's own paths, so always same-origin.
var basePattern = regexp.MustCompile(`^(/[A-Za-z0-9._~-]+)*$`)

func basePath(r *http.Request) string {
	raw := r.RequestURI
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i]
	}
	if u, err := url.Parse(raw); err == nil && u.Scheme == "" && u.Host == "" {
		raw = u.EscapedPath()
	} else {
		return ""
	}
	esc := r.URL.EscapedPath()
	if !strings.HasSuffix(raw, esc) {
		return ""
	}
	base := strings.TrimSuffix(raw, esc)
	if !basePattern.MatchString(base) {
		return ""
	}
	return base
}

// secure reports whether cookies must be marked Secure: the request came
// over TLS, or the sign-in's public URL is https.
func (h *humanHandler) secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	si := h.cfg.signIn
	return si != nil && si.oidc != nil && strings.HasPrefix(strings.ToLower(si.oidc.cfg.RedirectURL), "https://")
}

func (h *humanHandler) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	c := &http.Cookie{
		Name: name, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: h.secure(r),
	}
	if value == "" {
		c.MaxAge = -1
	} else {
		c.MaxAge = int(maxAge / time.Second)
	}
	http.SetCookie(w, c)
}

func cookieValue(r *http.Request, name string) string {
	c, err := r.Cookie(name)
	if err != nil {
		return ""
	}
	return c.Value
}

// current returns the session of the request's cookie, nil when it has
// none live, or the store's error.
func (h *humanHandler) current(r *http.Request) (*session, error) {
	s, err := h.sessions.get(r.Context(), cookieValue(r, sessionCookie))
	if err != nil {
		h.cfg.log.Error("httpgate: sessions", "err", err)
	}
	return s, err
}

// unavailable answers 503: the store of the sessions failed.
func (h *humanHandler) unavailable(w http.ResponseWriter, r *http.Request) {
	h.errorPage(w, r, http.StatusServiceUnavailable, "Unavailable", "Your session could not be checked. Try again in a moment.")
}

// signInStart begins a sign-in: to the provider, or the dev list's page.
func (h *humanHandler) signInStart(w http.ResponseWriter, r *http.Request) {
	si := h.cfg.signIn
	next := safeNext(r.URL.Query().Get("next"))
	switch {
	case si == nil:
		h.errorPage(w, r, http.StatusNotFound, "Sign-in is not configured", "These pages need a sign-in (WithOIDCSignIn, or the --oidc-issuer flags of axgate).")
		return
	case si.oidc == nil:
		h.render(w, r, http.StatusOK, "signin", pageData{Title: "Sign in", Next: next, DevUsers: si.dev})
		return
	}
	oc, _, err := si.oidc.load(r.Context())
	if err != nil {
		h.cfg.log.Error("httpgate: sign-in", "err", err)
		h.errorPage(w, r, http.StatusBadGateway, "Sign-in is unavailable", "The identity provider could not be reached. Try again later.")
		return
	}
	p := &pendingSignIn{verifier: oauth2.GenerateVerifier(), nonce: rand.Text(), next: next}
	state, cookie, err := h.sessions.begin(p)
	if err != nil {
		h.cfg.log.Error("httpgate: sign-in", "err", err)
		h.errorPage(w, r, http.StatusInternalServerError, "Sign-in is unavailable", "Try again later.")
		return
	}
	h.setCookie(w, r, signInCookie, cookie, signInLifetime)
	http.Redirect(w, r, oc.AuthCodeURL(state, oauth2.S256ChallengeOption(p.verifier), oidc.Nonce(p.nonce)), http.StatusFound)
}

// callback completes an OIDC sign-in.
func (h *humanHandler) callback(w http.ResponseWriter, r *http.Request) {
	si := h.cfg.signIn
	if si == nil || si.oidc == nil {
		h.errorPage(w, r, http.StatusNotFound, "Not found", "There is no such page.")
		return
	}
	q := r.URL.Query()
	p := h.sessions.pending(q.Get("state"), cookieValue(r, signInCookie))
	h.setCookie(w, r, signInCookie, "", 0)
	if p == nil {
		h.errorPage(w, r, http.StatusBadRequest, "Sign-in failed", "This sign-in was not started in this browser, or took too long. Sign in again.")
		return
	}
	if e := q.Get("error"); e != "" {
		h.errorPage(w, r, http.StatusUnauthorized, "Sign-in failed", "The identity provider refused the sign-in: "+e)
		return
	}
	oc, verifier, err := si.oidc.load(r.Context())
	if err != nil {
		h.cfg.log.Error("httpgate: sign-in", "err", err)
		h.errorPage(w, r, http.StatusBadGateway, "Sign-in is unavailable", "The identity provider could not be reached. Try again later.")
		return
	}
	ctx := context.WithValue(r.Context(), oauth2.HTTPClient, si.oidc.client())
	tok, err := oc.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(p.verifier))
	if err != nil {
		h.cfg.log.Warn("httpgate: sign-in: code exchange failed", "err", err)
		h.errorPage(w, r, http.StatusUnauthorized, "Sign-in failed", "The identity provider did not confirm the sign-in. Sign in again.")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := verifier.Verify(oidc.ClientContext(r.Context(), si.oidc.client()), raw)
	if err != nil || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(p.nonce)) != 1 {
		h.cfg.log.Warn("httpgate: sign-in: ID token refused", "err", err)
		h.errorPage(w, r, http.StatusUnauthorized, "Sign-in failed", "The identity provider's answer did not verify. Sign in again.")
		return
	}
	// Each sign-in is taken once, whichever replica its callback reaches.
	if first, err := h.sessions.take(r.Context(), p); err != nil {
		h.cfg.log.Error("httpgate: sign-in", "err", err)
		h.unavailable(w, r)
		return
	} else if !first {
		h.errorPage(w, r, http.StatusBadRequest, "Sign-in failed", "This sign-in was already used. Sign in again.")
		return
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		h.errorPage(w, r, http.StatusUnauthorized, "Sign-in failed", "The identity provider's answer could not be read.")
		return
	}
	person, err := si.oidc.principal(claims)
	if err != nil {
		h.errorPage(w, r, http.StatusForbidden, "Sign-in failed", err.Error())
		return
	}
	h.signedIn(w, r, person, p.next)
}

// devSignIn signs in as one user of DevSignIn's list.
func (h *humanHandler) devSignIn(w http.ResponseWriter, r *http.Request) {
	si := h.cfg.signIn
	if si == nil || si.oidc != nil || len(si.dev) == 0 {
		h.errorPage(w, r, http.StatusNotFound, "Not found", "There is no such page.")
		return
	}
	if err := h.crossOrigin.Check(r); err != nil {
		h.errorPage(w, r, http.StatusForbidden, "Refused", "A form of another site cannot sign you in here.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		h.errorPage(w, r, http.StatusBadRequest, "Bad request", "The form could not be read.")
		return
	}
	for _, u := range si.dev {
		if u.ID == r.PostForm.Get("user") {
			h.signedIn(w, r, u, safeNext(r.PostForm.Get("next")))
			return
		}
	}
	h.errorPage(w, r, http.StatusForbidden, "Sign-in failed", "No such user.")
}

// signedIn starts the person's session under a new id and sends them on.
func (h *humanHandler) signedIn(w http.ResponseWriter, r *http.Request, p middleware.Principal, next string) {
	cookie, _, err := h.sessions.start(r.Context(), p, cookieValue(r, sessionCookie))
	if errors.Is(err, errStore) {
		h.cfg.log.Error("httpgate: sign-in", "err", err)
		h.unavailable(w, r)
		return
	}
	if err != nil {
		h.cfg.log.Error("httpgate: sign-in", "person", p.ID, "err", err)
		h.errorPage(w, r, http.StatusInternalServerError, "Sign-in failed", "Your session could not be started.")
		return
	}
	h.setCookie(w, r, sessionCookie, cookie, sessionLifetime)
	h.cfg.log.Info("httpgate: signed in", "person", p.ID, "tenant", p.Tenant)
	http.Redirect(w, r, basePath(r)+safeNext(next), http.StatusSeeOther)
}

// signOut ends the session.
func (h *humanHandler) signOut(w http.ResponseWriter, r *http.Request) {
	s, err := h.current(r)
	if err != nil {
		h.unavailable(w, r)
		return
	}
	if s != nil {
		if !h.formAllowed(w, r, s) {
			return
		}
		if err := h.sessions.end(r.Context(), s); err != nil {
			h.cfg.log.Error("httpgate: sign-out", "err", err)
			h.unavailable(w, r)
			return
		}
	}
	h.setCookie(w, r, sessionCookie, "", 0)
	h.render(w, r, http.StatusOK, "signedout", pageData{Title: "Signed out"})
}

// maxFormBytes bounds a form's body.
const maxFormBytes = 16 << 10

// formAllowed checks a POST of the pages: same origin, and the session's
// CSRF token. It writes the refusal when it is not.
func (h *humanHandler) formAllowed(w http.ResponseWriter, r *http.Request, s *session) bool {
	if err := h.crossOrigin.Check(r); err != nil {
		h.errorPage(w, r, http.StatusForbidden, "Refused", "A form of another site cannot decide here.")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		h.errorPage(w, r, http.StatusBadRequest, "Bad request", "The form could not be read.")
		return false
	}
	if got := r.PostForm.Get("csrf"); got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
		h.errorPage(w, r, http.StatusForbidden, "Refused", "This form is not from your session (it may be stale): open the page again.")
		return false
	}
	return true
}
