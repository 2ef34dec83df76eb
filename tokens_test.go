package axgate_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

const tokManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "order.refund", "entity": "order", "action_type": "write", "description": "Refund an order",
     "required_parameters": [{"name": "order_id", "type": "string"}, {"name": "amount", "type": "number"}],
     "risk_level": "medium", "confirmation_required": true,
     "confirmation_message": "Refund {{amount}} for order {{order_id}}?"},
    {"intent": "payout.send", "entity": "payout", "action_type": "write", "description": "Send a payout",
     "required_parameters": [{"name": "amount", "type": "number"}],
     "risk_level": "low",
     "approval_required": true, "approval_roles": ["finance", "admin"], "approval_count": 2},
    {"intent": "vault.open", "entity": "vault", "action_type": "write", "description": "Open the vault",
     "required_parameters": [{"name": "vault", "type": "string"}],
     "risk_level": "critical", "approval_required": true, "approval_roles": ["admin"]}
  ]
}`

var (
	tokAlice = middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"clerk"}}
	tokBob   = middleware.Principal{ID: "bob", Tenant: "acme", Roles: []string{"finance"}}
	tokCarol = middleware.Principal{ID: "carol", Tenant: "acme", Roles: []string{"admin"}}
)

func tokEnforcer(t testing.TB, opts ...axgate.Option) *axgate.Enforcer {
	t.Helper()
	m, err := manifest.Parse([]byte(tokManifest))
	if err != nil {
		t.Fatal(err)
	}
	e, err := axgate.New(m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func tokCall(tool, args string, p middleware.Principal) *middleware.Call {
	return middleware.NewCall(tool, []byte(args), p)
}

func tokRefusal(t testing.TB, err error, code axerr.Code, status int) map[string]any {
	t.Helper()
	e, ok := axerr.As(err)
	if !ok {
		t.Fatalf("err = %v, want %s", err, code)
	}
	if e.Code != code || e.HTTPStatus() != status {
		t.Fatalf("refusal %s (%d): %s; want %s (%d)", e.Code, e.HTTPStatus(), e.Message, code, status)
	}
	return e.Envelope().Error.Details
}

func TestTokenStagesInOrder(t *testing.T) {
	e := tokEnforcer(t)
	names := e.Stages()
	ic, ia, im := slices.Index(names, "confirmation"), slices.Index(names, "approval"), slices.Index(names, middleware.StageCommit)
	if ic < 0 || ia != ic+1 || im < ia {
		t.Fatalf("stages %v: want confirmation, then approval, before commit", names)
	}
}

func TestIssueConfirmationEndToEnd(t *testing.T) {
	e := tokEnforcer(t)
	ctx := t.Context()
	tool := &spy{}
	const args = `{"order_id":"o-1","amount":25}`

	// No token: 428 with what the UI needs.
	_, err := e.Wrap(tool).Invoke(ctx, tokCall("order_refund", args, tokAlice))
	d := tokRefusal(t, err, axerr.CodeConfirmationMissing, http.StatusPreconditionRequired)
	if d["confirmation_message"] != "Refund 25 for order o-1?" || d["gate"] != "confirmation" {
		t.Fatalf("details = %v", d)
	}

	// The host asked the person and issues a token (arguments may be
	// spelled differently).
	tok, exp, err := e.IssueConfirmation(ctx, tokAlice, "order_refund", []byte(`{"amount":25.00, "order_id":"o-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if life := time.Until(exp); life <= 4*time.Minute || life > 5*time.Minute {
		t.Errorf("token lives %v, want the 5 minute default", life)
	}

	// Check looks without spending.
	c := tokCall("order_refund", args, tokAlice)
	c.Credentials.Confirmation = tok
	if err := e.Check(ctx, c); err != nil {
		t.Fatalf("Check with a valid token: %v", err)
	}

	c = tokCall("order_refund", args, tokAlice)
	c.Credentials.Confirmation = tok
	if _, err := e.Wrap(tool).Invoke(ctx, c); err != nil {
		t.Fatalf("confirmed call refused: %v", err)
	}
	if tool.calls.Load() != 1 || c.Facts.ConfirmationJTI == "" {
		t.Fatalf("tool ran %d times, jti %q", tool.calls.Load(), c.Facts.ConfirmationJTI)
	}

	// Single use.
	c = tokCall("order_refund", args, tokAlice)
	c.Credentials.Confirmation = tok
	_, err = e.Wrap(tool).Invoke(ctx, c)
	if d := tokRefusal(t, err, axerr.CodeConfirmationMissing, 428); d["reason"] != "already_used" {
		t.Fatalf("replay: reason %v", d["reason"])
	}
	// Bound to the caller.
	tok, _, _ = e.IssueConfirmation(ctx, tokAlice, "order_refund", []byte(args))
	c = tokCall("order_refund", args, tokBob)
	c.Credentials.Confirmation = tok
	_, err = e.Wrap(tool).Invoke(ctx, c)
	if d := tokRefusal(t, err, axerr.CodeConfirmationMissing, 428); d["reason"] != "bound_to_other_caller" {
		t.Fatalf("other caller: reason %v", d["reason"])
	}

	if _, _, err := e.IssueConfirmation(ctx, tokAlice, "no_such_tool", []byte(`{}`)); !strings.Contains(err.Error(), string(axerr.CodeIntentNotFound)) {
		t.Errorf("IssueConfirmation(unknown tool) = %v", err)
	}
}

