package gate_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axgate/axgate/internal/reasons"

	"github.com/golang-jwt/jwt/v5"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// tkManifest has one action per token situation.
const tkManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "order.refund", "entity": "order", "action_type": "write", "description": "Refund an order",
     "required_parameters": [{"name": "order_id", "type": "string"}, {"name": "amount", "type": "number"}],
     "risk_level": "medium", "confirmation_required": true,
     "confirmation_message": "Refund {{amount}} for order {{order_id}}?",
     "side_effects": ["payment_refunded"]},
    {"intent": "order.cancel", "entity": "order", "action_type": "write", "description": "Cancel an order",
     "required_parameters": [{"name": "order_id", "type": "string"}],
     "risk_level": "high"},
    {"intent": "order.view", "entity": "order", "action_type": "read", "description": "Show an order",
     "required_parameters": [{"name": "order_id", "type": "string"}],
     "risk_level": "low"},
    {"intent": "account.purge", "entity": "account", "action_type": "delete", "description": "Purge an account",
     "required_parameters": [{"name": "account_id", "type": "string"}],
     "risk_level": "critical"},
    {"intent": "payout.send", "entity": "payout", "action_type": "write", "description": "Send a payout",
     "required_parameters": [{"name": "amount", "type": "number"}],
     "risk_level": "low",
     "approval_required": true, "approval_roles": ["finance", "admin"], "approval_count": 2},
    {"intent": "vault.open", "entity": "vault", "action_type": "write", "description": "Open the vault",
     "required_parameters": [{"name": "vault", "type": "string"}],
     "risk_level": "high", "approval_required": true, "approval_roles": ["admin"]}
  ]
}`

// tkFixture is a confirmation gate with an Ed25519 and an RSA key.
type tkFixture struct {
	m      *manifest.Manifest
	edKey  ed25519.PrivateKey
	signer *token.Signer // kid "ed"
	rsaKey *rsa.PrivateKey
	keys   *token.StaticKeySet
	replay token.ReplayStore
	// persistent is replay as the gates see it: posing as a store that
	// outlives the process (tkPersistentReplay), so that the tests of
	// other rules may mint tokens in the past.
	persistent token.ReplayStore
	verifier   *token.Verifier
	gate       *gate.Confirmation
	alice      middleware.Principal
}

var (
	tkRSAOnce sync.Once
	tkRSA     *rsa.PrivateKey
)

func tkRSAKey(t testing.TB) *rsa.PrivateKey {
	tkRSAOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		tkRSA = k
	})
	return tkRSA
}

func tkMustParse(t testing.TB, doc string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	return m
}

func newTkFixture(t testing.TB) *tkFixture {
	t.Helper()
	f := &tkFixture{m: tkMustParse(t, tkManifest), alice: middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"clerk"}}}
	var err error
	_, f.edKey, _ = ed25519.GenerateKey(rand.Reader)
	if f.signer, err = token.NewSigner("ed", f.edKey); err != nil {
		t.Fatal(err)
	}
	f.rsaKey = tkRSAKey(t)
	f.keys, err = token.NewKeySet(f.signer.PublicKey(), token.Key{ID: "rsa", Algorithm: "RS256", Public: &f.rsaKey.PublicKey})
	if err != nil {
		t.Fatal(err)
	}
	f.replay = token.NewMemoryReplayStore(token.MemoryReplayOptions{})
	f.persistent = tkPersistentReplay{f.replay}
	f.verifier, err = token.NewVerifier(token.VerifierConfig{Type: token.TypConfirmation, Keys: f.keys, MaxLifetime: token.DefaultConfirmationLifetime})
	if err != nil {
		t.Fatal(err)
	}
	f.gate, err = gate.NewConfirmation(gate.ConfirmationConfig{Verifier: f.verifier, Replay: f.persistent})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// tkPersistentReplay is a memory store posing as one that remembers spent
// tokens across restarts (Redis): it hides RemembersSince, so the gates
// accept tokens issued before it was made.
type tkPersistentReplay struct{ token.ReplayStore }

// call returns a call of the tool of intent with args by alice.
func (f *tkFixture) call(intent, args string) *middleware.Call {
	a := f.m.Action(intent)
	c := middleware.NewCall(a.ToolName(), []byte(args), f.alice)
	c.Action = a
	return c
}

// claims returns valid confirmation claims for alice's call.
func (f *tkFixture) claims(t testing.TB, intent, args string) jwt.MapClaims {
	t.Helper()
	d, err := f.call(intent, args).ArgsSHA256()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	return jwt.MapClaims{
		"iss": token.DefaultIssuer, "aud": token.DefaultAudience, "sub": "alice", "tenant": "acme",
		"jti": rand.Text(), "iat": now.Unix(), "exp": now.Add(2 * time.Minute).Unix(),
		"intent": intent, "args_sha256": d,
	}
}

// sign signs claims with header overrides (nil values delete a header).
func tkSign(t testing.TB, method jwt.SigningMethod, key any, header map[string]any, claims jwt.Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	tok.Header["typ"] = token.TypConfirmation
	for k, v := range header {
		if v == nil {
			delete(tok.Header, k)
		} else {
			tok.Header[k] = v
		}
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *tkFixture) signEd(t testing.TB, header map[string]any, claims jwt.Claims) string {
	t.Helper()
	h := map[string]any{"kid": "ed"}
	for k, v := range header {
		h[k] = v
	}
	return tkSign(t, jwt.SigningMethodEdDSA, f.edKey, h, claims)
}

// tkMust returns v or fails on err.
func tkMust[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// tkJTI returns a token's jti without verifying it.
func tkJTI(t testing.TB, tok string) string {
	t.Helper()
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// tkSwapPayload puts b's payload under a's header and signature.
func tkSwapPayload(a, b string) string {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	return pa[0] + "." + pb[1] + "." + pa[2]
}

func tkJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pass runs the gate and reports the refusal, if any.
func (f *tkFixture) pass(ctx context.Context, c *middleware.Call) error {
	_, err := f.gate.Stage().Interceptor(ctx, c, middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "ran"}, nil
	}))
	return err
}

// passAndCommit runs the gate and then, as the commit stage does, the work
// it deferred, and reports the refusal, if any.
func (f *tkFixture) passAndCommit(ctx context.Context, c *middleware.Call) error {
	_, err := f.gate.Stage().Interceptor(ctx, c, middleware.InvokerFunc(func(ctx context.Context, c *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: "ran"}, c.RunCommits(ctx)
	}))
	return err
}

// tkRefusal asserts err is an *axerr.Error with code and status, and returns
// its envelope details.
func tkRefusal(t testing.TB, err error, code axerr.Code, status int) map[string]any {
	t.Helper()
	e, ok := axerr.As(err)
	if !ok {
		t.Fatalf("err = %v, want an *errors.Error %s", err, code)
	}
	if e.Code != code || e.HTTPStatus() != status {
		t.Fatalf("refusal = %s (%d) %q, want %s (%d)", e.Code, e.HTTPStatus(), e.Message, code, status)
	}
	return e.Envelope().Error.Details
}

func TestConfirmationTokenAttacks(t *testing.T) {
	f := newTkFixture(t)
	const args = `{"order_id":"o-1","amount":25}`
	now := time.Now()
	edPub := []byte(f.signer.PublicKey().Public.(ed25519.PublicKey))
	rsaPubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: tkMust(x509.MarshalPKIXPublicKey(&f.rsaKey.PublicKey))})
	_, other, _ := ed25519.GenerateKey(rand.Reader) // signs with kid "ed" too
	with := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := f.claims(t, "order.refund", args)
		edit(c)
		return c
	}
	valid := func() jwt.MapClaims { return f.claims(t, "order.refund", args) }

	used := f.signEd(t, nil, valid())
	if err := f.replay.Consume(t.Context(), []token.Use{{ID: tkReplayKey(t, used), Expires: now.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("A", 8<<10+1) // past the verifier's default MaxBytes

	tests := []struct {
		name   string
		token  string
		args   string
		p      *middleware.Principal
		intent string
		reason string
	}{
		{name: "alg none", token: tkSign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, map[string]any{"kid": "ed"}, valid()), reason: "algorithm_not_allowed"},
		{name: "alg none without kid", token: tkSign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, nil, valid()), reason: "algorithm_not_allowed"},
		{name: "unknown crit header", token: f.signEd(t, map[string]any{"crit": []string{"exp-ext"}, "exp-ext": true}, valid()), reason: "unsupported_critical_header"},
		{name: "HS256 signed with the Ed25519 public key", token: tkSign(t, jwt.SigningMethodHS256, edPub, map[string]any{"kid": "ed"}, valid()), reason: "algorithm_not_allowed"},
		{name: "HS256 signed with the RSA public key PEM", token: tkSign(t, jwt.SigningMethodHS256, rsaPubPEM, map[string]any{"kid": "rsa"}, valid()), reason: "algorithm_not_allowed"},
		{name: "RS256 header on the EdDSA key", token: tkSign(t, jwt.SigningMethodRS256, f.rsaKey, map[string]any{"kid": "ed"}, valid()), reason: "algorithm_not_allowed"},
		{name: "wrong typ", token: f.signEd(t, map[string]any{"typ": token.TypApproval}, valid()), reason: "wrong_type"},
		{name: "typ JWT", token: f.signEd(t, map[string]any{"typ": "JWT"}, valid()), reason: "wrong_type"},
		{name: "no typ", token: f.signEd(t, map[string]any{"typ": nil}, valid()), reason: "wrong_type"},
		{name: "missing exp", token: f.signEd(t, nil, with(func(c jwt.MapClaims) { delete(c, "exp") })), reason: "missing_claim"},
		{name: "missing iat", token: f.signEd(t, nil, with(func(c jwt.MapClaims) { delete(c, "iat") })), reason: "missing_claim"},
		{name: "missing jti", token: f.signEd(t, nil, with(func(c jwt.MapClaims) { delete(c, "jti") })), reason: "missing_claim"},
		{name: "exp not a number", token: f.signEd(t, nil, with(func(c jwt.MapClaims) { c["exp"] = "tomorrow" })), reason: "malformed"},
		{name: "expired", token: f.signEd(t, nil, with(func(c jwt.MapClaims) {
			c["iat"], c["exp"] = now.Add(-4*time.Minute).Unix(), now.Add(-time.Minute).Unix()
		})), reason: "expired"},
		{name: "nbf in the future", token: f.signEd(t, nil, with(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() })), reason: "not_yet_valid"},
		{name: "iat in the future", token: f.signEd(t, nil, with(func(c jwt.MapClaims) {
			c["iat"], c["exp"] = now.Add(2*time.Minute).Unix(), now.Add(3*time.Minute).Unix()
		})), reason: "issued_in_future"},
		{name: "lifetime over the maximum", token: f.signEd(t, nil, with(func(c jwt.MapClaims) { c["exp"] = now.Add(time.Hour).Unix() })), reason: "lifetime_too_long"},
		{name: "wrong iss", token: f.signEd(t, nil, with(func(c jwt.MapClaims) { c["iss"] = "evil" })), reason: "wrong_issuer"},
		{name: "wrong aud", token: f.signEd(t, nil, with(func(c jwt.MapClaims) { c["aud"] = []string{"other-service"} })), reason: "wrong_audience"},
		{name: "unknown kid", token: f.signEd(t, map[string]any{"kid": "nobody"}, valid()), reason: "unknown_key"},
		{name: "kid not a string", token: f.signEd(t, map[string]any{"kid": 7}, valid()), reason: "malformed"},
		{name: "signed by another key", token: tkSign(t, jwt.SigningMethodEdDSA, other, map[string]any{"kid": "ed"}, valid()), reason: "bad_signature"},
		{name: "payload swapped", token: tkSwapPayload(f.signEd(t, nil, valid()), f.signEd(t, nil, with(func(c jwt.MapClaims) { c["sub"] = "mallory" }))), reason: "bad_signature"},
		{name: "not a JWT", token: "not.a.jwt", reason: "malformed"},
		{name: "other arguments", token: f.signEd(t, nil, valid()), args: `{"order_id":"o-1","amount":2500}`, reason: "bound_to_other_arguments"},
		{name: "other intent", token: f.signEd(t, nil, with(func(c jwt.MapClaims) { c["intent"] = "order.cancel" })), reason: "bound_to_other_intent"},
		{name: "other principal", token: f.signEd(t, nil, valid()), p: &middleware.Principal{ID: "mallory", Tenant: "acme"}, reason: "bound_to_other_caller"},
		{name: "other tenant", token: f.signEd(t, nil, valid()), p: &middleware.Principal{ID: "alice", Tenant: "globex"}, reason: "bound_to_other_tenant"},
		{name: "replay", token: used, reason: "already_used"},
		{name: "oversized", token: huge, reason: "too_large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := args
			if tc.args != "" {
				a = tc.args
			}
			c := f.call("order.refund", a)
			if tc.p != nil {
				c.Principal = *tc.p
			}
			c.Credentials.Confirmation = tc.token
			// Through the commit, which finds a replay.
			d := tkRefusal(t, f.passAndCommit(t.Context(), c), axerr.CodeConfirmationMissing, http.StatusPreconditionRequired)
			if d["gate"] != gate.StageConfirmation {
				t.Errorf("gate = %v, want %s", d["gate"], gate.StageConfirmation)
			}
			if d["reason"] != tc.reason {
				t.Fatalf("reason = %v, want %s", d["reason"], tc.reason)
			}
			if c.Facts.ConfirmationJTI != "" {
				t.Errorf("a refused token was recorded as the call's confirmation: %s", c.Facts.ConfirmationJTI)
			}
			// No key material in what the caller sees.
			body := tkJSON(t, d)
			for _, secret := range []string{base64.RawURLEncoding.EncodeToString(edPub), "BEGIN"} {
				if strings.Contains(body, secret) {
					t.Fatalf("details leak key material: %s", body)
				}
			}
		})
	}

	t.Run("HS256 refused even when allowed, for a key bound to EdDSA", func(t *testing.T) {
		v, err := token.NewVerifier(token.VerifierConfig{Type: token.TypConfirmation, Keys: f.keys,
			Algorithms: []string{"EdDSA", "HS256"}, MaxLifetime: time.Minute * 5})
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Verify(tkSign(t, jwt.SigningMethodHS256, edPub, map[string]any{"kid": "ed"}, valid()))
		var te *token.Error
		if !errors.As(err, &te) || te.Reason != reasons.TokenAlgorithm {
			t.Fatalf("Verify = %v, want %s", err, reasons.TokenAlgorithm)
		}
	})
}

// TestConfirmationOfAnotherAudienceNamesTheExpectedOne: a confirmation
// token minted for another audience (axgate token's default, at a gateway
// whose audience is its URL) is refused with the audience the verifier
// expects, in the message and in details.expected_audience, so that the
// person can mint one that passes; the audience is no secret.
func TestConfirmationOfAnotherAudienceNamesTheExpectedOne(t *testing.T) {
	f := newTkFixture(t)
	const args = `{"order_id":"o-1","amount":25}`
	claims := f.claims(t, "order.refund", args)
	claims["aud"] = []string{"http://127.0.0.1:8080/mcp"}
	c := f.call("order.refund", args)
	c.Credentials.Confirmation = f.signEd(t, nil, claims)
	err := f.passAndCommit(t.Context(), c)
	d := tkRefusal(t, err, axerr.CodeConfirmationMissing, http.StatusPreconditionRequired)
	want := token.DefaultAudience // the fixture's verifier's
	if d["reason"] != "wrong_audience" || d["expected_audience"] != want {
		t.Fatalf("details %v, want reason wrong_audience and expected_audience %q", d, want)
	}
	if e, _ := axerr.As(err); !strings.Contains(e.Message, strconv.Quote(want)) {
		t.Errorf("the message does not name the audience %q: %q", want, e.Message)
	}
}

func TestConfirmationTokenAccepted(t *testing.T) {
	f := newTkFixture(t)
	args := `{"order_id":"o-1","amount":25}`
	for name, tok := range map[string]string{
		"EdDSA":                                  f.signEd(t, nil, f.claims(t, "order.refund", args)),
		"RS256":                                  tkSign(t, jwt.SigningMethodRS256, f.rsaKey, map[string]any{"kid": "rsa"}, f.claims(t, "order.refund", args)),
		"typ with application/ prefix, any case": f.signEd(t, map[string]any{"typ": "application/AXAG-Confirmation+JWT"}, f.claims(t, "order.refund", args)),
		"aud as one of several": f.signEd(t, nil, func() jwt.MapClaims {
			c := f.claims(t, "order.refund", args)
			c["aud"] = []string{"x", "axgate"}
			return c
		}()),
		"exp just past, within leeway": f.signEd(t, nil, func() jwt.MapClaims {
			c := f.claims(t, "order.refund", args)
			c["iat"], c["exp"] = time.Now().Add(-2*time.Minute).Unix(), time.Now().Add(-10*time.Second).Unix()
			return c
		}()),
	} {
		t.Run(name, func(t *testing.T) {
			// Same arguments spelled differently: JCS makes them equal.
			c := f.call("order.refund", "{ \"amount\": 25.0,\n \"order_id\": \"o-1\" }")
			c.Credentials.Confirmation = tok
			if err := f.pass(t.Context(), c); err != nil {
				t.Fatalf("valid token refused: %v", err)
			}
			if c.Facts.ConfirmationJTI != tkJTI(t, tok) {
				t.Errorf("Facts.ConfirmationJTI = %q, want the token's jti", c.Facts.ConfirmationJTI)
			}
			// The gate defers consumption: until the commit, the token is unused.
			if used, _ := f.replay.Used(t.Context(), tkReplayKey(t, tok)); used {
				t.Fatal("the gate spent the token before the commit")
			}
			if err := c.RunCommits(t.Context()); err != nil {
				t.Fatal(err)
			}
			if used, _ := f.replay.Used(t.Context(), tkReplayKey(t, tok)); !used {
				t.Fatal("the commit did not spend the token")
			}
		})
	}
}

func TestConfirmationRequired(t *testing.T) {
	f := newTkFixture(t)
	for _, tc := range []struct {
		intent    string
		threshold manifest.RiskLevel
		want      bool
	}{
		{"order.refund", "", true},          // confirmation_required, medium
		{"order.cancel", "", true},          // high ≥ default threshold
		{"order.view", "", false},           // low
		{"account.purge", "", true},         // critical
		{"order.cancel", "critical", false}, // threshold raised
		{"account.purge", "critical", true}, // critical always
		{"order.view", "low", true},         // threshold lowered
	} {
		g, err := gate.NewConfirmation(gate.ConfirmationConfig{Verifier: f.verifier, Replay: f.replay, Threshold: tc.threshold})
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Required(f.m.Action(tc.intent)); got != tc.want {
			t.Errorf("Required(%s) with threshold %q = %v, want %v", tc.intent, tc.threshold, got, tc.want)
		}
	}
	if _, err := gate.NewConfirmation(gate.ConfirmationConfig{Replay: f.replay, Threshold: "severe"}); err == nil {
		t.Error("an unknown threshold was accepted")
	}
	// Not required: passes without a token.
	if err := f.pass(t.Context(), f.call("order.view", `{"order_id":"o-1"}`)); err != nil {
		t.Fatalf("a low-risk call was refused: %v", err)
	}
}

func TestConfirmationMissingDetails(t *testing.T) {
	f := newTkFixture(t)
	c := f.call("order.refund", `{"order_id":"o-<b>1</b>","amount":25}`)
	err := f.pass(t.Context(), c)
	d := tkRefusal(t, err, axerr.CodeConfirmationMissing, http.StatusPreconditionRequired)
	digest, _ := c.ArgsSHA256()
	want := map[string]any{
		"confirmation_message": "Refund 25 for order o-<b>1</b>?",
		"intent":               "order.refund",
		"risk_level":           "medium",
		"args_sha256":          digest,
		"max_token_lifetime":   300,
		"token_type":           token.TypConfirmation,
		"gate":                 "confirmation",
		"retryable":            true,
	}
	for k, v := range want {
		if tkJSON(t, d[k]) != tkJSON(t, v) {
			t.Errorf("details[%s] = %v, want %v", k, d[k], v)
		}
	}
	if se, _ := d["side_effects"].([]string); len(se) != 1 || se[0] != "payment_refunded" {
		t.Errorf("details[side_effects] = %v", d["side_effects"])
	}
	if _, ok := d["reason"]; ok {
		t.Error("no token given, yet a reason was reported")
	}
}

func TestRenderConfirmationMessage(t *testing.T) {
	m := tkMustParse(t, `{"version":"1.0.0","actions":[{"intent":"note.add","entity":"note","action_type":"write","description":"Add a note",
	  "required_parameters":[{"name":"text","type":"string"}],
	  "optional_parameters":[{"name":"tags","type":"array"},{"name":"n","type":"integer"}],
	  "confirmation_required":true,
	  "confirmation_message":"Add {{ text }} with tags {{tags}} and n={{n}}?"}]}`)
	a := m.Action("note.add")
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"text": "hello", "tags": []any{"a", "b"}, "n": 3.0}, `Add hello with tags ["a","b"] and n=3?`},
		{map[string]any{"text": "{{n}}"}, "Add {{n}} with tags (not set) and n=(not set)?"},
		{map[string]any{"text": "evil\u202Etxt.exe\nline2\x00"}, `Add evil\u{202E}txt.exe\u{A}line2\u{0} with tags (not set) and n=(not set)?`},
		{map[string]any{"text": "zero\u200Bwidth"}, `Add zero\u{200B}width with tags (not set) and n=(not set)?`},
		{map[string]any{"text": strings.Repeat("x", 300)}, "Add " + strings.Repeat("x", 200) + "… with tags (not set) and n=(not set)?"},
	} {
		if got := gate.RenderConfirmationMessage(a, tc.args); got != tc.want {
			t.Errorf("Render(%v)\n got %q\nwant %q", tc.args, got, tc.want)
		}
	}
	plain := tkMustParse(t, tkManifest).Action("order.cancel")
	if got := gate.RenderConfirmationMessage(plain, nil); got != "Allow order.cancel (Cancel an order), risk high?" {
		t.Errorf("default message = %q", got)
	}
}

func TestConfirmationElicitation(t *testing.T) {
	f := newTkFixture(t)
	args := `{"order_id":"o-9","amount":5}`
	t.Run("accepted", func(t *testing.T) {
		c := f.call("order.refund", args)
		var asked string
		c.Elicit = func(_ context.Context, msg string) (bool, error) { asked = msg; return true, nil }
		if err := f.pass(t.Context(), c); err != nil {
			t.Fatalf("accepted elicitation refused: %v", err)
		}
		if asked != "Refund 5 for order o-9?" {
			t.Errorf("person was asked %q", asked)
		}
		if !c.Facts.ConfirmationElicited {
			t.Error("Facts.ConfirmationElicited not set")
		}
	})
	for name, elicit := range map[string]func(context.Context, string) (bool, error){
		"declined":           func(context.Context, string) (bool, error) { return false, nil },
		"elicitation_failed": func(context.Context, string) (bool, error) { return false, errors.New("client gone") },
	} {
		t.Run(name, func(t *testing.T) {
			c := f.call("order.refund", args)
			c.Elicit = elicit
			d := tkRefusal(t, f.pass(t.Context(), c), axerr.CodeConfirmationMissing, http.StatusPreconditionRequired)
			if d["reason"] != name {
				t.Errorf("reason = %v, want %s", d["reason"], name)
			}
			if c.Facts.ConfirmationElicited {
				t.Error("Facts.ConfirmationElicited set on a refusal")
			}
		})
	}
	t.Run("check never asks", func(t *testing.T) {
		c := f.call("order.refund", args)
		c.Elicit = func(context.Context, string) (bool, error) { t.Fatal("Check asked the person"); return true, nil }
		c.SetCheckOnly(true)
		tkRefusal(t, f.pass(t.Context(), c), axerr.CodeConfirmationMissing, http.StatusPreconditionRequired)
	})
}

// tkCommit is the commit stage of the standard chain.
var tkCommit = gate.Commit()

func TestConfirmationConcurrentReplay(t *testing.T) {
	f := newTkFixture(t)
	args := `{"order_id":"o-1","amount":25}`
	tok := f.signEd(t, nil, f.claims(t, "order.refund", args))
	var ran atomic.Int32
	chain := middleware.Build(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		ran.Add(1)
		return middleware.Result{}, nil
	}), nil, f.gate.Stage(), tkCommit)

	const n = 100
	errs := make([]error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Go(func() {
			c := f.call("order.refund", args)
			c.Credentials.Confirmation = tok
			start.Wait()
			_, errs[i] = chain.Invoke(t.Context(), c)
		})
	}
	start.Done()
	done.Wait()
	passed := 0
	for _, err := range errs {
		if err == nil {
			passed++
			continue
		}
		d := tkRefusal(t, err, axerr.CodeConfirmationMissing, http.StatusPreconditionRequired)
		if d["reason"] != "already_used" {
			t.Fatalf("reason = %v, want already_used", d["reason"])
		}
	}
	if passed != 1 || ran.Load() != 1 {
		t.Fatalf("%d of %d concurrent presentations passed and the tool ran %d times; want exactly 1", passed, n, ran.Load())
	}
}

func TestConfirmationNotSpentByLaterRefusal(t *testing.T) {
	f := newTkFixture(t)
	args := `{"order_id":"o-1","amount":25}`
	tok := f.signEd(t, nil, f.claims(t, "order.refund", args))
	refuse := true
	later := middleware.Stage{Name: "ratelimit", Interceptor: func(ctx context.Context, c *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if refuse {
			return middleware.Result{}, axerr.New(axerr.CodeRateLimited, "slow down")
		}
		return next.Invoke(ctx, c)
	}}
	chain := middleware.Build(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{}, nil
	}), nil, f.gate.Stage(), later, tkCommit)
	run := func() error {
		c := f.call("order.refund", args)
		c.Credentials.Confirmation = tok
		_, err := chain.Invoke(t.Context(), c)
		return err
	}
	if err := run(); !errors.Is(err, axerr.CodeRateLimited) {
		t.Fatalf("first call = %v, want the later gate's refusal", err)
	}
	refuse = false
	if err := run(); err != nil {
		t.Fatalf("the confirmation was burned by a later gate's refusal: %v", err)
	}
	err := run()
	if d := tkRefusal(t, err, axerr.CodeConfirmationMissing, http.StatusPreconditionRequired); d["reason"] != "already_used" {
		t.Fatalf("third call reason = %v, want already_used", d["reason"])
	}
}

func TestConfirmationCheckDoesNotSpend(t *testing.T) {
	f := newTkFixture(t)
	args := `{"order_id":"o-1","amount":25}`
	tok := f.signEd(t, nil, f.claims(t, "order.refund", args))
	c := f.call("order.refund", args)
	c.Credentials.Confirmation = tok
	c.SetCheckOnly(true)
	if err := f.pass(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if err := c.RunCommits(t.Context()); err != nil {
		t.Fatal(err)
	}
	if used, _ := f.replay.Used(t.Context(), tkReplayKey(t, tok)); used {
		t.Fatal("a check-only call spent the token")
	}
}

// tkFailingReplay fails every call.
type tkFailingReplay struct{}

func (tkFailingReplay) Consume(context.Context, []token.Use) error {
	return errors.New("connection refused")
}
func (tkFailingReplay) Used(context.Context, string) (bool, error) {
	return false, errors.New("connection refused")
}

func TestConfirmationStoreDownFailsClosed(t *testing.T) {
	f := newTkFixture(t)
	g, err := gate.NewConfirmation(gate.ConfirmationConfig{Verifier: f.verifier, Replay: tkFailingReplay{}})
	if err != nil {
		t.Fatal(err)
	}
	args := `{"order_id":"o-1","amount":25}`
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		t.Fatal("the tool ran although the replay store is down")
		return middleware.Result{}, nil
	})
	for _, checkOnly := range []bool{false, true} {
		// A call fails at the commit (Consume); a check, at its lookup.
		c := f.call("order.refund", args)
		c.Credentials.Confirmation = f.signEd(t, nil, f.claims(t, "order.refund", args))
		c.SetCheckOnly(checkOnly)
		_, err = middleware.Build(tool, nil, g.Stage(), tkCommit).Invoke(t.Context(), c)
		d := tkRefusal(t, err, axerr.CodeStoreUnavailable, http.StatusServiceUnavailable)
		if strings.Contains(tkJSON(t, d), "connection refused") {
			t.Error("the store's error leaked to the caller")
		}
	}
}

func TestVerifierConfig(t *testing.T) {
	f := newTkFixture(t)
	for name, cfg := range map[string]token.VerifierConfig{
		"no type":     {Keys: f.keys, MaxLifetime: time.Minute},
		"no keys":     {Type: token.TypConfirmation, MaxLifetime: time.Minute},
		"no lifetime": {Type: token.TypConfirmation, Keys: f.keys},
		"alg none":    {Type: token.TypConfirmation, Keys: f.keys, MaxLifetime: time.Minute, Algorithms: []string{"none"}},
		"alg unknown": {Type: token.TypConfirmation, Keys: f.keys, MaxLifetime: time.Minute, Algorithms: []string{"XS999"}},
	} {
		if _, err := token.NewVerifier(cfg); err == nil {
			t.Errorf("%s: NewVerifier accepted it", name)
		}
	}
	// A smaller size cap refuses before parsing.
	v, err := token.NewVerifier(token.VerifierConfig{Type: token.TypConfirmation, Keys: f.keys, MaxLifetime: time.Minute * 5, MaxBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Verify(f.signEd(t, nil, f.claims(t, "order.refund", `{}`)))
	var te *token.Error
	if !errors.As(err, &te) || te.Reason != reasons.TokenTooLarge {
		t.Fatalf("Verify = %v, want too_large", err)
	}
}

func tkOK(context.Context, *middleware.Call) (middleware.Result, error) {
	return middleware.Result{Value: "ran"}, nil
}
