package httpgate_test

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/token"
)

// replicaKey is the pages' shared cookie key of the replica tests.
var replicaKey = []byte("0123456789abcdef0123456789abcdef")

// replicaPages serves the pages of the rig's enforcer again, on a listener
// of its own, as another replica would: signed in with op, cookies signed
// with key (a random key of the handler's when nil).
func (rig *pagesRig) replicaPages(t *testing.T, enf *axgate.Enforcer, op *oidcProvider, key []byte) string {
	t.Helper()
	h := httpgate.NewHumanHandler(enf, nil, httpgate.WithLogger(slog.New(slog.DiscardHandler)),
		httpgate.WithOIDCSignIn(httpgate.OIDCConfig{Issuer: op.URL, ClientID: "pages", RedirectURL: "http://pages.invalid/callback", CookieKey: key}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// twoReplicas is one enforcer's pages on two listeners with the same
// cookie key, and a browser that reaches both: a and b are the same
// person (one cookie jar) through either replica.
func twoReplicas(t *testing.T, keyA, keyB []byte) (rig *pagesRig, op *oidcProvider, a, b func() *person) {
	t.Helper()
	op = newOIDCProvider(t)
	op.idToken = func(p *oidcProvider, nonce string) string {
		c := p.claims(nonce)
		c["roles"] = []string{"finance"}
		return p.sign(c)
	}
	rig = newPagesRig(t, nil)
	ua, ub := rig.replicaPages(t, rig.enf, op, keyA), rig.replicaPages(t, rig.enf, op, keyB)
	newBrowser := func() (func() *person, func() *person) {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		return func() *person { return &person{t: t, base: ua, client: c} }, func() *person { return &person{t: t, base: ub, client: c} }
	}
	a, b = newBrowser()
	return rig, op, a, b
}

// TestPagesSignInOnOneReplicaDecidesOnTheOther: a person starts the
// sign-in on one replica, comes back from the provider to the other,
// reads the request on the first and approves it on the second (the CSRF
// token of one replica's page verifies on the other), and is signed out
// on both by signing out on one.
func TestPagesSignInOnOneReplicaDecidesOnTheOther(t *testing.T) {
	rig, op, onA, onB := twoReplicas(t, replicaKey, replicaKey)
	id := rig.approvalRequest(t, "carol", `{"iban":"DE1","amount":10}`)
	a, b := onA(), onB()
	cb := signInVia(t, a, op, "/requests/"+id)
	if r := b.do("GET", cb, nil); r.status != http.StatusSeeOther {
		t.Fatalf("the callback on the other replica: %d %s", r.status, r.body)
	}
	if r := a.do("GET", "/requests/"+id, nil); r.status != 200 || !strings.Contains(r.body, "payout.send") {
		t.Fatalf("the request's page on the first replica: %d", r.status)
	}
	form := url.Values{"decision": {"approve"}, "csrf": {a.csrf()}}
	if r := b.do("POST", "/requests/"+id, form); r.status != http.StatusSeeOther {
		t.Fatalf("the approval posted to the other replica: %d %s", r.status, r.body)
	}
	if r := a.do("GET", "/requests/"+id, nil); !strings.Contains(r.body, `id="progress">1 of 2`) {
		t.Fatalf("the decision made on one replica is not shown by the other:\n%s", r.body)
	}
	session := cookieOf(t, a, "axgate_session")
	if r := b.do("POST", "/signout", url.Values{"csrf": {b.csrf()}}); r.status != 200 {
		t.Fatalf("sign-out: %d", r.status)
	}
	stale := onA()
	stale.client = &http.Client{CheckRedirect: stale.client.CheckRedirect}
	if r := stale.do("GET", "/", nil, "Cookie", "axgate_session="+session); r.status != http.StatusSeeOther {
		t.Fatalf("the session signed out on one replica still opens the inbox of the other: %d", r.status)
	}
}

// TestPagesCallbackReplayedOnTheOtherReplicaIsRefused: a callback taken
// on one replica (its state, code and sign-in cookie) signs no one in on
// the other.
func TestPagesCallbackReplayedOnTheOtherReplicaIsRefused(t *testing.T) {
	_, op, onA, onB := twoReplicas(t, replicaKey, replicaKey)
	a := onA()
	cb := signInVia(t, a, op, "/")
	signin := cookieOf(t, a, "axgate_signin")
	if r := a.do("GET", cb, nil); r.status != http.StatusSeeOther {
		t.Fatalf("a good sign-in: %d %s", r.status, r.body)
	}
	_, thief := twoBrowsers(onA, onB)
	if r := thief.do("GET", cb, nil, "Cookie", "axgate_signin="+signin); r.status != http.StatusBadRequest {
		t.Fatalf("the callback replayed on the other replica: %d", r.status)
	}
}

// TestPagesCookiesOfAnotherDeploymentAreRefused: the session and sign-in
// cookies of pages with another key sign no one in, and post no form.
func TestPagesCookiesOfAnotherDeploymentAreRefused(t *testing.T) {
	other := []byte("another deployment's key, 32 b..")
	rig, op, onA, onB := twoReplicas(t, replicaKey, other)
	id := rig.approvalRequest(t, "carol", `{"iban":"DE1","amount":10}`)
	a, b := onA(), onB()
	cb := signInVia(t, a, op, "/")
	if r := b.do("GET", cb, nil); r.status != http.StatusBadRequest {
		t.Fatalf("another deployment finished the sign-in: %d", r.status)
	}
	a, b = twoBrowsers(onA, onB)
	if r := a.do("GET", signInVia(t, a, op, "/"), nil); r.status != http.StatusSeeOther {
		t.Fatalf("a good sign-in: %d", r.status)
	}
	csrf := a.csrf()
	if r := b.do("GET", "/", nil); r.status != http.StatusSeeOther {
		t.Fatalf("another deployment opened the inbox with the session: %d", r.status)
	}
	if r := b.do("POST", "/requests/"+id, url.Values{"decision": {"approve"}, "csrf": {csrf}}); r.status != http.StatusUnauthorized {
		t.Fatalf("another deployment took the form: %d", r.status)
	}
	// Without a key, each handler signs with its own.
	_, op, onA, onB = twoReplicas(t, nil, nil)
	a, b = onA(), onB()
	if r := a.do("GET", signInVia(t, a, op, "/"), nil); r.status != http.StatusSeeOther {
		t.Fatalf("a good sign-in: %d", r.status)
	}
	if r := b.do("GET", "/", nil); r.status != http.StatusSeeOther {
		t.Fatalf("without CookieKey, the other handler took the session: %d", r.status)
	}
}

// TestPagesSessionCookieTamperedOrMovedIsRefused: a session cookie
// altered (another person written in, the signature changed) is refused on
// either replica, and a person's form token posts nothing in another
// person's session.
func TestPagesSessionCookieTamperedOrMovedIsRefused(t *testing.T) {
	rig, op, onA, onB := twoReplicas(t, replicaKey, replicaKey)
	id := rig.approvalRequest(t, "carol", `{"iban":"DE1","amount":10}`)
	alice := onA()
	if r := alice.do("GET", signInVia(t, alice, op, "/"), nil); r.status != http.StatusSeeOther {
		t.Fatalf("a good sign-in: %d", r.status)
	}
	session := cookieOf(t, alice, "axgate_session")
	parts := strings.Split(session, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || !strings.Contains(string(payload), `"sub":"alice"`) {
		t.Fatalf("the session cookie: %s %v", payload, err)
	}
	asBob := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), `"sub":"alice"`, `"sub":"bob"`, 1)))
	sig := []byte(parts[2])
	sig[3] ^= 1
	for name, v := range map[string]string{
		"another person": parts[0] + "." + asBob + "." + parts[2],
		"another sig":    parts[0] + "." + parts[1] + "." + string(sig),
		"alg none":       base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + ".",
	} {
		b := onB()
		b.client = &http.Client{CheckRedirect: b.client.CheckRedirect}
		if r := b.do("GET", "/", nil, "Cookie", "axgate_session="+v); r.status != http.StatusSeeOther {
			t.Errorf("%s: the inbox answered %d", name, r.status)
		}
	}
	// bob signs in (his own browser); alice's form token in his session
	// and his in hers are refused, through either replica.
	_, bob := twoBrowsers(onA, onB)
	op.idToken = func(p *oidcProvider, nonce string) string {
		c := p.claims(nonce)
		c["sub"] = "bob"
		c["roles"] = []string{"finance"}
		return p.sign(c)
	}
	if r := bob.do("GET", signInVia(t, bob, op, "/"), nil); r.status != http.StatusSeeOther {
		t.Fatalf("bob's sign-in: %d", r.status)
	}
	if r := bob.do("POST", "/requests/"+id, url.Values{"decision": {"approve"}, "csrf": {alice.csrf()}}); r.status != http.StatusForbidden {
		t.Errorf("alice's form token in bob's session: %d", r.status)
	}
	if r := alice.do("POST", "/requests/"+id, url.Values{"decision": {"approve"}, "csrf": {bob.csrf()}}); r.status != http.StatusForbidden {
		t.Errorf("bob's form token in alice's session: %d", r.status)
	}
}

