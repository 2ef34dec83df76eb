package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/axgate/axgate/token"
)

func devShop(t *testing.T, cfg config) *shop {
	t.Helper()
	if cfg.issuer == "" {
		cfg.issuer, cfg.audience = "axgate-shop", "axgate-shop"
	}
	if cfg.pagesURL == "" {
		cfg.pagesURL = "http://shop.test/" // as run sets it
	}
	s, err := newShop(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close() })
	return s
}

// TestWalkthrough runs the walkthrough the shop prints, step by step, over a
// real listener, and checks each answer.
func TestWalkthrough(t *testing.T) {
	s := devShop(t, config{})
	ts := httptest.NewServer(s.handler)
	defer ts.Close()

	vars := map[string]string{"ALICE_CART": cartID(people[0].ID), "BOB_ID": people[1].ID, "SHOP": ts.URL}
	for name, tok := range s.tokens {
		vars[tokenVar(name)] = tok
	}
	for i, st := range walkthrough() {
		n := max(st.Repeat, 1)
		for range n {
			var body io.Reader
			if st.Body != "" {
				body = strings.NewReader(expand(st.Body, vars))
			}
			req, err := http.NewRequest(st.Method, ts.URL+expand(st.Path, vars), body)
			if err != nil {
				t.Fatal(err)
			}
			if st.Body != "" {
				// As the printed curl command sends it.
				req.Header.Set("Content-Type", "application/json")
			}
			if st.As != "" {
				req.Header.Set("Authorization", "Bearer "+vars[tokenVar(st.As)])
			}
			for _, h := range st.Headers {
				req.Header.Set(h[0], expand(h[1], vars))
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var env struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			_ = json.Unmarshal(raw, &env)
			if resp.StatusCode != st.Status || env.Error.Code != st.Code {
				t.Fatalf("step %d (%s): got %d %s, want %d %s\n%s", i+1, st.Title, resp.StatusCode, env.Error.Code, st.Status, st.Code, raw)
			}
			if st.Code == "AXAG_RATE_LIMITED" && resp.Header.Get("Retry-After") == "" {
				t.Fatalf("step %d: no Retry-After", i+1)
			}
			if st.Capture != nil {
				m := regexp.MustCompile(`"` + st.Capture.Field + `":"([^"]*)"`).FindSubmatch(raw)
				if m == nil {
					t.Fatalf("step %d: no %s in %s", i+1, st.Capture.Field, raw)
				}
				vars[st.Capture.Var] = string(m[1])
			}
			if strings.Contains(st.Title, "Idempotent-Replayed") && resp.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("step %d: not marked as replayed", i+1)
			}
		}
	}
}

// The printed walkthrough has a curl command per step and the exports it
// needs.
func TestPrintWalkthrough(t *testing.T) {
	var b bytes.Buffer
	printWalkthrough(&b, "http://127.0.0.1:8080", map[string]string{"alice": "tok"}, map[string]string{"BOB_ID": "b"})
	out := b.String()
	for _, want := range []string{"export ALICE='tok'", "export BOB_ID='b'", "export SHOP='http://127.0.0.1:8080'", `CONFIRMATION=$(curl -s -X POST "$SHOP/confirmations"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in\n%s", want, out)
		}
	}
	if got, want := strings.Count(out, "curl -s"), len(walkthrough()); got != want {
		t.Fatalf("%d curl commands for %d steps", got, want)
	}
}

// With -principal-jwks the shop trusts the keys of that file and prints no
// dev tokens.
func TestPrincipalJWKS(t *testing.T) {
	signer, err := token.GenerateDevKey("idp-1")
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := signer.PublicJWKS()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "idp.jwks")
	if err := os.WriteFile(path, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	s := devShop(t, config{principalJWKS: path, issuer: "https://idp.example", audience: "shop"})
	if s.tokens != nil {
		t.Fatal("dev tokens made although a principal JWKS is configured")
	}
	tok, err := signer.Sign("JWT", jwt.MapClaims{"iss": "https://idp.example", "aud": "shop", "sub": people[0].ID, "exp": time.Now().Add(time.Minute).Unix(), "tenant": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	call := func(token string) int {
		req := httptest.NewRequest("POST", "/tools/product_search/call", strings.NewReader(`{"query":"lamp"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		return rec.Code
	}
	if got := call(tok); got != 200 {
		t.Fatalf("token of the configured issuer: %d", got)
	}
	other, _ := token.GenerateDevKey("idp-1")
	forged, _ := other.Sign("JWT", jwt.MapClaims{"iss": "https://idp.example", "aud": "shop", "sub": people[0].ID, "exp": time.Now().Add(time.Minute).Unix()})
	if got := call(forged); got != 401 {
		t.Fatalf("token of another key: %d", got)
	}

	// Regression (security review): with a real identity provider the
	// human endpoints are not on the agents' port, so an agent holding
	// Alice's bearer token cannot confirm or approve its own calls.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/confirmations", `{"tool":"order_place","arguments":{}}`},
		{"GET", "/approvals", ""},
		{"POST", "/approvals/some-id", `{"approve":true}`},
	} {
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), "token") {
			t.Fatalf("%s %s with an agent's bearer token: %d %s, want 404", c.method, c.path, rec.Code, rec.Body)
		}
	}
}

