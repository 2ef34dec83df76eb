package main

import (
	"bytes"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMCPReplicasPagesSignInWhicheverReplicaAnswers: two axgate mcp
// processes with the same --redis and --signing-key, their pages (--human,
// people sign in with an OpenID provider) behind a balancer of their own
// that sends each request to the next replica, --human-url naming it. A
// person's browser (a cookie jar) through it starts the sign-in on one
// replica and comes back from the provider to the other, opens the call's
// page on one and confirms on the other; the repeated call runs, once. The
// callback taken, replayed with its sign-in cookie, is refused by both
// replicas (mockoidc refuses the spent code first; the replica's own single
// use is TestPagesCallbackReplayedOnTheOtherReplicaIsRefused in httpgate);
// signed out through one replica, the session opens nothing on the other.
func TestMCPReplicasPagesSignInWhicheverReplicaAnswers(t *testing.T) {
	redisURL := replicaRedis(t)
	op, secret := startOIDCProvider(t)
	upURL, runs := countingUpstream(t)
	pki := newServePKI(t)
	run := strings.ToLower(rand.Text()[:10])
	tenant := "acme-" + run
	alice := personWithRoles{sub: "alice-" + run, tenant: tenant, roles: []string{"editor"}}
	agentToken := mint(t, "principal", "--key", pki.key, "--sub", alice.sub, "--tenant", tenant, "--roles", "editor", "--aud", agentsAudience)

	lb, ln := newBalancer(t, roundRobin)
	pb, pln := newBalancer(t, roundRobin)
	pages := "http://" + pln.Addr().String()
	args := []string{"--manifest", replicasManifest, "--upstream-url", upURL, "--redis", redisURL,
		"--jwks", pki.jwks, "--signing-key", pki.key, "--audience", agentsAudience, "--resource-url", "http://" + ln.Addr().String() + "/mcp",
		"--human-url", pages + "/",
		"--oidc-issuer", op.Issuer(), "--oidc-client-id", op.Config().ClientID, "--oidc-client-secret-file", secret}
	replicas := []*gatewayProcess{startGatewayProcess(t, args...), startGatewayProcess(t, args...)}
	lbURL := lb.serve(t, ln, replicas[0].url, replicas[1].url)
	pb.serve(t, pln, replicas[0].human, replicas[1].human)

	cs := connect(t, lbURL, &http.Client{Transport: bearerTransport{agentToken}})
	say := map[string]any{"text": "confirmed through the pages' balancer"}
	d := refused(t, callTool(t, cs, "say", say), "AXAG_CONFIRMATION_MISSING", "")
	page, _ := d["decision_url"].(string)
	if !strings.HasPrefix(page, pages+"/requests/") {
		t.Fatalf("the refusal names %q, want a page under %s", page, pages)
	}

	// The browser: it follows redirects (the sign-in's round trip through
	// the provider) and keeps cookies, as a person's does; the sign-in
	// cookie and the callback's URL are noted on the way.
	jar, _ := cookiejar.New(nil)
	pagesURL, _ := url.Parse(pages)
	var callback *url.URL
	var signin string
	browser := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Path == "/callback" {
			callback = req.URL
			for _, c := range jar.Cookies(pagesURL) {
				if c.Name == "axgate_signin" {
					signin = c.Value
				}
			}
		}
		return nil
	}}
	op.QueueUser(alice)
	before := len(pb.requests())
	resp, err := browser.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(html)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.String() != page || csrf == nil || callback == nil || signin == "" {
		t.Fatalf("signed in through the balancer: %d at %s (callback %v)\n%s", resp.StatusCode, resp.Request.URL, callback, html)
	}
	resp, err = browser.PostForm(page, url.Values{"decision": {"confirm"}, "csrf": {string(csrf[1])}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("confirming through the balancer: %d", resp.StatusCode)
	}
	// Which replica answered what: the sign-in began on one and finished on
	// the other; the page was read on one and the form posted to the other.
	at := map[string]int{}
	for _, r := range pb.requests()[before:] {
		at[r.httpMethod+" "+r.path] = r.replica
	}
	if at["GET /signin"] == at["GET /callback"] {
		t.Errorf("the sign-in began and finished on replica %d: want one each", at["GET /signin"])
	}
	reqPath := strings.TrimPrefix(page, pages)
	if _, ok := at["POST "+reqPath]; !ok || at["GET "+reqPath] == at["POST "+reqPath] {
		t.Errorf("the page was last read on replica %d and the form posted to %d (%v): want one each", at["GET "+reqPath], at["POST "+reqPath], at)
	}
	if res := callTool(t, cs, "say", say); res.IsError {
		t.Fatalf("the repeat after the person confirmed through the pages' balancer: %s", resultText(res))
	}
	if n := runs("say", say["text"].(string)); n != 1 {
		t.Errorf("the confirmed say ran %d times, want 1", n)
	}

	// The callback again, with its sign-in cookie, to each replica.
	for range 2 {
		req, _ := http.NewRequest("GET", pages+callback.RequestURI(), nil)
		req.Header.Set("Cookie", "axgate_signin="+signin)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// Refused by the replica (the state taken, 400) or by the provider
		// (the code spent, 401); either way no session.
		session := false
		for _, c := range resp.Cookies() {
			session = session || c.Name == "axgate_session" && c.Value != ""
		}
		if last := pb.requests(); resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusUnauthorized || session {
			t.Errorf("the callback replayed on replica %d: %d (session cookie: %v)", last[len(last)-1].replica, resp.StatusCode, session)
		}
	}

	// Signed out through one replica: the inbox of either sends the
	// browser to sign in.
	stay := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = stay.Get(pages + "/")
	if err != nil {
		t.Fatal(err)
	}
	html, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf = regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(html)
	if resp.StatusCode != http.StatusOK || csrf == nil {
		t.Fatalf("the inbox: %d", resp.StatusCode)
	}
	session := ""
	for _, c := range jar.Cookies(pagesURL) {
		if c.Name == "axgate_session" {
			session = c.Value
		}
	}
	if session == "" {
		t.Fatal("no session cookie")
	}
	resp, err = stay.PostForm(pages+"/signout", url.Values{"csrf": {string(csrf[1])}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	for range 2 {
		req, _ := http.NewRequest("GET", pages+"/", nil)
		req.Header.Set("Cookie", "axgate_session="+session)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if last := pb.requests(); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("the session signed out, on replica %d: %d", last[len(last)-1].replica, resp.StatusCode)
		}
	}
	for _, r := range replicas {
		r.stop(t)
	}
}

// TestPagesCookieKeyFromTheSigningKey: the pages' cookie key is the same
// for one --signing-key file, another for another, and neither the
// elicitation key derived from the same file nor the key's own bytes.
func TestPagesCookieKeyFromTheSigningKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) string { return writeDevKeyFile(t, dir, name, "k") }
	a, b := write("a.jwk"), write("b.jwk")
	ka1, err := pagesCookieKey(a)
	if err != nil {
		t.Fatal(err)
	}
	ka2, _ := pagesCookieKey(a)
	kb, _ := pagesCookieKey(b)
	ea, _ := elicitationKey(a)
	raw, _ := os.ReadFile(a)
	if len(ka1) != 32 || !bytes.Equal(ka1, ka2) || bytes.Equal(ka1, kb) || bytes.Equal(ka1, ea[:32]) || bytes.Contains(raw, ka1) {
		t.Errorf("keys: %x %x %x (elicitation %x)", ka1, ka2, kb, ea)
	}
	if _, err := pagesCookieKey(filepath.Join(dir, "missing.jwk")); err == nil {
		t.Error("a missing --signing-key file gave a key")
	}
}
