package httpgate

import (
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

// Bounds of the session store.
const (
	sessionLifetime = 8 * time.Hour
	maxSessions     = 10000
	signInLifetime  = 10 * time.Minute
	maxTakenSignIns = 10000
	sessionCookie   = "axgate_session"
	signInCookie    = "axgate_signin"
)

// session is a signed-in person: who they are, and the token their forms
// carry against cross-site requests.
type session struct {
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
}

// pendingClaims is a pendingSignIn as the claims of the sign-in cookie.
type pendingClaims struct {
	Verifier string `json:"pkce"`
	Nonce    string `json:"nonce"`
	Next     string `json:"next"`
	jwt.RegisteredClaims
}

// signInAudience separates the sign-in cookie from any other use of the key.
const signInAudience = "axgate/httpgate/signin/v1"

// sessions is the server-side session store, bounded: the oldest session
// goes when a new one would exceed the bound. It also keeps the states of
// the sign-ins that came back, until they expire, so that each is taken
// once.
type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
	used map[string]time.Time // sign-in states taken, until they expire
	key  []byte               // signs the sign-in cookies
	now  func() time.Time
}

func newSessions() *sessions {
	return &sessions{byID: map[string]*session{}, used: map[string]time.Time{}, key: []byte(rand.Text() + rand.Text()), now: time.Now}
}

// start creates a session for p under a new random id (never one the
// browser brought: no fixation) and revokes the session old, if any.
func (s *sessions) start(p middleware.Principal, old string) (id string, sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, old)
	now := s.now()
	if len(s.byID) >= maxSessions {
		evict(s.byID, now, func(v *session) time.Time { return v.expires })
	}
	id = rand.Text() + rand.Text()
	sess = &session{person: p, csrf: rand.Text() + rand.Text(), expires: now.Add(sessionLifetime)}
	s.byID[id] = sess
	return id, sess
}

// get returns the live session with this id.
func (s *sessions) get(id string) (*session, bool) {
	if id == "" {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[id]
	if !ok {
		return nil, false
	}
	if !s.now().Before(v.expires) {
		delete(s.byID, id)
		return nil, false
	}
	return v, true
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// begin returns the state of a new sign-in and the value of the
// browser's sign-in cookie that holds it.
func (s *sessions) begin(p *pendingSignIn) (state, cookie string, err error) {
	state = rand.Text() + rand.Text()
	claims := pendingClaims{Verifier: p.verifier, Nonce: p.nonce, Next: p.next, RegisteredClaims: jwt.RegisteredClaims{
		ID: state, Audience: jwt.ClaimStrings{signInAudience}, ExpiresAt: jwt.NewNumericDate(s.now().Add(signInLifetime)),
	}}
	cookie, err = jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.key)
	return state, cookie, err
}

// finish takes the sign-in of state, once, if the browser's sign-in
// cookie is the one begin gave for it and it has not expired.
func (s *sessions) finish(state, cookie string) (*pendingSignIn, bool) {
	if state == "" || cookie == "" {
		return nil, false
	}
	var c pendingClaims
	_, err := jwt.ParseWithClaims(cookie, &c, func(*jwt.Token) (any, error) { return s.key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(),
		jwt.WithAudience(signInAudience), jwt.WithTimeFunc(s.now))
	if err != nil || c.ExpiresAt == nil || subtle.ConstantTimeCompare([]byte(state), []byte(c.ID)) != 1 {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if _, taken := s.used[state]; taken {
		return nil, false
	}
	if len(s.used) >= maxTakenSignIns {
		evict(s.used, now, func(v time.Time) time.Time { return v })
	}
	s.used[state] = c.ExpiresAt.Time
	return &pendingSignIn{verifier: c.Verifier, nonce: c.Nonce, next: c.Next}, true
}

// evict drops the expired entries of m, or the one expiring first if none
// had expired.
func evict[V any](m map[string]V, now time.Time, expires func(V) time.Time) {
	first, firstAt, dropped := "", time.Time{}, false
	for k, v := range m {
		at := expires(v)
		if !now.Before(at) {
			delete(m, k)
			dropped = true
			continue
		}
		if first == "" || at.Before(firstAt) {
			first, firstAt = k, at
		}
	}
	if !dropped && first != "" {
		delete(m, first)
	}
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

// current returns the session of the request's cookie, if live.
func (h *humanHandler) current(r *http.Request) (string, *session, bool) {
	id := cookieValue(r, sessionCookie)
	s, ok := h.sessions.get(id)
	return id, s, ok
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
	p, ok := h.sessions.finish(q.Get("state"), cookieValue(r, signInCookie))
	h.setCookie(w, r, signInCookie, "", 0)
	if !ok {
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
	id, _ := h.sessions.start(p, cookieValue(r, sessionCookie))
	h.setCookie(w, r, sessionCookie, id, sessionLifetime)
	h.cfg.log.Info("httpgate: signed in", "person", p.ID, "tenant", p.Tenant)
	http.Redirect(w, r, basePath(r)+safeNext(next), http.StatusSeeOther)
}

// signOut ends the session.
func (h *humanHandler) signOut(w http.ResponseWriter, r *http.Request) {
	id, s, ok := h.current(r)
	if ok {
		if !h.formAllowed(w, r, s) {
			return
		}
		h.sessions.end(id)
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
