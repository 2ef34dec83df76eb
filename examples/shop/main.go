// Command shop is a runnable AXAG tool server for a small shop: the actions
// of the AXAG example manifest (product search, cart, order, account
// deletion, user list) plus a refund that needs two approvals, a
// tenant-scoped invoice list, a rate-limited coupon and a delivery window
// with a relational constraint. Its state lives in memory.
//
//	go run ./examples/shop
//
// With no key flags it generates development keys, prints bearer tokens for
// a few people and curl commands that walk through every gate: first a
// refusal, then the call that gets through. See README.md.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path"
	"syscall"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// shopManifest is shop.json, built in so that the command runs from any
// directory.
//
//go:embed shop.json
var shopManifest []byte

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// config is the command line, each flag with an AXGATE_* environment
// variable as its default.
type config struct {
	addr          string
	manifest      string
	principalJWKS string
	confirmJWKS   string
	approvalJWKS  string
	signingKey    string
	issuer        string
	audience      string
	redis         string
	otlp          string
	bare          bool
	// pagesURL is the public URL of the pages for people (development
	// mode: on the shop's own address), set by run once it listens.
	pagesURL string
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("shop", flag.ContinueOnError)
	fs.SetOutput(out)
	env := func(name, def string) string {
		if v, ok := os.LookupEnv(name); ok {
			return v
		}
		return def
	}
	fs.StringVar(&c.addr, "addr", env("AXGATE_ADDR", "127.0.0.1:8080"), "listen address (AXGATE_ADDR)")
	fs.StringVar(&c.manifest, "manifest", env("AXGATE_MANIFEST", ""), "AXAG manifest file, JSON or YAML (AXGATE_MANIFEST); default: the built-in shop.json")
	fs.StringVar(&c.principalJWKS, "principal-jwks", env("AXGATE_PRINCIPAL_JWKS", ""), "public JWKS file verifying callers' bearer tokens (AXGATE_PRINCIPAL_JWKS); without it: dev keys")
	fs.StringVar(&c.confirmJWKS, "confirm-jwks", env("AXGATE_CONFIRM_JWKS", ""), "public JWKS file verifying confirmation tokens (AXGATE_CONFIRM_JWKS)")
	fs.StringVar(&c.approvalJWKS, "approval-jwks", env("AXGATE_APPROVAL_JWKS", ""), "public JWKS file verifying approval tokens (AXGATE_APPROVAL_JWKS)")
	fs.StringVar(&c.signingKey, "signing-key", env("AXGATE_SIGNING_KEY", ""), "private key file (JWK or PEM) signing the tokens /confirmations and /approvals issue (AXGATE_SIGNING_KEY); without it: an ephemeral key")
	fs.StringVar(&c.issuer, "issuer", env("AXGATE_ISSUER", "axgate-shop"), "iss of bearer, confirmation and approval tokens (AXGATE_ISSUER)")
	fs.StringVar(&c.audience, "audience", env("AXGATE_AUDIENCE", "axgate-shop"), "aud of bearer, confirmation and approval tokens (AXGATE_AUDIENCE)")
	fs.StringVar(&c.redis, "redis", env("AXGATE_REDIS_URL", ""), "Redis URL for state shared by replicas: used tokens, rate limits, idempotency, approvals (AXGATE_REDIS_URL); default: in memory")
	fs.StringVar(&c.otlp, "otlp", "", "export traces over OTLP/HTTP to this base URL, e.g. http://localhost:4318; default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT when set, else no export")
	fs.BoolVar(&c.bare, "unsafe-bare", false, "serve the same tool handlers WITHOUT axgate (no authentication, no gates): only for benchmarks")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return c, nil
}

// shop is the assembled server.
type shop struct {
	handler http.Handler
	enf     *axgate.Enforcer
	// tokens are dev bearer tokens by person, when the shop made its own
	// principal key.
	tokens map[string]string
	close  func() error
}

