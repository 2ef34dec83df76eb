package axgate_test

// The Go snippets of docs/ (and once of README.md), each run here as written (TestREADMESnippetsAreTested
// checks that they are): around each, the test defines what the README
// takes as given and checks what the README says happens.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// readmeDir makes a directory holding the README's files (axag.json and
// the like) the working directory of the test.
func readmeDir(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "readme", "axag.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "axag.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
}

// TestREADMEShowsTheSnippetsManifest: the manifest the README shows above
// its first snippet is the one the snippets run on (testdata/readme), byte
// for byte, so that a reader who copies it gets what the README says.
func TestREADMEShowsTheSnippetsManifest(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "<!-- readme-manifest:start -->\n```json\n")
	if !ok {
		t.Fatal("README.md has no <!-- readme-manifest:start --> json block")
	}
	block, _, _ = strings.Cut(block, "```")
	want, err := os.ReadFile(filepath.Join("testdata", "readme", "axag.json"))
	if err != nil {
		t.Fatal(err)
	}
	if block != string(want) {
		t.Errorf("the README's manifest differs from testdata/readme/axag.json:\n%s", block)
	}
	if _, err := manifest.Load(strings.NewReader(block)); err != nil {
		t.Errorf("the README's manifest does not load: %v", err)
	}
}

