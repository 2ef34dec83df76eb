package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

func TestHumanPagesFlagsUsage(t *testing.T) {
	t.Parallel()
	base := []string{"serve", "--manifest", "m.json", "--upstream", "http://x", "--anonymous"}
	cases := []struct {
		args []string
		want string
	}{
		{append(base, "--human", "127.0.0.1:0"), "--human needs --oidc-issuer"},
		{append(base, "--human-url", "http://people.example/"), "give --human too"},
		{append(base, "--oidc-issuer", "http://op.example"), "give --human too"},
		{append(base, "--human", "127.0.0.1:0", "--oidc-issuer", "http://op.example"), "needs --oidc-client-id"},
		{append(base, "--human", "127.0.0.1:0", "--oidc-issuer", "op.example", "--oidc-client-id", "c"), "http or https URL"},
		{append(base, "--human", "127.0.0.1:0", "--oidc-client-id", "c"), "need --oidc-issuer"},
		{[]string{"mcp", "--manifest", "m.json", "--upstream-url", "http://x/mcp", "--anonymous", "--oidc-issuer", "http://op.example"}, "give --human too"},
	}
	for _, c := range cases {
		if _, stderr, code := cli(t, nil, c.args...); code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %s", c.args, code, stderr)
		}
	}
	// With a sign-in, mcp's --human needs neither --human-audience nor a
	// key set: the flags pass, and the missing manifest is what fails.
	_, stderr, code := cli(t, nil, "mcp", "--manifest", "no-such.json", "--upstream-url", "http://x/mcp", "--anonymous",
		"--human", "127.0.0.1:0", "--oidc-issuer", "http://op.example", "--oidc-client-id", "c")
	if code == exitOK || !strings.Contains(stderr, "--manifest no-such.json") || strings.Contains(stderr, "--human needs") {
		t.Errorf("mcp --human with --oidc-issuer: exit %d, %s", code, stderr)
	}
}

// personAtProvider is a person at the test's OpenID provider.
type personAtProvider struct{ sub, tenant string }

func (u personAtProvider) ID() string { return u.sub }
func (u personAtProvider) Userinfo([]string) ([]byte, error) {
	return json.Marshal(map[string]string{"sub": u.sub})
}
func (u personAtProvider) Claims(_ []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	return &struct {
		*mockoidc.IDTokenClaims
		Tenant string `json:"tenant"`
	}{base, u.tenant}, nil
}

// TestServeHumanPagesConfirmThenRepeat runs "axgate serve --human" with a
// real OpenID provider: the refusal names the call's page, the person signs
// in there and confirms, and the same call repeated runs once.
func TestServeHumanPagesConfirmThenRepeat(t *testing.T) {
	t.Parallel()
	op, secret := startOIDCProvider(t)
	op.QueueUser(personAtProvider{sub: "alice", tenant: "acme"})
	pki := newServePKI(t)
	up := &fakeUpstream{answer: map[string]func() (int, string){}}
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	humanAddr := freeAddr(t)
	rs := startServe(t, nil, "--manifest", filepath.Join("testdata", "serve", "shop.json"), "--upstream", upSrv.URL,
		"--jwks", pki.jwks, "--listen", "127.0.0.1:0", "--precondition", `cart is not empty=args.cart_id != ""`,
		"--human", humanAddr, "--human-url", "http://"+humanAddr+"/people/", "--oidc-issuer", op.Issuer(), "--oidc-client-id", op.Config().ClientID,
		"--oidc-client-secret-file", secret)
	line := rs.log.waitFor(t, "people sign in, confirm and approve at")
	m := regexp.MustCompile(`url=(http://\S+/)`).FindStringSubmatch(line)
	if m == nil || m[1] != "http://"+humanAddr+"/people/" {
		t.Fatalf("no pages URL in %q", line)
	}
	pages := m[1]

	status, body := post(t, rs.base, "/tools/order_place/call", pki.bearer, `{"cart_id":"c-1"}`)
	d := errorDetails(body)
	page, _ := d["decision_url"].(string)
	if status != http.StatusPreconditionRequired || !strings.HasPrefix(page, pages+"requests/") {
		t.Fatalf("the refusal does not name the page under %s: %d %v", pages, status, body)
	}

	// The person follows the link: signed in at the provider, back on the
	// page.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.String() != page || !strings.Contains(string(html), "&#34;c-1&#34;") {
		t.Fatalf("after sign-in: %d at %s\n%s", resp.StatusCode, resp.Request.URL, html)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(html)
	if csrf == nil {
		t.Fatalf("no form:\n%s", html)
	}
	resp, err = browser.PostForm(page, url.Values{"decision": {"confirm"}, "csrf": {string(csrf[1])}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("confirming: %d", resp.StatusCode)
	}

	if status, body := post(t, rs.base, "/tools/order_place/call", pki.bearer, `{"cart_id":"c-1"}`); status != http.StatusOK {
		t.Fatalf("the repeat after confirming: %d %v", status, body)
	}
	if status, _ := post(t, rs.base, "/tools/order_place/call", pki.bearer, `{"cart_id":"c-1"}`); status != http.StatusPreconditionRequired {
		t.Fatalf("a second repeat: %d", status)
	}
	if n := len(up.called()); n != 1 {
		t.Fatalf("the upstream ran %d times", n)
	}
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
