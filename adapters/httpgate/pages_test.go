package httpgate_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// The people of the pages' tests: two approvers and a requester of tenant
// acme, and an approver of tenant globex.
var pagePeople = []middleware.Principal{
	{ID: "alice", Tenant: "acme", Roles: []string{"finance"}},
	{ID: "bob", Tenant: "acme", Roles: []string{"finance"}},
	{ID: "carol", Tenant: "acme", Roles: []string{"member"}},
	{ID: "mallory", Tenant: "globex", Roles: []string{"finance"}},
}

// pagesRig is a tool server and the human pages of one enforcer, each on a
// real listener.
type pagesRig struct {
	tools, people *httptest.Server
	ran           *atomic.Int64
	enf           *axgate.Enforcer
}

func newPagesRig(t *testing.T, eopts []axgate.Option, opts ...httpgate.Option) *pagesRig {
	t.Helper()
	m, err := manifest.LoadFile(filepath.Join("testdata", "pages.json"))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m, append(eopts, axgate.WithTokens(axgate.TokenOptions{Issuer: "test", Audience: "test"}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	var ran atomic.Int64
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		ran.Add(1)
		return middleware.Result{Value: map[string]any{"ok": true}}, nil
	})
	ts, err := httpgate.NewToolServer(enf, map[string]middleware.Invoker{"write_file": tool, "payout_send": tool},
		httpgate.WithPrincipal(func(r *http.Request) (middleware.Principal, error) {
			for _, p := range pagePeople {
				if p.ID == r.Header.Get("X-User") {
					return p, nil
				}
			}
			return middleware.Principal{}, axerr.New(axerr.CodeUnauthenticated, "who?")
		}))
	if err != nil {
		t.Fatal(err)
	}
	if opts == nil {
		opts = []httpgate.Option{httpgate.DevSignIn(pagePeople...)}
	}
	opts = append(opts, httpgate.WithLogger(slog.New(slog.DiscardHandler)))
	rig := &pagesRig{tools: httptest.NewServer(ts), people: httptest.NewServer(httpgate.NewHumanHandler(enf, nil, opts...)), ran: &ran, enf: enf}
	t.Cleanup(rig.tools.Close)
	t.Cleanup(rig.people.Close)
	return rig
}