// TestPagesRefuseWhenTheSessionStoreFails: a replay store that fails
// answers 503 on the pages, and signs no one in.
func TestPagesRefuseWhenTheSessionStoreFails(t *testing.T) {
	op := newOIDCProvider(t)
	rig := newPagesRig(t, []axgate.Option{axgate.WithReplayStore(failingReplay{})},
		httpgate.WithOIDCSignIn(httpgate.OIDCConfig{Issuer: op.URL, ClientID: "pages", RedirectURL: "http://pages.invalid/callback", CookieKey: replicaKey}))
	per := rig.newPerson(t)
	if r := per.do("GET", signInVia(t, per, op, "/"), nil); r.status != http.StatusServiceUnavailable {
		t.Fatalf("the callback with the store down: %d", r.status)
	}
	if r := per.do("GET", "/", nil); r.status == 200 {
		t.Fatal("signed in with the store down")
	}
}

// TestPagesShortCookieKeyFailsEverySignIn: a CookieKey under 32 bytes
// signs nothing: the sign-in fails with 500.
func TestPagesShortCookieKeyFailsEverySignIn(t *testing.T) {
	op := newOIDCProvider(t)
	rig := newPagesRig(t, nil, httpgate.WithOIDCSignIn(httpgate.OIDCConfig{Issuer: op.URL, ClientID: "pages", RedirectURL: "http://pages.invalid/callback", CookieKey: []byte("short")}))
	if r := rig.newPerson(t).do("GET", "/signin", nil); r.status != http.StatusInternalServerError {
		t.Fatalf("/signin with a 5-byte key: %d", r.status)
	}
}

type failingReplay struct{}

func (failingReplay) Consume(context.Context, []token.Use) error { return errors.New("down") }
func (failingReplay) Used(context.Context, string) (bool, error) { return false, errors.New("down") }

// twoBrowsers returns a new browser (cookie jar) on each replica's side.
func twoBrowsers(onA, onB func() *person) (*person, *person) {
	a, b := onA(), onB()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: a.client.CheckRedirect}
	a.client, b.client = c, c
	return a, b
}

func cookieOf(t *testing.T, p *person, name string) string {
	t.Helper()
	u, _ := url.Parse(p.base)
	for _, c := range p.client.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	t.Fatalf("no %s cookie", name)
	return ""
}
