package browsertest

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// chromium is Debian's Chromium, which .ci/run installs.
const chromium = "/usr/bin/chromium"

// The people: two approvers and a requester of tenant acme.
var people = map[string]middleware.Principal{
	"alice": {ID: "alice", Tenant: "acme", Roles: []string{"finance"}},
	"bob":   {ID: "bob", Tenant: "acme", Roles: []string{"finance"}},
	"carol": {ID: "carol", Tenant: "acme", Roles: []string{"member"}},
}

// rig is the tool server and the pages of one enforcer, the OpenID provider
// the pages sign people in with, and a browser.
type rig struct {
	t       *testing.T
	enf     *axgate.Enforcer
	tools   *httptest.Server
	pages   *httptest.Server
	op      *mockoidc.MockOIDC
	ran     atomic.Int64
	browser context.Context
}

// newRig starts everything; opts are added to the enforcer's.
func newRig(t *testing.T, opts ...func(pagesURL string) axgate.Option) *rig {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("browser tests skipped: no " + chromium + " (apt-get install -y chromium)")
	}
	rg := &rig{t: t}
	op, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Shutdown() })
	rg.op = op

	var pages http.Handler
	rg.pages = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { pages.ServeHTTP(w, r) }))
	t.Cleanup(rg.pages.Close)

	m, err := manifest.LoadFile(filepath.Join("testdata", "pages.json"))
	if err != nil {
		t.Fatal(err)
	}
	eopts := []axgate.Option{axgate.WithTokens(axgate.TokenOptions{Issuer: "test", Audience: "test"})}
	for _, o := range opts {
		eopts = append(eopts, o(rg.pages.URL+"/"))
	}
	enf, err := axgate.New(m, eopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	rg.enf = enf
	cfg := op.Config()
	quiet := httpgate.WithLogger(slog.New(slog.DiscardHandler))
	pages = httpgate.NewHumanHandler(enf, nil, quiet, httpgate.WithOIDCSignIn(httpgate.OIDCConfig{
		Issuer: op.Issuer(), ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
		RedirectURL: rg.pages.URL + "/callback",
	}))

	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		rg.ran.Add(1)
		return middleware.Result{Value: map[string]any{"ok": true}}, nil
	})
	ts, err := httpgate.NewToolServer(enf, map[string]middleware.Invoker{"write_file": tool, "payout_send": tool}, quiet,
		httpgate.WithPrincipal(func(r *http.Request) (middleware.Principal, error) {
			if p, ok := people[r.Header.Get("X-User")]; ok {
				return p, nil
			}
			return middleware.Principal{}, axerr.New(axerr.CodeUnauthenticated, "who?")
		}))
	if err != nil {
		t.Fatal(err)
	}
	rg.tools = httptest.NewServer(ts)
	t.Cleanup(rg.tools.Close)

	rg.browser = startChromium(t)
	return rg
}

// startChromium starts Debian's Chromium, headless, for the test: its
// browser context; person contexts are made from it.
func startChromium(t *testing.T) context.Context {
	t.Helper()
	alloc, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(900, 760),
		chromedp.UserDataDir(t.TempDir()),
	)
	t.Cleanup(cancel)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("starting %s: %v", chromium, err)
	}
	return browser
}

// person is one person's browser context: cookies of their own.
func (rg *rig) person() context.Context {
	ctx, cancel := chromedp.NewContext(rg.browser, chromedp.WithNewBrowserContext())
	rg.t.Cleanup(cancel)
	return ctx
}

// visit opens the page at path (relative to the pages) as the person who,
// if the pages send them to sign in, signs in at the provider as user.
func (rg *rig) visit(ctx context.Context, user, path string) {
	rg.t.Helper()
	p := people[user]
	// The provider signs in the next queued user: only this one.
	signInNext(rg.op, p)
	if err := chromedp.Do(ctx, chromedp.Navigate(rg.pages.URL+path), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
		rg.t.Fatalf("%s opening %s: %v", user, path, err)
	}
}

// signInNext makes p the one person the provider signs in next.
func signInNext(op *mockoidc.MockOIDC, p middleware.Principal) {
	op.UserQueue.Lock()
	op.UserQueue.Queue = nil
	op.UserQueue.Unlock()
	op.QueueUser(&oidcUser{sub: p.ID, tenant: p.Tenant, roles: p.Roles})
}

// text is the text of the element sel of the person's page.
func (rg *rig) text(ctx context.Context, sel string) string {
	rg.t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		rg.t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// has reports whether the person's page has an element sel.
func (rg *rig) has(ctx context.Context, sel string) bool {
	rg.t.Helper()
	ids, err := chromedp.Run(ctx, chromedp.QueryNodeIDs(chromedp.CSS(sel), chromedp.AtLeast(0)))
	if err != nil {
		rg.t.Fatalf("looking for %s: %v", sel, err)
	}
	return len(ids) > 0
}

// click presses the button sel and waits for the page it leads to.
func (rg *rig) click(ctx context.Context, sel string) {
	rg.t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS("#note"))); err != nil {
		rg.t.Fatalf("clicking %s: %v", sel, err)
	}
}

// call makes a tool call as user: the status and a refusal's details.
func (rg *rig) call(user, tool, args string) (int, map[string]any) {
	rg.t.Helper()
	req, _ := http.NewRequest("POST", rg.tools.URL+"/tools/"+tool+"/call", strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rg.t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Error struct {
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&env)
	return resp.StatusCode, env.Error.Details
}

// oidcUser is a person at the provider, with the tenant and roles claims
// the pages map as bearer tokens' are.
type oidcUser struct {
	sub, tenant string
	roles       []string
}

func (u *oidcUser) ID() string { return u.sub }

func (u *oidcUser) Userinfo([]string) ([]byte, error) {
	return json.Marshal(map[string]any{"sub": u.sub})
}

func (u *oidcUser) Claims(_ []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	return &personClaims{IDTokenClaims: base, Tenant: u.tenant, Roles: u.roles}, nil
}

type personClaims struct {
	*mockoidc.IDTokenClaims
	Tenant string   `json:"tenant"`
	Roles  []string `json:"roles"`
}