// call makes a tool call as user and returns the status and the details of
// a refusal.
func (rig *pagesRig) call(t *testing.T, user, tool, args string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", rig.tools.URL+"/tools/"+tool+"/call", strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
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

// approvalRequest makes a payout call as user, refused for approval, and
// returns the request's id.
func (rig *pagesRig) approvalRequest(t *testing.T, user, args string) string {
	t.Helper()
	status, details := rig.call(t, user, "payout_send", args)
	id, _ := details["approval_request_id"].(string)
	if status != http.StatusPreconditionRequired || id == "" {
		t.Fatalf("the payout was not refused for approval: %d %v", status, details)
	}
	return id
}

// person is a browser of one person: a cookie jar, redirects not followed.
type person struct {
	t      *testing.T
	base   string
	client *http.Client
}

type page struct {
	status int
	header http.Header
	body   string
}

func (rig *pagesRig) newPerson(t *testing.T) *person {
	jar, _ := cookiejar.New(nil)
	return &person{t: t, base: rig.people.URL, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (p *person) do(method, path string, form url.Values, header ...string) page {
	p.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, p.base+path, body)
	if err != nil {
		p.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := p.client.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func (p *person) signIn(user string) {
	p.t.Helper()
	r := p.do("POST", "/signin", url.Values{"user": {user}, "next": {"/"}})
	if r.status != http.StatusSeeOther {
		p.t.Fatalf("sign-in as %s: %d %s", user, r.status, r.body)
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the person's session, read off a page.
func (p *person) csrf() string {
	p.t.Helper()
	m := csrfField.FindStringSubmatch(p.do("GET", "/", nil).body)
	if m == nil {
		p.t.Fatal("no CSRF token on the inbox")
	}
	return m[1]
}

func (p *person) decide(id, decision string) page {
	p.t.Helper()
	return p.do("POST", "/requests/"+id, url.Values{"decision": {decision}, "csrf": {p.csrf()}})
}

func TestPagesSendSignedOutPeopleToSignInAndBack(t *testing.T) {
	rig := newPagesRig(t, nil)
	id := rig.approvalRequest(t, "carol", `{"iban":"DE1","amount":10}`)
	alice := rig.newPerson(t)
	r := alice.do("GET", "/requests/"+id, nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/signin?next=%2Frequests%2F"+id {
		t.Fatalf("signed out: %d %q", r.status, r.header.Get("Location"))
	}
	r = alice.do("POST", "/signin", url.Values{"user": {"alice"}, "next": {"/requests/" + id}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/requests/"+id {
		t.Fatalf("after sign-in: %d %q", r.status, r.header.Get("Location"))
	}
	if r = alice.do("GET", "/requests/"+id, nil); r.status != 200 || !strings.Contains(r.body, "payout.send") {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestPagesInboxListsTheTenantsRequestsOnly(t *testing.T) {
	rig := newPagesRig(t, nil)
	id := rig.approvalRequest(t, "carol", `{"iban":"DE1","amount":10}`)
	alice, mallory := rig.newPerson(t), rig.newPerson(t)
	alice.signIn("alice")
	mallory.signIn("mallory")
	if r := alice.do("GET", "/", nil); r.status != 200 || !strings.Contains(r.body, "/requests/"+id) {
		t.Fatalf("alice's inbox: %d %s", r.status, r.body)
	}
	if r := mallory.do("GET", "/", nil); r.status != 200 || strings.Contains(r.body, id) {
		t.Fatalf("mallory's inbox shows acme's request: %d %s", r.status, r.body)
	}
}

func TestPagesShowTheExactArgumentsEscaped(t *testing.T) {
	rig := newPagesRig(t, nil)
	long := strings.Repeat("x", 500)
	// The script in the IBAN; a javascript: URL and a long value in the
	// IBAN of a second request.
	id := rig.approvalRequest(t, "carol", `{"iban":"<script>alert(1)</script>\u202e","amount":10.50}`)
	id2 := rig.approvalRequest(t, "carol", `{"iban":"javascript:alert(2)`+long+`","amount":1}`)
	alice := rig.newPerson(t)
	alice.signIn("alice")
	r := alice.do("GET", "/requests/"+id, nil)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if strings.Contains(r.body, "<script>") {
		t.Fatalf("a script in the arguments is not escaped:\n%s", r.body)
	}
	// In the arguments (as JSON) and in the filled confirmation_message.
	if strings.Count(r.body, "&lt;script&gt;alert(1)&lt;/script&gt;") < 2 {
		t.Fatalf("the script is not shown, escaped, in the arguments and the message:\n%s", r.body)
	}
	if !strings.Contains(r.body, `\u{202E}`) {
		t.Fatalf("the right-to-left override is not spelled out:\n%s", r.body)
	}
	if !strings.Contains(r.body, "10.50") {
		t.Fatalf("the number is not shown exactly as sent:\n%s", r.body)
	}
	r = alice.do("GET", "/requests/"+id2, nil)
	if regexp.MustCompile(`(?i)(href|src|action)="[^"]*javascript:`).MatchString(r.body) {
		t.Fatalf("a javascript: URL became a link:\n%s", r.body)
	}
	if !strings.Contains(r.body, "<details>") || !strings.Contains(r.body, long) {
		t.Fatalf("the long value is not folded, whole, in a <details>:\n%s", r.body)
	}
}

func TestPagesHeadersForbidScriptFramingAndCaching(t *testing.T) {
	rig := newPagesRig(t, nil)
	alice := rig.newPerson(t)
	alice.signIn("alice")
	for _, path := range []string{"/", "/signin", "/requests/nope"} {
		r := alice.do("GET", path, nil)
		csp := r.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self'", "style-src 'sha256-"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "script-src") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q allows script", path, csp)
		}
		if r.header.Get("X-Frame-Options") != "DENY" || r.header.Get("Cache-Control") != "no-store" || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", path, r.header)
		}
		if strings.Contains(r.body, "<script") || strings.Contains(r.body, " style=") {
			t.Errorf("%s: the page has a script or an inline style attribute", path)
		}
	}
}

func TestPagesRefuseCrossSitePosts(t *testing.T) {
	rig := newPagesRig(t, nil)
	id := rig.approvalRequest(t, "carol", `{"iban":"DE1","amount":10}`)
	alice := rig.newPerson(t)
	alice.signIn("alice")
	token := alice.csrf()
	for name, tc := range map[string]struct {
		form   url.Values
		header []string
	}{
		"no token":         {url.Values{"decision": {"approve"}}, nil},
		"forged token":     {url.Values{"decision": {"approve"}, "csrf": {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}, nil},
		"other Origin":     {url.Values{"decision": {"approve"}, "csrf": {token}}, []string{"Origin", "https://evil.example"}},
		"cross-site fetch": {url.Values{"decision": {"approve"}, "csrf": {token}}, []string{"Sec-Fetch-Site", "cross-site"}},
	} {
		if r := alice.do("POST", "/requests/"+id, tc.form, tc.header...); r.status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, r.status)
		}
	}
	// Another person's token does not do either.
	bob := rig.newPerson(t)
	bob.signIn("bob")
	if r := alice.do("POST", "/requests/"+id, url.Values{"decision": {"approve"}, "csrf": {bob.csrf()}}); r.status != http.StatusForbidden {
		t.Errorf("bob's token in alice's session: %d", r.status)
	}
	if r := alice.do("GET", "/requests/"+id, nil); !strings.Contains(r.body, `id="progress">0 of 2`) {
		t.Fatalf("a refused POST decided something:\n%s", r.body)
	}
	// The same form, same-origin with the token, decides.
	if r := alice.do("POST", "/requests/"+id, url.Values{"decision": {"approve"}, "csrf": {token}}, "Origin", rig.people.URL); r.status != http.StatusSeeOther {
		t.Fatalf("same-origin: %d %s", r.status, r.body)
	}
}

func TestPagesSignInStartsANewSession(t *testing.T) {
	rig := newPagesRig(t, nil)
	// The attacker's own session id, planted in the victim's browser.
	mallory := rig.newPerson(t)
	mallory.signIn("mallory")
	u, _ := url.Parse(rig.people.URL)
	planted := mallory.client.Jar.Cookies(u)
	alice := rig.newPerson(t)
	alice.client.Jar.SetCookies(u, planted)
	alice.signIn("alice")
	after := alice.client.Jar.Cookies(u)
	if len(planted) != 1 || len(after) != 1 || after[0].Value == planted[0].Value {
		t.Fatalf("the session id was kept across sign-in: before %v after %v", planted, after)
	}
	// And the planted id no longer signs anyone in.
	if r := mallory.do("GET", "/", nil); r.status != http.StatusSeeOther {
		t.Fatalf("the planted session still works: %d", r.status)
	}
	// The cookie's attributes.
	r := rig.newPerson(t).do("POST", "/signin", url.Values{"user": {"bob"}})
	c := r.header.Get("Set-Cookie")
	if !strings.Contains(c, "HttpOnly") || !strings.Contains(c, "SameSite=Lax") || !strings.Contains(c, "Path=/") {
		t.Fatalf("session cookie %q", c)
	}
}

func TestPagesSignOutEndsTheSession(t *testing.T) {
	rig := newPagesRig(t, nil)
	alice := rig.newPerson(t)
	alice.signIn("alice")
	u, _ := url.Parse(rig.people.URL)
	old := alice.client.Jar.Cookies(u)
	if r := alice.do("POST", "/signout", url.Values{"csrf": {alice.csrf()}}); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	stale := rig.newPerson(t)
	stale.client.Jar.SetCookies(u, old)
	if r := stale.do("GET", "/", nil); r.status != http.StatusSeeOther {
		t.Fatalf("the session outlived sign-out: %d", r.status)
	}
}

func TestPagesOfAnotherTenantAreNotFound(t *testing.T) {
	rig := newPagesRig(t, nil)
	id := rig.approvalRequest(t, "carol", `{"iban":"DE1","amount":10}`)
	mallory := rig.newPerson(t)
	mallory.signIn("mallory")
	if r := mallory.do("GET", "/requests/"+id, nil); r.status != http.StatusNotFound || strings.Contains(r.body, "DE1") {
		t.Fatalf("globex sees acme's request: %d %s", r.status, r.body)
	}
	if r := mallory.decide(id, "approve"); r.status != http.StatusNotFound {
		t.Fatalf("globex decides acme's request: %d %s", r.status, r.body)
	}
	if r := mallory.decide(id, "deny"); r.status != http.StatusNotFound {
		t.Fatalf("globex denies acme's request: %d %s", r.status, r.body)
	}
}

func TestPagesRefuseApprovingOnesOwnRequest(t *testing.T) {
	rig := newPagesRig(t, nil)
	// alice holds the role and makes the call herself.
	id := rig.approvalRequest(t, "alice", `{"iban":"DE1","amount":10}`)
	alice := rig.newPerson(t)
	alice.signIn("alice")
	r := alice.do("GET", "/requests/"+id, nil)
	if r.status != 200 || strings.Contains(r.body, `value="approve"`) || !strings.Contains(r.body, "your own call") {
		t.Fatalf("the requester is offered to approve: %d %s", r.status, r.body)
	}
	if r := alice.decide(id, "approve"); r.status != http.StatusForbidden {
		t.Fatalf("the requester approved: %d %s", r.status, r.body)
	}
}

func TestPagesRefuseAReplayedDecision(t *testing.T) {
	rig := newPagesRig(t, nil)
	id := rig.approvalRequest(t, "carol", `{"iban":"DE1","amount":10}`)
	alice := rig.newPerson(t)
	alice.signIn("alice")
	form := url.Values{"decision": {"approve"}, "csrf": {alice.csrf()}}
	if r := alice.do("POST", "/requests/"+id, form); r.status != http.StatusSeeOther {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if r := alice.do("POST", "/requests/"+id, form); r.status != http.StatusConflict {
		t.Fatalf("the replayed decision: %d %s", r.status, r.body)
	}
	if r := alice.do("GET", "/requests/"+id, nil); !strings.Contains(r.body, `id="progress">1 of 2`) {
		t.Fatalf("a replay counted twice:\n%s", r.body)
	}
}

func TestPagesTwoApproversThenADenialVetoes(t *testing.T) {
	rig := newPagesRig(t, nil)
	id := rig.approvalRequest(t, "carol", `{"iban":"DE1","amount":10}`)
	alice, bob := rig.newPerson(t), rig.newPerson(t)
	alice.signIn("alice")
	bob.signIn("bob")
	if r := alice.decide(id, "approve"); r.status != http.StatusSeeOther {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if r := bob.decide(id, "approve"); r.status != http.StatusSeeOther {
		t.Fatalf("%d %s", r.status, r.body)
	}
	r := bob.do("GET", "/requests/"+id, nil)
	if !strings.Contains(r.body, `id="state">approved`) || !strings.Contains(r.body, `id="progress">2 of 2`) {
		t.Fatalf("after two approvals:\n%s", r.body)
	}
	// A second call: one denial vetoes it.
	id2 := rig.approvalRequest(t, "carol", `{"iban":"DE2","amount":20}`)
	if r := alice.decide(id2, "deny"); r.status != http.StatusSeeOther {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if r := bob.decide(id2, "approve"); r.status != http.StatusConflict {
		t.Fatalf("an approval after a denial: %d %s", r.status, r.body)
	}
	if r := bob.do("GET", "/requests/"+id2, nil); !strings.Contains(r.body, `id="state">denied`) {
		t.Fatalf("after the denial:\n%s", r.body)
	}
}

func TestPagesSignInGoesNowhereElse(t *testing.T) {
	rig := newPagesRig(t, nil)
	for _, next := range []string{"https://evil.example/", "//evil.example/x", `/\evil.example`, "javascript:alert(1)", "/requests/../../x", "/approvals"} {
		r := rig.newPerson(t).do("POST", "/signin", url.Values{"user": {"alice"}, "next": {next}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/" {
			t.Errorf("next=%q: %d Location %q", next, r.status, r.header.Get("Location"))
		}
	}
}

func TestPagesDevSignInOnlyWhenAskedFor(t *testing.T) {
	rig := newPagesRig(t, nil, httpgate.WithLimits(0, 0))
	p := rig.newPerson(t)
	if r := p.do("POST", "/signin", url.Values{"user": {"alice"}}); r.status != http.StatusNotFound {
		t.Fatalf("dev sign-in without DevSignIn: %d", r.status)
	}
	if r := p.do("GET", "/", nil); r.status != http.StatusNotFound {
		t.Fatalf("inbox without a sign-in: %d", r.status)
	}
}

// confirmationRequest makes carol's write_file call, refused for her
// confirmation, and returns the request's id.
func (rig *pagesRig) confirmationRequest(t *testing.T, args string) string {
	t.Helper()
	status, details := rig.call(t, "carol", "write_file", args)
	id, _ := details["decision_id"].(string)
	if status != http.StatusPreconditionRequired || id == "" {
		t.Fatalf("the write was not refused with a decision id: %d %v", status, details)
	}
	return id
}

func TestPagesConfirmationOfOnesOwnCallOnly(t *testing.T) {
	rig := newPagesRig(t, []axgate.Option{axgate.WithDecisionPages("http://people.test/")})
	args := `{"path":"/tmp/x","content":"<img src=x onerror=alert(1)>{{path}}"}`
	id := rig.confirmationRequest(t, args)
	carol, alice := rig.newPerson(t), rig.newPerson(t)
	carol.signIn("carol")
	alice.signIn("alice")
	r := carol.do("GET", "/requests/"+id, nil)
	if r.status != 200 || strings.Contains(r.body, "<img") || !strings.Contains(r.body, "&lt;img src=x onerror=alert(1)&gt;{{path}} to /tmp/x?") {
		t.Fatalf("the requester's page (placeholders filled once, escaped): %d\n%s", r.status, r.body)
	}
	// Another person of the tenant neither sees nor confirms it.
	if r := alice.do("GET", "/requests/"+id, nil); r.status != http.StatusNotFound {
		t.Fatalf("alice sees carol's confirmation: %d", r.status)
	}
	if r := alice.decide(id, "confirm"); r.status != http.StatusNotFound {
		t.Fatalf("alice confirms carol's call: %d %s", r.status, r.body)
	}
	if r := carol.decide(id, "approve"); r.status != http.StatusBadRequest {
		t.Fatalf("approve on a confirmation: %d", r.status)
	}
	form := url.Values{"decision": {"confirm"}, "csrf": {carol.csrf()}}
	if r := carol.do("POST", "/requests/"+id, form); r.status != http.StatusSeeOther {
		t.Fatalf("carol confirms: %d %s", r.status, r.body)
	}
	// Replaying the decision decides nothing more.
	if r := carol.do("POST", "/requests/"+id, form); r.status != http.StatusConflict {
		t.Fatalf("the replayed confirmation: %d %s", r.status, r.body)
	}
	if status, _ := rig.call(t, "carol", "write_file", args); status != http.StatusOK || rig.ran.Load() != 1 {
		t.Fatalf("the repeat: %d, ran %d", status, rig.ran.Load())
	}
	if status, _ := rig.call(t, "carol", "write_file", args); status != http.StatusPreconditionRequired || rig.ran.Load() != 1 {
		t.Fatalf("a second repeat: %d, ran %d", status, rig.ran.Load())
	}
}