// TestREADMELibraryAndHTTP runs the library quick start's calls, then the
// fragments of docs/http.md: the tool server takes the bare tool of the
// first, and a confirmed call through it runs the tool once.
func TestREADMELibraryAndHTTP(t *testing.T) {
	readmeDir(t)
	ctx := context.Background()
	w := httptest.NewRecorder()

	m, err := manifest.LoadFile("axag.json") // JSON or YAML, v1 or reference form
	if err != nil {
		log.Fatal(err) // every problem, each with its JSON Pointer path
	}
	enf, err := axgate.New(m)
	if err != nil {
		log.Fatal(err)
	}
	orderTool := middleware.InvokerFunc(func(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
		args, _ := call.Args() // already decoded, validated and allowed
		return middleware.Result{Value: map[string]any{"order_id": "o-1", "cart": args["cart_id"]}}, nil
	})
	placeOrder := enf.Wrap(orderTool) // the bare tool in the chain; wrap a tool once

	call := middleware.NewCall("order_place", json.RawMessage(`{"cart_id":"nope"}`),
		middleware.Principal{ID: "user-1", Tenant: "acme"})
	_, err = placeOrder.Invoke(ctx, call)
	if e, ok := axerr.As(err); ok {
		// e.Code == "AXAG_INVALID_FORMAT" (the first violation's, in path order),
		// e.HTTPStatus() == 400, e.Violations lists /cart_id (AXAG_INVALID_FORMAT,
		// uuid) and /shipping_address_id (AXAG_MISSING_PARAM).
		json.NewEncoder(w).Encode(e) // {"error":{"code","type","message","details"}}
	}

	e, ok := axerr.As(err)
	if !ok || e.Code != axerr.CodeInvalidFormat || e.HTTPStatus() != 400 || len(e.Violations) != 2 ||
		e.Violations[0].Path != "/cart_id" || e.Violations[0].Code != axerr.CodeInvalidFormat ||
		e.Violations[1].Path != "/shipping_address_id" || e.Violations[1].Code != axerr.CodeMissingParam {
		t.Fatalf("the first snippet's refusal: %+v", err)
	}
	if !strings.Contains(w.Body.String(), `"code":"AXAG_INVALID_FORMAT"`) {
		t.Fatalf("the envelope: %s", w.Body)
	}

	// What the HTTP snippet takes as given: an identity provider's keys, the
	// application, the UI's session.
	idp, err := token.GenerateDevKey("idp-1")
	if err != nil {
		t.Fatal(err)
	}
	idpKeys, err := token.NewKeySet(idp.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	iss, aud := "https://id.example", "shop-api"
	app := http.NewServeMux()
	// The UI backend's session: a person, never an agent's bearer token
	// (NewHumanHandler takes a HumanPrincipalFunc, not a PrincipalFunc).
	sessionPrincipal := func(*http.Request) (middleware.Principal, error) {
		return middleware.Principal{ID: "user-1", Tenant: "acme"}, nil
	}

	auth, _ := httpgate.JWTBearer(httpgate.BearerConfig{Keyfunc: token.Keyfunc(idpKeys), Issuer: iss, Audience: aud})

	// gate routes of an existing handler: arguments = JSON body + path values + query parameters
	gate, err := httpgate.NewMiddleware(enf, httpgate.WithPrincipal(auth),
		httpgate.WithRoute("POST /orders", "order_place"),
		httpgate.WithRoute("DELETE /accounts/{account_id}", "account_delete"))
	if err != nil {
		log.Fatal(err) // a bad pattern, an unknown tool, a path value no gate would check
	}
	api := gate(app)

	// or serve the tools: GET /tools, GET /tools/{name}, POST /tools/{name}/validate, POST /tools/{name}/call
	// the bare tool: the server wraps it (a tool already wrapped is refused, axgate.ErrWrapped)
	tools, _ := httpgate.NewToolServer(enf, map[string]middleware.Invoker{"order_place": orderTool}, httpgate.WithPrincipal(auth))

	// confirmations and approvals for people, on the UI backend only
	ui := httpgate.NewHumanHandler(enf, sessionPrincipal) // POST /confirmations, GET /approvals, POST /approvals/{id}

	if api == nil || tools == nil || ui == nil {
		t.Fatal("the HTTP snippet built nothing")
	}
	srv := httptest.NewServer(tools)
	defer srv.Close()
	now := time.Now()
	bearer, err := idp.Sign("JWT", jwt.MapClaims{"iss": iss, "aud": aud, "sub": "user-1", "tenant": "acme", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"cart_id":"3fa85f64-5717-4562-b3fc-2c963f66afa6","shipping_address_id":"a-1"}`)
	conf, _, err := enf.IssueConfirmation(ctx, middleware.Principal{ID: "user-1", Tenant: "acme"}, "order_place", args)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/tools/order_place/call", bytes.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("X-AXAG-Confirmation", conf)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 200 {
		t.Fatalf("a confirmed call through the README's tool server: %d %v; want 200", resp.StatusCode, body)
	}
}

// TestREADMEIssuingTokens runs docs/tokens.md's "Issuing tokens and deciding approvals".
func TestREADMEIssuingTokens(t *testing.T) {
	readmeDir(t)
	ctx := context.Background()
	m, err := manifest.LoadFile("axag.json")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := token.GenerateDevKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	principal := middleware.Principal{ID: "alice", Tenant: "acme"}
	approver := middleware.Principal{ID: "fiona", Tenant: "acme", Roles: []string{"finance"}}
	args := json.RawMessage(`{"order_id":"o-1","amount":25}`)
	var ran bool
	refund := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		ran = true
		return middleware.Result{}, nil
	})

	e, _ := axgate.New(m, axgate.WithSigningKey(signer)) // signer, _ := token.LoadSigningKeyFile("keys/signing-key.pem", "k1")

	// The host's UI has just asked the person "Refund 25 for order o-1?" and they said yes:
	tok, expires, err := e.IssueConfirmation(ctx, principal, "order_refund", json.RawMessage(`{"order_id":"o-1","amount":25}`))
	call := middleware.NewCall("order_refund", args, principal)
	call.Credentials.Confirmation = tok       // over HTTP: the X-AXAG-Confirmation header
	_, err = e.Wrap(refund).Invoke(ctx, call) // 428 AXAG_APPROVAL_MISSING: the action needs an approval too

	// Approval: the refused call recorded a pending request (details.approval_request_id).
	approvals := e.Approvals()
	inbox, next, _ := approvals.Pending(ctx, approver, "", 0)                      // a page: same tenant, one of the roles, not their own
	_, apprTok, _, err := approvals.Decide(ctx, approver, inbox[0].ID, true, "ok") // the request as it stands, a signed approval token, once per approver
	// The caller retries with call.Credentials.Approvals = []string{apprTok, …}.

	if err != nil || tok == "" || expires.IsZero() || next != "" || len(inbox) != 1 || ran {
		t.Fatalf("tokens: %v, %q, %v, next %q, %d pending, the tool ran %v", err, tok, expires, next, len(inbox), ran)
	}
	call.Credentials.Approvals = []string{apprTok}
	if _, err := e.Wrap(refund).Invoke(ctx, call); err != nil || !ran {
		t.Fatalf("the confirmed, approved refund: %v, ran %v", err, ran)
	}
}

// TestREADMEDecidedOnAPage runs docs/tokens.md's "Decided on a page: no token to carry".
func TestREADMEDecidedOnAPage(t *testing.T) {
	readmeDir(t)
	ctx := context.Background()
	m, lerr := manifest.LoadFile("axag.json")
	if lerr != nil {
		t.Fatal(lerr)
	}
	principal := middleware.Principal{ID: "alice", Tenant: "acme"}
	approver := middleware.Principal{ID: "fiona", Tenant: "acme", Roles: []string{"finance"}}
	args := json.RawMessage(`{"order_id":"o-1","amount":25}`)
	var ran int
	refund := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		ran++
		return middleware.Result{}, nil
	})

	e, _ := axgate.New(m, axgate.WithDecisionPages("https://ops.example/axgate/"))
	refundCall := func() *middleware.Call { return middleware.NewCall("order_refund", args, principal) }

	_, err := e.Wrap(refund).Invoke(ctx, refundCall()) // 428 AXAG_CONFIRMATION_MISSING
	ae, _ := axerr.As(err)                             // details: decision_id "cnf_…", request_state "pending",
	// decision_url "https://ops.example/axgate/requests/cnf_…", agent_action "Show decision_url to the user …"

	// The person, signed in on the page (which calls the workflow for them), confirms:
	_, _, _, err = e.Approvals().Decide(ctx, principal, ae.Details["decision_id"].(string), true, "")

	_, err = e.Wrap(refund).Invoke(ctx, refundCall()) // 428 AXAG_APPROVAL_MISSING: the action needs an approval too
	ae, _ = axerr.As(err)                             // its page: decision_url ".../requests/apr_…"
	_, _, _, err = e.Approvals().Decide(ctx, approver, ae.Details["decision_id"].(string), true, "ok")

	_, err = e.Wrap(refund).Invoke(ctx, refundCall()) // runs, with no token: once
	_, err = e.Wrap(refund).Invoke(ctx, refundCall()) // 428 again: a new confirmation request

	if ran != 1 || !axerr.Is(err, axerr.CodeConfirmationMissing) || ae.Code != axerr.CodeApprovalMissing {
		t.Fatalf("the refund ran %d times (want once); last refusal %v", ran, err)
	}
	if inbox, _, _ := e.Approvals().Pending(ctx, principal, "", 0); len(inbox) != 1 || inbox[0].Kind != "confirmation" {
		t.Fatalf("alice's inbox after the run: %+v; want a new confirmation request", inbox)
	}
}

// mintConfirmation is the README's golang-jwt snippet.
func mintConfirmation(now time.Time, ed25519PrivateKey ed25519.PrivateKey) (string, error) {
	claims := jwt.MapClaims{
		"iss": "axgate", "aud": "axgate", "sub": "alice", "tenant": "acme",
		"jti": rand.Text(), "iat": now.Unix(), "exp": now.Add(2 * time.Minute).Unix(),
		"intent": "order.refund", "args_sha256": "yxPIr3M2Z2Bp8vLa7mNCVife04CB1Wab3z1MizvGGSs",
	}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	t.Header["typ"], t.Header["kid"] = "axag-confirmation+jwt", "k1"
	token, err := t.SignedString(ed25519PrivateKey)
	return token, err
}

// TestREADMEMintConfirmation: the token the golang-jwt snippet mints is a
// confirmation the enforcer accepts for the call whose digest it names.
func TestREADMEMintConfirmation(t *testing.T) {
	readmeDir(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := token.NewSigner("k1", priv)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse([]byte(`{"version":"1.0.0","actions":[{"intent":"order.refund","entity":"order","action_type":"write","description":"Refund an order",
	  "required_parameters":[{"name":"order_id","type":"string"},{"name":"amount","type":"number"}],"risk_level":"medium","confirmation_required":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := axgate.New(m, axgate.WithSigningKey(signer))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := mintConfirmation(time.Now(), priv)
	if err != nil {
		t.Fatal(err)
	}
	call := middleware.NewCall("order_refund", json.RawMessage(`{"order_id":"o-1","amount":25}`), middleware.Principal{ID: "alice", Tenant: "acme"})
	if d, _ := call.ArgsSHA256(); d != "yxPIr3M2Z2Bp8vLa7mNCVife04CB1Wab3z1MizvGGSs" {
		t.Fatalf("the README's args_sha256 is not the digest of its arguments: %s", d)
	}
	call.Credentials.Confirmation = tok
	if err := e.Check(context.Background(), call); err != nil {
		t.Fatalf("the minted confirmation: %v", err)
	}
}

// The host's own checks the conditions snippet binds.
type readmeBilling struct{}

func (readmeBilling) HasMethod(context.Context, string) bool { return true }

type readmeCarts struct{}

func (readmeCarts) IsValidated(context.Context, *middleware.Call) error { return nil }

var (
	billing readmeBilling
	carts   readmeCarts
)

// TestREADMEConditions runs docs/policy.md's "Preconditions and postconditions".
func TestREADMEConditions(t *testing.T) {
	m, err := manifest.Parse([]byte(`{"version":"1.0.0","actions":[
	  {"intent":"cart.validate","entity":"cart","action_type":"read","description":"Validate the cart","risk_level":"none",
	   "postconditions":["cart_validated"]},
	  {"intent":"order.place","entity":"order","action_type":"write","description":"Place an order","risk_level":"low",
	   "required_parameters":[{"name":"cart_id","type":"string"}],
	   "preconditions":["payment method is set","business_hours","cart_validated"],"postconditions":["order created"]}]}`))
	if err != nil {
		t.Fatal(err)
	}

	enf, err := axgate.New(m,
		axgate.WithPrecondition("payment method is set", func(ctx context.Context, call *middleware.Call) error {
			if !billing.HasMethod(ctx, call.Principal.ID) {
				return errors.New("no payment method") // stays in the cause, never shown to the caller
			}
			return nil
		}),
		axgate.WithPreconditionExpr("business_hours", `principal.claims.tz == "Europe/Paris"`),
		axgate.WithPostconditionExpr("order created", `has(result.order_id) && result.order_id != ""`),
		// both sides of cart_validated, see below
		axgate.WithPrecondition("cart_validated", carts.IsValidated),
		axgate.WithPostcondition("cart_validated", func(ctx context.Context, call *middleware.Call, _ middleware.Result) error {
			return carts.IsValidated(ctx, call)
		}),
	)

	if err != nil {
		t.Fatal(err)
	}
	call := middleware.NewCall("order_place", json.RawMessage(`{"cart_id":"c-1"}`),
		middleware.Principal{ID: "alice", Tenant: "acme", Claims: map[string]any{"tz": "Europe/Paris"}})
	if _, err := enf.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: map[string]any{"order_id": "o-1"}}, nil
	})).Invoke(context.Background(), call); err != nil {
		t.Fatal(err)
	}
}

// TestREADMEObservability runs the snippet of docs/observability.md.
func TestREADMEObservability(t *testing.T) {
	readmeDir(t)
	m, err := manifest.LoadFile("axag.json")
	if err != nil {
		t.Fatal(err)
	}
	tp, mp := tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider()
	var audited int
	mySink := middleware.AuditFunc(func(context.Context, middleware.AuditRecord) { audited++ })

	e, err := axgate.New(m,
		axgate.WithTelemetry(middleware.TelemetryConfig{
			TracerProvider: tp,     // default: otel.GetTracerProvider(), also one set later
			MeterProvider:  mp,     // default: otel.GetMeterProvider()
			Audit:          mySink, // another audit store; middleware.MultiAudit joins several
		}),
		axgate.WithLogger(slog.Default()), // the audit log; off unless set
	)

	if err != nil {
		t.Fatal(err)
	}
	_, _ = e.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{}, nil
	})).Invoke(context.Background(), middleware.NewCall("account_delete", json.RawMessage(`{"account_id":"a-1"}`), middleware.Principal{ID: "alice"}))
	if audited != 1 {
		t.Fatalf("audit records: %d, want 1", audited)
	}
}