func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseFlags(args, out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	// Listen first: the refusals name the pages' URL, with the port.
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	base := "http://" + ln.Addr().String()
	cfg.pagesURL = base + "/"
	s, err := newShop(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.close()
	srv := newServer(s.handler)
	switch {
	case cfg.bare:
		fmt.Fprintf(out, "UNSAFE: serving the shop's tools WITHOUT axgate on %s (benchmark baseline)\n", base)
	case s.tokens != nil:
		fmt.Fprintf(out, "shop: AXAG tool server on %s with development keys (tokens die with the process)\n\n", base)
		fmt.Fprintf(out, "shop: people confirm and approve at %s/ (development sign-in: pick a person, no password)\n\n", base)
		printWalkthrough(out, base, s.tokens, map[string]string{
			"ALICE_CART": cartID(people[0].ID),
			"BOB_ID":     people[1].ID,
		})
	default:
		fmt.Fprintf(out, "shop: AXAG tool server on %s\n", base)
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// newServer is the shop's HTTP server: every phase of a request is bounded
// in time, so that slow clients cannot hold connections (and the bodies
// being read) open indefinitely.
func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// newShop builds the enforcer, the tool server and, in development mode,
// the human endpoints.
func newShop(ctx context.Context, cfg config) (*shop, error) {
	m, err := loadManifest(cfg.manifest)
	if err != nil {
		return nil, err
	}
	st := newStore()
	if cfg.bare {
		return &shop{handler: bareServer(st), close: func() error { return nil }}, nil
	}

	tokens := axgate.TokenOptions{Issuer: cfg.issuer, Audience: cfg.audience}
	if cfg.confirmJWKS != "" {
		ks, err := token.LoadJWKSFile(cfg.confirmJWKS)
		if err != nil {
			return nil, fmt.Errorf("-confirm-jwks: %w", err)
		}
		tokens.ConfirmationKeys = ks
	}
	if cfg.approvalJWKS != "" {
		ks, err := token.LoadJWKSFile(cfg.approvalJWKS)
		if err != nil {
			return nil, fmt.Errorf("-approval-jwks: %w", err)
		}
		tokens.ApprovalKeys = ks
	}
	opts := append(st.conditions(), axgate.WithTokens(tokens))
	if cfg.principalJWKS == "" && cfg.pagesURL != "" {
		// Development mode: refusals name each call's page on the
		// shop's own address (the pages are mounted below).
		opts = append(opts, axgate.WithDecisionPages(cfg.pagesURL))
	}
	if cfg.signingKey != "" {
		signer, err := token.LoadSigningKeyFile(cfg.signingKey, "")
		if err != nil {
			return nil, fmt.Errorf("-signing-key: %w", err)
		}
		opts = append(opts, axgate.WithSigningKey(signer))
	} else {
		// Without a configured key the shop signs confirmations and
		// approvals with a key of its own; its public half verifies them
		// alongside any JWKS given above.
		signer, err := token.GenerateDevKey("shop-dev-tokens")
		if err != nil {
			return nil, err
		}
		opts = append(opts, axgate.WithSigningKey(signer))
	}
	tp, err := tracerProvider(ctx, cfg.otlp)
	if err != nil {
		return nil, err
	}
	closeTracing := func() error { return nil }
	if tp != nil {
		opts = append(opts, axgate.WithTelemetry(middleware.TelemetryConfig{TracerProvider: tp}))
		closeTracing = func() error {
			// Flush the spans still batched before the process ends.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return tp.Shutdown(ctx)
		}
	}
	closeStores := closeTracing
	if cfg.redis != "" {
		stores, err := redisstore.Open(ctx, cfg.redis, redisstore.Options{})
		if err != nil {
			closeTracing()
			return nil, err
		}
		closeStores = func() error { return errors.Join(stores.Close(), closeTracing()) }
		opts = append(opts,
			axgate.WithReplayStore(stores.Replay), axgate.WithLimiter(stores.Limiter),
			axgate.WithIdempotency(gates.IdempotencyOptions{Store: stores.Idempotency}), axgate.WithApprovalStore(stores.Approvals))
	}
	enf, err := axgate.New(m, opts...)
	if err != nil {
		closeStores()
		return nil, err
	}
	s := &shop{enf: enf, close: func() error { return errors.Join(enf.Close(), closeStores()) }}

	var keyfunc jwt.Keyfunc
	if cfg.principalJWKS != "" {
		ks, err := token.LoadJWKSFile(cfg.principalJWKS)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("-principal-jwks: %w", err)
		}
		keyfunc = token.Keyfunc(ks)
	} else {
		signer, err := token.GenerateDevKey("shop-dev-principals")
		if err != nil {
			s.close()
			return nil, err
		}
		ks, err := token.NewKeySet(signer.PublicKey())
		if err != nil {
			s.close()
			return nil, err
		}
		keyfunc = token.Keyfunc(ks)
		if s.tokens, err = devTokens(signer, cfg.issuer, cfg.audience, peopleAudience(cfg.audience)); err != nil {
			s.close()
			return nil, err
		}
	}
	auth, err := httpgate.JWTBearer(httpgate.BearerConfig{Keyfunc: keyfunc, Issuer: cfg.issuer, Audience: cfg.audience})
	if err != nil {
		s.close()
		return nil, err
	}
	toolOpts := []httpgate.Option{httpgate.WithPrincipal(auth)}
	if tp != nil {
		// Continue the caller's W3C traceparent, so that each call's span
		// joins the agent's trace.
		toolOpts = append(toolOpts, httpgate.WithPropagator(propagation.TraceContext{}))
	}
	tools, err := httpgate.NewToolServer(enf, st.tools(), toolOpts...)
	if err != nil {
		s.close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/tools", tools)
	mux.Handle("/tools/", tools)
	if s.tokens != nil {
		// Development mode only (the shop made its own principal key and
		// printed the walkthrough's tokens): the human endpoints share the
		// agents' port so that the walkthrough needs nothing but curl. They
		// mint confirmation and approval tokens, so they take the people's
		// tokens only (peopleAudience): Alice's agent, holding her bearer
		// token, cannot confirm its own call. With a real identity
		// provider (-principal-jwks) they are not served here: the host
		// mounts httpgate.NewHumanHandler on its UI backend, authenticated
		// by the person's session, where no agent can reach it.
		bearers, err := httpgate.HumanBearer(httpgate.BearerConfig{Keyfunc: keyfunc, Issuer: cfg.issuer, Audience: peopleAudience(cfg.audience)}, cfg.audience)
		if err != nil {
			s.close()
			return nil, err
		}
		// The pages for people, with the development sign-in: anyone who
		// reaches the shop picks a person (never do this beyond a
		// developer's machine; a real deployment signs people in with
		// httpgate.WithOIDCSignIn).
		var devPeople []middleware.Principal
		for _, p := range people {
			devPeople = append(devPeople, middleware.Principal{ID: p.ID, Tenant: p.Tenant, Roles: p.Roles, Claims: map[string]any{"name": p.Name}})
		}
		human := httpgate.NewHumanHandler(enf, bearers, httpgate.DevSignIn(devPeople...))
		mux.Handle("/confirmations", human)
		mux.Handle("/approvals", human)
		mux.Handle("/approvals/", human)
		for _, p := range []string{"GET /{$}", "/requests/", "/signin", "/callback", "/signout"} {
			mux.Handle(p, human)
		}
	}
	s.handler = mux
	return s, nil
}

// tracerProvider returns a provider that batches the shop's spans to an
// OTLP/HTTP collector: at base (the same form as OTEL_EXPORTER_OTLP_ENDPOINT:
// /v1/traces is appended), or where the standard OTEL_EXPORTER_OTLP_*
// variables say when base is empty. With neither it returns nil: no export.
// The service name is axgate-shop unless OTEL_SERVICE_NAME says otherwise.
func tracerProvider(ctx context.Context, base string) (*sdktrace.TracerProvider, error) {
	var opts []otlptracehttp.Option
	switch {
	case base != "":
		u, err := url.Parse(base)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("-otlp %q: want a base URL such as http://localhost:4318", base)
		}
		opts = append(opts, otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(path.Join("/", u.Path, "v1/traces")))
		if u.Scheme == "http" {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
	case os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "":
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.NewSchemaless(semconv.ServiceName("axgate-shop")), resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("OTLP resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

func loadManifest(path string) (*manifest.Manifest, error) {
	if path == "" {
		return manifest.Parse(shopManifest)
	}
	return manifest.LoadFile(path)
}

// devTokens signs a bearer token for each person, and one for Alice whose
// scope grants reading only (an agent she allowed to look, not to buy).
// peopleAudience is the audience of the people's dev tokens, which the
// human endpoints take (and the agents' audience, which they refuse).
func peopleAudience(agents string) string { return agents + "-people" }

func devTokens(signer *token.Signer, issuer, audience, peopleAud string) (map[string]string, error) {
	now := time.Now()
	claims := func(p person, scope string) jwt.MapClaims {
		c := jwt.MapClaims{
			"iss": issuer, "aud": audience, "sub": p.ID,
			"iat": now.Unix(), "exp": now.Add(24 * time.Hour).Unix(),
			"tenant": p.Tenant, "roles": p.Roles, "name": p.Name,
		}
		if scope != "" {
			c["scope"] = scope
		}
		return c
	}
	out := map[string]string{}
	for _, p := range people {
		tok, err := signer.Sign("JWT", claims(p, ""))
		if err != nil {
			return nil, err
		}
		out[p.Name] = tok
		// The same person at the human endpoints: a token of the people's
		// audience.
		c := claims(p, "")
		c["aud"] = peopleAud
		if out[p.Name+"_person"], err = signer.Sign("JWT", c); err != nil {
			return nil, err
		}
	}
	tok, err := signer.Sign("JWT", claims(people[0], "read"))
	if err != nil {
		return nil, err
	}
	out["alice_readonly"] = tok
	return out, nil
}

// bareServer serves POST /tools/{name}/call with the same handlers and no
// axgate at all: no authentication, no checks. It exists only as the
// baseline of bench/http.
func bareServer(st *store) http.Handler {
	tools := st.tools()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tools/{name}/call", func(w http.ResponseWriter, r *http.Request) {
		t := tools[r.PathValue("name")]
		if t == nil {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpgate.DefaultMaxBodyBytes))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		call := middleware.NewCall(r.PathValue("name"), body, middleware.Principal{ID: people[0].ID, Tenant: people[0].Tenant, Roles: people[0].Roles})
		res, err := t.Invoke(r.Context(), call)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		// The same headers and JSON (no HTML escaping) as httpgate's answer.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(map[string]any{"result": res.Value}); err != nil {
			slog.Error("bare: write", "error", err)
		}
	})
	return mux
}