// The server bounds every phase of a request in time.
func TestServerTimeouts(t *testing.T) {
	srv := newServer(http.NotFoundHandler())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Fatalf("timeouts: read header %v, read %v, write %v, idle %v", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
}

func TestFlagsFromEnvironment(t *testing.T) {
	t.Setenv("AXGATE_ADDR", "127.0.0.1:9999")
	t.Setenv("AXGATE_ISSUER", "https://idp.example")
	c, err := parseFlags([]string{"-audience", "shop"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.addr != "127.0.0.1:9999" || c.issuer != "https://idp.example" || c.audience != "shop" {
		t.Fatalf("config = %+v", c)
	}
	if _, err := parseFlags([]string{"extra"}, io.Discard); err == nil {
		t.Fatal("no error for a stray argument")
	}
	if _, err := newShop(context.Background(), config{manifest: "no-such-file.json", issuer: "i", audience: "a"}); err == nil {
		t.Fatal("no error for a missing manifest")
	}
}

// The bare server (the benchmark baseline) runs the same handlers without
// any gate.
func TestBareServer(t *testing.T) {
	s := devShop(t, config{bare: true})
	req := httptest.NewRequest("POST", "/tools/product_search/call", strings.NewReader(`{"query":"lamp"}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "Desk lamp") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

// run serves until its context ends, printing the walkthrough with the
// address it listens on.
func TestRunServesAndShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, pw)
		pw.Close()
	}()
	var base string
	buf := make([]byte, 64<<10)
	var out []byte
	for base == "" {
		n, err := pr.Read(buf)
		if err != nil {
			t.Fatalf("run ended early: %v\n%s", err, out)
		}
		out = append(out, buf[:n]...)
		if m := regexp.MustCompile(`export SHOP='([^']+)'`).FindSubmatch(out); m != nil {
			base = string(m[1])
		}
	}
	go io.Copy(io.Discard, pr)
	resp, err := http.Get(base + "/tools")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /tools: %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// Concurrent calls on one cart: results are encoded after the store's lock
// is released, so they must not share the store's maps (run with -race).
func TestConcurrentCartCalls(t *testing.T) {
	s := devShop(t, config{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				req := httptest.NewRequest("POST", "/tools/cart_add_item/call", strings.NewReader(`{"product_id":"`+lampID+`","quantity":1}`))
				req.Header.Set("Authorization", "Bearer "+s.tokens["alice"])
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				s.handler.ServeHTTP(rec, req)
				if rec.Code != 200 {
					t.Errorf("%d %s", rec.Code, rec.Body)
					return
				}
			}
		})
	}
	wg.Wait()
}

// The walkthrough's refusals name each call's page, where the person signs
// in with the development sign-in and sees the call.
func TestPagesWithTheDevSignIn(t *testing.T) {
	s := devShop(t, config{})
	ts := httptest.NewServer(s.handler)
	defer ts.Close()
	req, _ := http.NewRequest("POST", ts.URL+"/tools/account_delete/call", strings.NewReader(`{"account_id":"`+people[0].ID+`","confirmation_text":"DELETE"}`))
	req.Header.Set("Authorization", "Bearer "+s.tokens["alice"])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		Error struct {
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&env)
	resp.Body.Close()
	page, _ := env.Error.Details["decision_url"].(string)
	if !strings.HasPrefix(page, "http://shop.test/requests/") {
		t.Fatalf("the refusal names no page: %v", env.Error.Details)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	path := strings.TrimPrefix(page, "http://shop.test")
	resp, err = browser.PostForm(ts.URL+"/signin", url.Values{"user": {people[0].ID}, "next": {path}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "account.delete") || !strings.Contains(string(b), `value="confirm"`) {
		t.Fatalf("alice's page: %d\n%s", resp.StatusCode, b)
	}
}
