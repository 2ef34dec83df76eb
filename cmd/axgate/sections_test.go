package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/axgate/axgate/manifest"
	axnotify "github.com/axgate/axgate/notify"
)

// approvalsManifest copies testdata/serve/approvals.json (cart.add_item
// low, order.place high with confirmation, vault.open critical with
// approval) to a file the test may rewrite.
func approvalsManifest(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "manifest.json")
	copyFile(t, filepath.Join("testdata", "serve", "approvals.json"), p)
	return p
}

// TestServeEnforceShadow: with enforce: {order.place: shadow}, a call the
// confirmation gate would refuse reaches the upstream, and the audit record
// and the log say shadow_deny; cart.add_item stays enforced.
func TestServeEnforceShadow(t *testing.T) {
	t.Parallel()
	pki := newServePKI(t)
	up := &fakeUpstream{}
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	mpath := approvalsManifest(t)
	cfg := writeConfig(t, "enforce:\n  order.place: shadow\n  \"*\": enforce\n")
	rs := startServe(t, nil, "--config", cfg, "--manifest", mpath, "--upstream", upSrv.URL,
		"--jwks", pki.jwks, "--listen", "127.0.0.1:0", "--audit", "stderr")

	status, body := post(t, rs.base, "/tools/order_place/call", pki.bearer, `{"cart_id":"c-1"}`)
	if status != http.StatusOK {
		t.Fatalf("order.place in shadow mode without a confirmation: %d %v, want 200 (the call goes through)", status, body)
	}
	if calls := up.called(); len(calls) != 1 || calls[0].Tool != "order_place" {
		t.Fatalf("upstream calls: %+v, want the one order_place", calls)
	}
	line := rs.log.waitFor(t, `"shadow_deny"`)
	var rec map[string]any
	if err := json.Unmarshal([]byte(line[strings.Index(line, "{"):]), &rec); err != nil {
		t.Fatalf("audit line is not JSON: %v\n%s", err, line)
	}
	if !strings.Contains(line, "order.place") || !strings.Contains(line, "AXAG_CONFIRMATION_MISSING") {
		t.Errorf("audit record of the shadowed call lacks the intent or the code: %s", line)
	}
	if l := rs.log.waitFor(t, "axgate shadow refusal"); !strings.Contains(l, "decision=shadow_deny") || !strings.Contains(l, "intent=order.place") {
		t.Errorf("shadow log record: %s", l)
	}

	// Not in shadow mode: refused, and the upstream is not called.
	status, body = post(t, rs.base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-1","quantity":50}`)
	if status == http.StatusOK || errorCode(body) == "" {
		t.Errorf("cart.add_item (enforced) with quantity 50: %d %v, want a refusal", status, body)
	}
	if n := len(up.called()); n != 1 {
		t.Errorf("the enforced refusal reached the upstream: %d calls", n)
	}

	// A reload to a manifest without order.place is refused: the config's
	// enforce: names it. The manifest in use stays, in shadow mode.
	data, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	acts := m["actions"].([]any)
	m["actions"] = []any{acts[0], acts[2]}
	if err := os.WriteFile(mpath, []byte(toJSON(m)), 0o644); err != nil {
		t.Fatal(err)
	}
	rs.hup <- syscall.SIGHUP
	if l := rs.log.waitFor(t, "reload failed"); !strings.Contains(l, `enforce.order.place: the manifest declares no action`) {
		t.Errorf("reload failure does not say why: %s", l)
	}
	if status, body := post(t, rs.base, "/tools/order_place/call", pki.bearer, `{"cart_id":"c-2"}`); status != http.StatusOK {
		t.Errorf("after the refused reload, order.place: %d %v, want 200 (still in shadow mode)", status, body)
	}
	if code := rs.stop(); code != exitOK {
		t.Errorf("exit %d", code)
	}
}

// TestServeEnforceCritical: plain shadow for a critical action fails at
// start with a message naming it and the way out, as does an intent of
// enforce: or of a webhook that the manifest lacks; shadow-force starts.
func TestServeEnforceCritical(t *testing.T) {
	t.Parallel()
	pki := newServePKI(t)
	mpath := approvalsManifest(t)
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"whole gateway", "enforce: shadow\n", []string{"enforce.*: vault.open is a critical action", "shadow-force"}},
		{"by intent", "enforce:\n  vault.open: shadow\n", []string{"enforce.vault.open: vault.open is a critical action"}},
		{"unknown intent", "enforce:\n  vault.opne: shadow\n", []string{`enforce.vault.opne: the manifest declares no action "vault.opne"`}},
		{"webhook of an unknown intent", "notify:\n  webhooks:\n    - url: https://hooks.example.com/x\n      format: slack\n      intents: [vault.open, vault.shut]\n",
			[]string{`notify.webhooks[0].intents: the manifest declares no action "vault.shut"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeConfig(t, tc.config)
			_, stderr, code := cli(t, nil, "serve", "--config", cfg, "--manifest", mpath, "--upstream", "http://127.0.0.1:1",
				"--jwks", pki.jwks, "--listen", "127.0.0.1:0", "--audit", "off")
			if code != exitFail {
				t.Fatalf("exit %d, want %d\n%s", code, exitFail, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}

	up := &fakeUpstream{}
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	cfg := writeConfig(t, "enforce:\n  \"*\": shadow\n  vault.open: shadow-force\n")
	rs := startServe(t, nil, "--config", cfg, "--manifest", mpath, "--upstream", upSrv.URL,
		"--jwks", pki.jwks, "--listen", "127.0.0.1:0", "--audit", "off")
	// Forced: the call that needs an approval goes through, and no request
	// is opened.
	if status, body := post(t, rs.base, "/tools/vault_open/call", pki.bearer, `{"vault_id":"v-1"}`); status != http.StatusOK {
		t.Errorf("vault.open under shadow-force: %d %v, want 200", status, body)
	}
	if calls := up.called(); len(calls) != 1 || calls[0].Tool != "vault_open" {
		t.Errorf("upstream calls: %+v", calls)
	}
}

// hookReceiver is a webhook receiver that keeps what it was sent.
type hookReceiver struct {
	mu     sync.Mutex
	bodies [][]byte
	sigs   []string
	got    chan struct{}
}

func newHookReceiver(t *testing.T) (*hookReceiver, string) {
	h := &hookReceiver{got: make(chan struct{}, 16)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.bodies = append(h.bodies, body)
		h.sigs = append(h.sigs, r.Header.Get(axnotify.SignatureHeader))
		h.mu.Unlock()
		h.got <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return h, srv.URL
}

// wait returns the i-th delivery (0-based), waiting up to a minute.
func (h *hookReceiver) wait(t *testing.T, i int) (body []byte, sig string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		h.mu.Lock()
		if len(h.bodies) > i {
			body, sig = h.bodies[i], h.sigs[i]
			h.mu.Unlock()
			return body, sig
		}
		h.mu.Unlock()
		select {
		case <-h.got:
		case <-deadline:
			t.Fatalf("no delivery %d within a minute", i+1)
		}
	}
}

func (h *hookReceiver) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.bodies)
}

// TestServeNotifyWebhooks: a call that needs an approval makes serve POST
// a signed notification that axnotify.Verify accepts, to the webhook of the
// caller's tenant and the action only; the keys come from a variable and a
// file, and a reload keeps the webhooks.
func TestServeNotifyWebhooks(t *testing.T) {
	t.Parallel()
	pki := newServePKI(t)
	acmeBob := mint(t, "principal", "--key", pki.key, "--sub", "bob", "--tenant", "acme", "--roles", "buyer")
	globex := mint(t, "principal", "--key", pki.key, "--sub", "carol", "--tenant", "globex", "--roles", "buyer")
	up := &fakeUpstream{}
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	mpath := approvalsManifest(t)

	acme, acmeURL := newHookReceiver(t)
	other, otherURL := newHookReceiver(t)
	acmeKey, otherKey := "acme-hook-key", "globex-hook-key"
	keyFile := filepath.Join(t.TempDir(), "hook.key")
	if err := os.WriteFile(keyFile, []byte(otherKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, `
notify:
  webhooks:
    - url: `+acmeURL+`
      secret-env: ACME_HOOK_KEY
      tenants: [acme]
      intents: [vault.open]
    - url: `+otherURL+`
      secret-file: `+keyFile+`
      tenants: [globex]
`)
	environ := map[string]string{"ACME_HOOK_KEY": acmeKey}
	rs := startServe(t, environ, "--config", cfg, "--manifest", mpath, "--upstream", upSrv.URL,
		"--jwks", pki.jwks, "--listen", "127.0.0.1:0", "--audit", "off")

	// vault.open is critical: it needs the person's confirmation too.
	confirm := func(sub, tenant string) string {
		return mint(t, "confirmation", "--key", pki.key, "--sub", sub, "--tenant", tenant, "--intent", "vault.open", "--args", `{"vault_id":"v-1"}`)
	}
	check := func(h *hookReceiver, i int, key, tenant, requester string) {
		t.Helper()
		body, sig := h.wait(t, i)
		if err := axnotify.Verify([]byte(key), sig, body, 0, time.Now()); err != nil {
			t.Fatalf("axnotify.Verify: %v (header %q)", err, sig)
		}
		var p axnotify.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		if p.Type != axnotify.EventApprovalRequested || p.Tenant != tenant || p.Intent != "vault.open" || p.Requester != requester ||
			p.RiskLevel != "critical" || p.Message != "Open vault v-1?" || strings.Join(p.SideEffects, ",") != "opens the vault" || p.RequestID == "" {
			t.Errorf("payload: %+v", p)
		}
		if err := axnotify.Verify([]byte("another key"), sig, body, 0, time.Now()); err == nil {
			t.Errorf("the signature verifies with another key")
		}
	}

	status, body := post(t, rs.base, "/tools/vault_open/call", acmeBob, `{"vault_id":"v-1"}`, "X-AXAG-Confirmation", confirm("bob", "acme"))
	if status == http.StatusOK || !strings.Contains(errorCode(body), "APPROVAL") {
		t.Fatalf("vault.open without approval: %d %v, want an approval refusal", status, body)
	}
	check(acme, 0, acmeKey, "acme", "bob")

	// The other tenant's request goes to its own webhook (key from a file,
	// without its final newline).
	if status, body := post(t, rs.base, "/tools/vault_open/call", globex, `{"vault_id":"v-1"}`, "X-AXAG-Confirmation", confirm("carol", "globex")); status == http.StatusOK {
		t.Fatalf("globex vault.open: %d %v", status, body)
	}
	check(other, 0, otherKey, "globex", "carol")
	// acme's webhook names vault.open only: a call of another action that
	// opens no request notifies no one, and globex's request did not reach
	// acme.
	if n := acme.count(); n != 1 {
		t.Errorf("acme's webhook got %d deliveries, want 1", n)
	}

	// A reload keeps the webhooks.
	rs.hup <- syscall.SIGHUP
	rs.log.waitFor(t, "manifest reloaded")
	if status, body := post(t, rs.base, "/tools/vault_open/call", pki.bearer, `{"vault_id":"v-1"}`, "X-AXAG-Confirmation", confirm("alice", "acme")); status == http.StatusOK {
		t.Fatalf("vault.open after reload: %d %v", status, body)
	}
	check(acme, 1, acmeKey, "acme", "alice")
	if n := other.count(); n != 1 {
		t.Errorf("globex's webhook got %d deliveries, want 1", n)
	}
	if len(up.called()) != 0 {
		t.Errorf("calls needing an approval reached the upstream: %+v", up.called())
	}
}

// TestServeNotifyKeyMissing: a webhook whose key variable is unset fails
// at start, naming it; the key never has to sit in the file.
func TestServeNotifyKeyMissing(t *testing.T) {
	t.Parallel()
	pki := newServePKI(t)
	cfg := writeConfig(t, "notify:\n  webhooks:\n    - url: https://hooks.example.com/x\n      secret-env: NO_SUCH_KEY\n    - url: https://hooks.example.com/y\n      secret-file: /nonexistent/key\n")
	_, stderr, code := cli(t, nil, "serve", "--config", cfg, "--manifest", approvalsManifest(t), "--upstream", "http://127.0.0.1:1",
		"--jwks", pki.jwks, "--listen", "127.0.0.1:0", "--audit", "off")
	if code != exitFail || !strings.Contains(stderr, "notify.webhooks[0]: secret-env NO_SUCH_KEY is not set") ||
		!strings.Contains(stderr, "notify.webhooks[1]: secret-file:") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
}

// TestServeShadowConfigInShadowDoc: docs/shadow.md's example
// configuration starts serve on a manifest with those actions, and does
// what its comments say.
func TestServeShadowConfigInShadowDoc(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "shadow.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "<!-- shadow-config:start -->\n```yaml\n")
	if !ok {
		t.Fatal("docs/shadow.md has no shadow-config example")
	}
	block, _, _ = strings.Cut(block, "```")
	pki := newServePKI(t)
	up := &fakeUpstream{}
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	rs := startServe(t, nil, "--config", writeConfig(t, block), "--manifest", approvalsManifest(t), "--upstream", upSrv.URL,
		"--jwks", pki.jwks, "--listen", "127.0.0.1:0", "--audit", "off")
	if status, body := post(t, rs.base, "/tools/cart_add_item/call", pki.bearer, `{"product_id":"p-1","quantity":50}`); status != http.StatusOK {
		t.Errorf(`cart.add_item ("*": shadow) over its maximum: %d %v, want 200`, status, body)
	}
	if status, body := post(t, rs.base, "/tools/order_place/call", pki.bearer, `{"cart_id":"c-1"}`); errorCode(body) != "AXAG_CONFIRMATION_MISSING" {
		t.Errorf("order.place (enforce) without confirmation: %d %v, want AXAG_CONFIRMATION_MISSING", status, body)
	}
	if status, body := post(t, rs.base, "/tools/vault_open/call", pki.bearer, `{"vault_id":"v-1"}`); status != http.StatusOK {
		t.Errorf("vault.open (shadow-force) without confirmation or approval: %d %v, want 200", status, body)
	}
	if n := len(up.called()); n != 2 {
		t.Errorf("upstream got %d calls, want 2: %+v", n, up.called())
	}
}

// TestShadowOptionsMapping: how enforce: maps onto ShadowOptions for the
// actions of a manifest (cart.add_item low, order.place high, vault.open
// critical).
func TestShadowOptionsMapping(t *testing.T) {
	t.Parallel()
	m, err := manifest.LoadFile(filepath.Join("testdata", "serve", "approvals.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		intents        map[string]string
		shadow, forced string // comma-joined; "-" for no WithShadow
	}{
		{"empty", nil, "-", ""},
		{"all enforced", map[string]string{"*": "enforce", "order.place": "enforce"}, "-", ""},
		{"one intent", map[string]string{"order.place": "shadow"}, "order.place", ""},
		{"star with exceptions", map[string]string{"*": "shadow", "order.place": "enforce", "vault.open": "enforce"}, "cart.add_item", ""},
		{"star forced", map[string]string{"*": "shadow-force"}, "cart.add_item,order.place,vault.open", "vault.open"},
		{"forced by intent", map[string]string{"vault.open": "shadow-force", "cart.add_item": "shadow"}, "cart.add_item,vault.open", "vault.open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := shadowOptions(enforceSection{Intents: tc.intents}, m)
			if err != nil {
				t.Fatal(err)
			}
			if o == nil {
				if tc.shadow != "-" {
					t.Fatalf("no shadow mode, want %s", tc.shadow)
				}
				return
			}
			if got := strings.Join(o.Intents, ","); got != tc.shadow {
				t.Errorf("Intents = %s, want %s", got, tc.shadow)
			}
			if got := strings.Join(o.ForceIntents, ","); got != tc.forced || o.Force {
				t.Errorf("ForceIntents = %s (Force %v), want %s", got, o.Force, tc.forced)
			}
		})
	}
}