func TestConcurrentConfirmationOneRuns(t *testing.T) {
	e := tokEnforcer(t)
	const args = `{"order_id":"o-1","amount":25}`
	tok, _, err := e.IssueConfirmation(t.Context(), tokAlice, "order_refund", []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	tool := &spy{}
	wrapped := e.Wrap(tool)
	var passed atomic.Int32
	var start, done sync.WaitGroup
	start.Add(1)
	for range 100 {
		done.Go(func() {
			c := tokCall("order_refund", args, tokAlice)
			c.Credentials.Confirmation = tok
			start.Wait()
			if _, err := wrapped.Invoke(t.Context(), c); err == nil {
				passed.Add(1)
			} else if d := tokRefusal(t, err, axerr.CodeConfirmationMissing, 428); d["reason"] != "already_used" {
				t.Errorf("reason %v", d["reason"])
			}
		})
	}
	start.Done()
	done.Wait()
	if passed.Load() != 1 || tool.calls.Load() != 1 {
		t.Fatalf("%d of 100 passed, tool ran %d times; want exactly 1", passed.Load(), tool.calls.Load())
	}
}

func TestApprovalEndToEnd(t *testing.T) {
	var notified []string
	var mu sync.Mutex
	e := tokEnforcer(t, axgate.WithApprovals(axgate.ApprovalOptions{Notifier: gate.NotifierFunc(func(_ context.Context, r gates.ApprovalRequest) error {
		mu.Lock()
		defer mu.Unlock()
		notified = append(notified, r.ID)
		return nil
	})}))
	ctx := t.Context()
	tool := &spy{}
	const args = `{"amount":900}`

	_, err := e.Wrap(tool).Invoke(ctx, tokCall("payout_send", args, tokAlice))
	d := tokRefusal(t, err, axerr.CodeApprovalMissing, http.StatusPreconditionRequired)
	id := d["approval_request_id"].(string)
	if d["count_needed"] != 2 || d["approvers_notified"] != true || len(notified) != 1 || notified[0] != id {
		t.Fatalf("details %v, notified %v", d, notified)
	}

	inbox, _, err := e.Approvals().Pending(ctx, tokBob, "", 0)
	if err != nil || len(inbox) != 1 || inbox[0].ID != id || string(inbox[0].Arguments) != args {
		t.Fatalf("bob's inbox = %+v, %v", inbox, err)
	}
	if own, _, _ := e.Approvals().Pending(ctx, tokAlice, "", 0); len(own) != 0 {
		t.Fatal("the requester sees their own request in an approver's inbox")
	}
	if _, _, _, err := e.Approvals().Decide(ctx, tokAlice, id, true, ""); err == nil {
		t.Fatal("the requester approved their own call")
	}

	_, bobTok, _, err := e.Approvals().Decide(ctx, tokBob, id, true, "looks right")
	if err != nil {
		t.Fatal(err)
	}
	c := tokCall("payout_send", args, tokAlice)
	c.Credentials.Approvals = []string{bobTok}
	_, err = e.Wrap(tool).Invoke(ctx, c)
	if d := tokRefusal(t, err, axerr.CodeApprovalMissing, 428); d["count_received"] != 1 {
		t.Fatalf("1 of 2: %v", d)
	}
	_, carolTok, _, err := e.Approvals().Decide(ctx, tokCarol, id, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := e.Approvals().Request(ctx, tokAlice, id); r.State != gates.ApprovalApproved {
		t.Fatalf("request state %s, want approved", r.State)
	}
	c = tokCall("payout_send", args, tokAlice)
	c.Credentials.Approvals = []string{bobTok, carolTok}
	if _, err := e.Wrap(tool).Invoke(ctx, c); err != nil {
		t.Fatalf("approved call refused: %v", err)
	}
	if !slices.Equal(c.Facts.Approvers, []string{"bob", "carol"}) || c.Facts.ApprovalRequestID != id || tool.calls.Load() != 1 {
		t.Fatalf("facts %+v, tool ran %d", c.Facts, tool.calls.Load())
	}
}

// TestApprovalRequestVisibility: a request, with its arguments, is shown to
// its requester and its approvers only; another tenant cannot tell it from
// an unknown id.
func TestApprovalRequestVisibility(t *testing.T) {
	e := tokEnforcer(t)
	ctx := t.Context()
	_, err := e.Wrap(&spy{}).Invoke(ctx, tokCall("payout_send", `{"amount":900}`, tokAlice))
	id := tokRefusal(t, err, axerr.CodeApprovalMissing, 428)["approval_request_id"].(string)
	for _, p := range []middleware.Principal{tokAlice, tokBob} {
		if r, err := e.Approvals().Request(ctx, p, id); err != nil || r.ID != id {
			t.Errorf("%s cannot read the request: %v", p.ID, err)
		}
	}
	for _, tc := range []struct {
		who    middleware.Principal
		reason string
	}{
		{middleware.Principal{ID: "mallory", Tenant: "globex", Roles: []string{"finance"}}, "request_not_found"},
		{middleware.Principal{ID: "alice", Tenant: "globex"}, "request_not_found"},
		{middleware.Principal{ID: "dave", Tenant: "acme", Roles: []string{"clerk"}}, "not_allowed"},
	} {
		r, err := e.Approvals().Request(ctx, tc.who, id)
		d := tokRefusal(t, err, axerr.CodeApprovalInvalid, http.StatusForbidden)
		if d["reason"] != tc.reason || r.ID != "" || strings.Contains(err.(*axerr.Error).Message, "payout") {
			t.Errorf("%s@%s: %v, %+v", tc.who.ID, tc.who.Tenant, d, r)
		}
	}
	_, err = e.Approvals().Request(ctx, tokBob, "apr_unknown")
	if d := tokRefusal(t, err, axerr.CodeApprovalInvalid, 403); d["reason"] != "request_not_found" {
		t.Errorf("unknown id: %v", d)
	}
}

// TestApprovalsOptionsAndCancel: WithApprovals's settings reach the gate
// (the request's TTL, the requester's quota), and Approvals().Cancel lets
// the requester, and only the requester, withdraw a request, which frees
// its place in the quota.
func TestApprovalsOptionsAndCancel(t *testing.T) {
	e := tokEnforcer(t, axgate.WithApprovals(axgate.ApprovalOptions{RequestTTL: time.Hour, Quota: 1}))
	ctx := t.Context()
	ask := func(amount int) error {
		_, err := e.Wrap(&spy{}).Invoke(ctx, tokCall("payout_send", fmt.Sprintf(`{"amount":%d}`, amount), tokAlice))
		return err
	}
	id := tokRefusal(t, ask(1), axerr.CodeApprovalMissing, 428)["approval_request_id"].(string)
	r, err := e.Approvals().Request(ctx, tokAlice, id)
	if err != nil {
		t.Fatal(err)
	}
	if ttl := r.ExpiresAt.Sub(r.CreatedAt); ttl != time.Hour {
		t.Errorf("request TTL = %v; want the configured hour", ttl)
	}
	if d := tokRefusal(t, ask(2), axerr.CodeRateLimited, 429); d["reason"] != string(reasons.ApprovalQuota) {
		t.Fatalf("second request over a quota of 1: %v", d)
	}
	if err := e.Approvals().Cancel(ctx, tokBob, id); err == nil {
		t.Fatal("an approver cancelled alice's request")
	}
	if err := e.Approvals().Cancel(ctx, tokAlice, id); err != nil {
		t.Fatalf("the requester's cancel: %v", err)
	}
	if inbox, _, err := e.Approvals().Pending(ctx, tokBob, "", 0); err != nil || len(inbox) != 0 {
		t.Fatalf("inbox after the cancel: %d, %v; want empty", len(inbox), err)
	}
	tokRefusal(t, ask(2), axerr.CodeApprovalMissing, 428)
}

// tokListingStore records how many requests the store's List hands back.
type tokListingStore struct {
	*gate.MemoryApprovalStore
	listed atomic.Int32
}

func (s *tokListingStore) List(ctx context.Context, f gates.ApprovalFilter, cursor string, limit int) ([]gates.ApprovalRequest, string, error) {
	out, next, err := s.MemoryApprovalStore.List(ctx, f, cursor, limit)
	s.listed.Add(int32(len(out)))
	return out, next, err
}

// TestPendingApprovalsWithoutTenant: an approver without a tenant sees the
// requests without one, and the store is asked for exactly those, not for
// every tenant's.
func TestPendingApprovalsWithoutTenant(t *testing.T) {
	store := &tokListingStore{MemoryApprovalStore: gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{})}
	e := tokEnforcer(t, axgate.WithApprovalStore(store))
	ctx := t.Context()
	solo := middleware.Principal{ID: "solo", Roles: []string{"clerk"}}
	for _, p := range []middleware.Principal{tokAlice, solo} {
		_, err := e.Wrap(&spy{}).Invoke(ctx, tokCall("payout_send", `{"amount":900}`, p))
		tokRefusal(t, err, axerr.CodeApprovalMissing, 428)
	}
	nora := middleware.Principal{ID: "nora", Roles: []string{"finance"}}
	inbox, _, err := e.Approvals().Pending(ctx, nora, "", 0)
	if err != nil || len(inbox) != 1 || inbox[0].Requester != "solo" || inbox[0].Tenant != "" {
		t.Fatalf("inbox of an approver without a tenant: %+v, %v", inbox, err)
	}
	if n := store.listed.Load(); n != 1 {
		t.Fatalf("the store handed over %d requests for an approver without a tenant, want only the 1 without a tenant", n)
	}
}

// TestNestedCallSpendsItsOwnConfirmation: a tool that makes a gated call of
// its own with the context it was given: its confirmation token lets the
// nested call run once, not once per attempt.
func TestNestedCallSpendsItsOwnConfirmation(t *testing.T) {
	e := tokEnforcer(t)
	ctx := t.Context()
	const refundArgs = `{"order_id":"o-1","amount":25}`
	conf, _, err := e.IssueConfirmation(ctx, tokAlice, "order_refund", []byte(refundArgs))
	if err != nil {
		t.Fatal(err)
	}
	refund := &spy{}
	var nested []error
	outer := middleware.InvokerFunc(func(ctx context.Context, c *middleware.Call) (middleware.Result, error) {
		for range 3 {
			n := tokCall("order_refund", refundArgs, tokAlice)
			n.Credentials.Confirmation = conf
			_, err := e.Wrap(refund).Invoke(ctx, n)
			nested = append(nested, err)
		}
		return middleware.Result{}, nil
	})
	// The outer call, vault_open, is confirmed and approved by carol: its
	// batch holds two tokens.
	const vaultArgs = `{"vault":"main"}`
	vaultConf, _, err := e.IssueConfirmation(ctx, tokAlice, "vault_open", []byte(vaultArgs))
	if err != nil {
		t.Fatal(err)
	}
	c := tokCall("vault_open", vaultArgs, tokAlice)
	c.Credentials.Confirmation = vaultConf
	_, err = e.Wrap(outer).Invoke(ctx, c)
	id := tokRefusal(t, err, axerr.CodeApprovalMissing, 428)["approval_request_id"].(string)
	_, appr, _, err := e.Approvals().Decide(ctx, tokCarol, id, true, "")
	if err != nil {
		t.Fatal(err)
	}
	c = tokCall("vault_open", vaultArgs, tokAlice)
	c.Credentials.Confirmation, c.Credentials.Approvals = vaultConf, []string{appr}
	if _, err := e.Wrap(outer).Invoke(ctx, c); err != nil {
		t.Fatalf("outer call: %v", err)
	}
	if n := refund.calls.Load(); n != 1 || nested[0] != nil {
		t.Fatalf("one confirmation ran the nested refund %d times (first: %v), want once", n, nested[0])
	}
	for _, err := range nested[1:] {
		if d := tokRefusal(t, err, axerr.CodeConfirmationMissing, 428); d["reason"] != "already_used" {
			t.Fatalf("replayed nested call: %v", d)
		}
	}
}

// TestConfirmationKeptWhileApprovalMissing: a critical action needs both; a
// refusal for the missing approval must not spend the person's confirmation.
func TestConfirmationKeptWhileApprovalMissing(t *testing.T) {
	e := tokEnforcer(t)
	ctx := t.Context()
	const args = `{"vault":"main"}`
	conf, _, err := e.IssueConfirmation(ctx, tokAlice, "vault_open", []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	c := tokCall("vault_open", args, tokAlice)
	c.Credentials.Confirmation = conf
	_, err = e.Wrap(&spy{}).Invoke(ctx, c)
	id := tokRefusal(t, err, axerr.CodeApprovalMissing, 428)["approval_request_id"].(string)
	_, appr, _, err := e.Approvals().Decide(ctx, tokCarol, id, true, "")
	if err != nil {
		t.Fatal(err)
	}
	c = tokCall("vault_open", args, tokAlice)
	c.Credentials.Confirmation, c.Credentials.Approvals = conf, []string{appr}
	if _, err := e.Wrap(&spy{}).Invoke(ctx, c); err != nil {
		t.Fatalf("the confirmation was burned by the approval refusal: %v", err)
	}
}

func TestTokenKeyOptions(t *testing.T) {
	ctx := t.Context()
	const args = `{"order_id":"o-1","amount":25}`
	shop := axgate.WithTokens(axgate.TokenOptions{Issuer: "shop", Audience: "shop-api"})
	digest := func(e *axgate.Enforcer) string {
		c := tokCall("order_refund", args, tokAlice)
		_ = e.Check(ctx, c)
		d, _ := c.ArgsSHA256()
		return d
	}
	claims := func(d string) jwt.MapClaims {
		now := time.Now()
		return jwt.MapClaims{"iss": "shop", "aud": "shop-api", "sub": "alice", "tenant": "acme", "jti": rand.Text(),
			"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "intent": "order.refund", "args_sha256": d}
	}
	sign := func(m jwt.SigningMethod, key any, kid string, c jwt.MapClaims) string {
		tok := jwt.NewWithClaims(m, c)
		tok.Header["typ"], tok.Header["kid"] = token.TypConfirmation, kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	try := func(e *axgate.Enforcer, tok string) error {
		c := tokCall("order_refund", args, tokAlice)
		c.Credentials.Confirmation = tok
		_, err := e.Wrap(&spy{}).Invoke(ctx, c)
		return err
	}

	t.Run("JWKS file", func(t *testing.T) {
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		s, _ := token.NewSigner("ui-1", priv)
		doc, _ := s.PublicJWKS()
		path := filepath.Join(t.TempDir(), "jwks.json")
		if err := os.WriteFile(path, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		e := tokEnforcer(t, axgate.WithJWKSFile(path), shop)
		if err := try(e, sign(jwt.SigningMethodEdDSA, priv, "ui-1", claims(digest(e)))); err != nil {
			t.Fatalf("token from a JWKS-file key refused: %v", err)
		}
		// No signing key configured: issuing is impossible, not silently ephemeral.
		if _, _, err := e.IssueConfirmation(ctx, tokAlice, "order_refund", []byte(args)); err == nil {
			t.Error("IssueConfirmation without a signing key succeeded")
		}
	})

	t.Run("JWKS URL", func(t *testing.T) {
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		s, _ := token.NewSigner("ui-2", priv)
		doc, _ := s.PublicJWKS()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(doc)
		}))
		defer srv.Close()
		e := tokEnforcer(t, axgate.WithTokens(axgate.TokenOptions{Issuer: "shop", Audience: "shop-api", JWKSURL: srv.URL}))
		if err := try(e, sign(jwt.SigningMethodEdDSA, priv, "ui-2", claims(digest(e)))); err != nil {
			t.Fatalf("token from a JWKS-URL key refused: %v", err)
		}
	})

	t.Run("shared secret on purpose", func(t *testing.T) {
		secret := []byte("0123456789abcdef0123456789abcdef")
		e := tokEnforcer(t, axgate.WithSharedSecret("hs", secret), shop)
		if err := try(e, sign(jwt.SigningMethodHS256, secret, "hs", claims(digest(e)))); err != nil {
			t.Fatalf("HS256 token with the configured secret refused: %v", err)
		}
		// Without the option HS256 is not accepted, even with a key set holding the secret.
		k, _ := token.HMACKey("hs", secret)
		ks, _ := token.NewKeySet(k)
		e = tokEnforcer(t, axgate.WithTokens(axgate.TokenOptions{Issuer: "shop", Audience: "shop-api", Keys: ks}))
		err := try(e, sign(jwt.SigningMethodHS256, secret, "hs", claims(digest(e))))
		if d := tokRefusal(t, err, axerr.CodeConfirmationMissing, 428); d["reason"] != "algorithm_not_allowed" {
			t.Fatalf("reason %v", d["reason"])
		}
	})

	t.Run("bad configuration fails New", func(t *testing.T) {
		m, _ := manifest.Parse([]byte(tokManifest))
		for name, opt := range map[string]axgate.Option{
			"short secret":   axgate.WithSharedSecret("hs", []byte("short")),
			"missing file":   axgate.WithJWKSFile(filepath.Join(t.TempDir(), "none.json")),
			"bad threshold":  axgate.WithTokens(axgate.TokenOptions{ConfirmationThreshold: "severe"}),
			"algorithm none": axgate.WithTokens(axgate.TokenOptions{Algorithms: []string{"none"}}),
			"negative life":  axgate.WithTokens(axgate.TokenOptions{ApprovalLifetime: -time.Hour}),
			"negative size":  axgate.WithTokens(axgate.TokenOptions{MaxBytes: -1}),
			"negative TTL":   axgate.WithApprovals(axgate.ApprovalOptions{RequestTTL: -time.Hour}),
			"JWKS URL down":  axgate.WithTokens(axgate.TokenOptions{JWKSURL: "http://127.0.0.1:1/jwks.json"}),
		} {
			if e, err := axgate.New(m, opt); err == nil {
				e.Close()
				t.Errorf("%s: New succeeded", name)
			}
		}
	})

	t.Run("threshold", func(t *testing.T) {
		m, _ := manifest.Parse([]byte(tokManifest))
		e, err := axgate.New(m, axgate.WithTokens(axgate.TokenOptions{ConfirmationThreshold: manifest.RiskLow}))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		// payout.send is low risk: now it needs confirmation first.
		err = e.Check(ctx, tokCall("payout_send", `{"amount":1}`, tokAlice))
		tokRefusal(t, err, axerr.CodeConfirmationMissing, 428)
	})
}

// TestApprovalTokensSpentInTheirTenantsShare: the memory replay store keeps
// a share per tenant, and an approval token's id is recorded in its own
// tenant's share. Before, approval tokens were recorded without a tenant, so
// a caller without a tenant that filled that share refused every tenant's
// approved calls with 503.
func TestApprovalTokensSpentInTheirTenantsShare(t *testing.T) {
	replay := token.NewMemoryReplayStore(token.MemoryReplayOptions{MaxEntries: 2})
	e := tokEnforcer(t, axgate.WithReplayStore(replay))
	ctx := t.Context()
	exp := time.Now().Add(time.Hour)
	// Fill the share of callers without a tenant.
	if err := replay.Consume(ctx, []token.Use{{ID: "x-1", Expires: exp}, {ID: "x-2", Expires: exp}}); err != nil {
		t.Fatal(err)
	}
	const args = `{"amount":900}`
	_, err := e.Wrap(&spy{}).Invoke(ctx, tokCall("payout_send", args, tokAlice))
	id := tokRefusal(t, err, axerr.CodeApprovalMissing, http.StatusPreconditionRequired)["approval_request_id"].(string)
	var toks []string
	for _, p := range []middleware.Principal{tokBob, tokCarol} {
		_, tok, _, err := e.Approvals().Decide(ctx, p, id, true, "")
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
	}
	c := tokCall("payout_send", args, tokAlice)
	c.Credentials.Approvals = toks
	tool := &spy{}
	if _, err := e.Wrap(tool).Invoke(ctx, c); err != nil || tool.calls.Load() != 1 {
		t.Fatalf("approved call in tenant acme while the no-tenant share is full: %v (tool ran %d)", err, tool.calls.Load())
	}
}
