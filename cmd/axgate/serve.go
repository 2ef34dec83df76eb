package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/wire"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

const serveAbout = `
Runs a gateway that enforces a manifest in front of an existing HTTP tool
server. The gateway serves the tool server routes itself —

  GET  /tools, GET /tools/{name}   the manifest's tools (input schemas as enforced)
  POST /tools/{name}/validate      the Tool Validation API (never reaches the upstream)
  POST /tools/{name}/call          the whole axgate chain; a call it allows is
                                   forwarded to UPSTREAM/tools/{name}/call and the
                                   upstream's {"result": …} is checked and returned
  GET  /healthz                    {"status":"ok", …}

— and answers every refusal with the AXAG error envelope, without calling the
upstream. Callers authenticate with "Authorization: Bearer JWT" (verified with
--jwks or --jwks-url, --issuer, --audience; claims sub, tenant, roles, scope);
confirmation and approval tokens travel in X-AXAG-Confirmation and
X-AXAG-Approval and are verified with the same keys (and --signing-key's).

The forwarded request carries as its body the arguments the chain checked,
re-encoded canonically (RFC 8785), never the bytes the caller sent; the caller's
Idempotency-Key, the trace context, and X-Axgate-Principal / X-Axgate-Tenant
naming who called: the upstream must be reachable through the gateway only.

SIGHUP reloads the manifest (and a --jwks file, and the TLS files): a manifest that fails to load
keeps the one in use, and the log says why. A reload keeps the state: used
tokens, pending approvals, rate-limit counts and idempotency records. Without
--redis that state lives in this process and is lost when it stops; so that
a confirmation or approval token spent before a restart cannot run again
after it, every token issued before the process started is then refused
(reason issued_before_start): a restart voids the outstanding tokens. With
--redis (give Redis persistence), spent tokens stay spent across restarts
and outstanding ones stay valid.

--human ADDR serves the pages for people (docs/human-pages.md): they sign in
with the OpenID Connect provider of --oidc-issuer (--oidc-client-id,
--oidc-client-secret-file; the redirect URI is --human-url plus "callback"),
see the calls waiting for them and confirm, approve or deny each. A call
refused for a missing confirmation or approval then names its page
(details.decision_url, under --human-url), and the same call repeated after
the person decided runs, once, without a token. The webhooks' links lead
there too. Without --human, people confirm and approve on the host's UI
(httpgate.NewHumanHandler) or with tokens signed elsewhere.

SIGINT or SIGTERM stop the server gracefully: no new connections, calls in
flight finish (up to --shutdown-timeout). Request headers are bounded: at
most 64 KiB (431 beyond), and they must arrive within 10 s.

A redirect from the upstream is not followed (it would carry the arguments
and the caller's identity elsewhere): the call fails with AXGATE_TOOL_FAILED.

Every flag can come from a YAML file (--config; its keys are the flag names)
or an AXGATE_* variable (AXGATE_TLS_CERT for --tls-cert); a flag given here
wins over the file, the file over the variable. "axgate config check FILE"
checks a file. The file's enforce: section puts actions in shadow mode (their
refusals logged, audited as shadow_deny, and the call forwarded), its notify:
section sends each new approval request to signed webhooks. The admin server (--admin) serves /metrics, /healthz, /readyz;
OTLP export follows the standard OTEL_* variables; the audit log is one JSON
line per decision (--audit).`

// serveConfig is what the flags of serve say.
type serveConfig struct {
	enforcerConfig
	manifest, upstream, listen       string
	shutdownTimeout, upstreamTimeout time.Duration
	pages                            pagesFlags
	// humanBase is the pages' public URL when --human serves them.
	humanBase string
	// enforcerOptions are added to every generation's options (telemetry,
	// the audit sink, shadow mode, webhooks): the operations flags' and
	// the configuration sections' share. An error fails the load.
	enforcerOptions func(*manifest.Manifest) ([]axgate.Option, error)
}

// conditionFlags collects repeated NAME=CEL flags.
type conditionFlags []string

func (c *conditionFlags) String() string { return strings.Join(*c, "; ") }

func (c *conditionFlags) Set(v string) error {
	name, expr, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(name) == "" || strings.TrimSpace(expr) == "" {
		return errors.New(`want NAME=CEL, e.g. "cart is not empty=args.quantity > 0"`)
	}
	*c = append(*c, v)
	return nil
}

// serveFlags returns the flag set of serve and the values it fills in.
func serveFlags(e *env) (*flag.FlagSet, *serveConfig, *opsFlags) {
	fs := newFlags(e, "serve", "serve --manifest M --upstream URL (--jwks FILE | --jwks-url URL | --anonymous) [flags]", serveAbout)
	var c serveConfig
	fs.StringVar(&c.manifest, "manifest", "", "the manifest to enforce (JSON or YAML)")
	fs.StringVar(&c.upstream, "upstream", "", "base URL of the tool server to forward allowed calls to, e.g. http://127.0.0.1:9000")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "address to listen on (port 0 picks a free one; the log says which)")
	c.register(fs, token.DefaultAudience, "required aud of every token")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long calls in flight may finish on shutdown")
	fs.DurationVar(&c.upstreamTimeout, "upstream-timeout", 30*time.Second, "how long a forwarded call may take")
	c.pages.register(fs, true)
	ops := addOpsFlags(fs)
	return fs, &c, ops
}

func runServe(ctx context.Context, e *env, args []string) int {
	fs, cp, ops := serveFlags(e)
	pos, conf, status, ok := parseConfigured(e, fs, args)
	if !ok {
		return status
	}
	c := *cp
	switch {
	case len(pos) > 0:
		return usageError(e, fs, "unexpected argument %q", pos[0])
	case c.manifest == "":
		return usageError(e, fs, "--manifest is required")
	case c.upstream == "":
		return usageError(e, fs, "--upstream is required")
	case c.checkKeys(true) != "":
		return usageError(e, fs, "%s", c.checkKeys(true))
	case c.pages.check(c.pages.human) != "":
		return usageError(e, fs, "%s", c.pages.check(c.pages.human))
	case c.pages.human != "" && c.pages.oidcIssuer == "":
		return usageError(e, fs, "--human needs --oidc-issuer and --oidc-client-id: the people who confirm and approve sign in with your OpenID Connect provider")
	}
	up, err := url.Parse(c.upstream)
	if err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" {
		return usageError(e, fs, "--upstream must be an http or https URL, not %q", redactURL(c.upstream))
	}
	if err := c.checkFiles(c.manifest); err != nil {
		return fileError(e, "serve", err)
	}

	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	rt, err := startOps(ctx, e, ops, conf, log)
	if err != nil {
		return failf(e, "serve", "%v", err)
	}
	defer rt.close()
	c.enforcerOptions = rt.enforcerOptions
	var humanLn net.Listener
	if c.pages.human != "" {
		if humanLn, err = net.Listen("tcp", c.pages.human); err != nil {
			return failf(e, "serve", "--human: %v", err)
		}
		defer humanLn.Close()
		c.humanBase = c.pages.baseURL(rt.scheme(), humanLn.Addr().String())
		rt.humanBase = c.humanBase
	}
	gw, err := newGateway(ctx, c, up, log)
	if err != nil {
		return failf(e, "serve", "%s", startError(err))
	}
	defer gw.close()
	if err := rt.serveAdmin(gw.ready); err != nil {
		return failf(e, "serve", "%v", err)
	}

	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return failf(e, "serve", "%v", err)
	}
	srv := newServer(gw, c, log)
	served := make(chan error, 2)
	go func() { served <- rt.serve(srv, ln) }()
	gw.shared.logNotes("serve")
	log.Info("axgate serve: listening", "addr", rt.scheme()+"://"+ln.Addr().String(), "manifest", c.manifest,
		"tools", gw.current().toolCount, "upstream", redactURL(c.upstream))
	var humanSrv *http.Server
	if humanLn != nil {
		humanSrv = newServer(http.HandlerFunc(gw.serveHuman), c, log)
		go func() { served <- fmt.Errorf("--human: %w", rt.serve(humanSrv, humanLn)) }()
		log.Info("axgate serve: people sign in, confirm and approve at", "url", c.humanBase, "oidc_issuer", redactURL(c.pages.oidcIssuer))
	}

	signals := e.signals
	if signals == nil {
		signals = notify
	}
	hup, stopHUP := signals(syscall.SIGHUP)
	defer stopHUP()
	for {
		select {
		case <-hup:
			gw.reload(ctx)
			rt.reload()
		case err := <-served:
			return failf(e, "serve", "%v", err)
		case <-ctx.Done():
			log.Info("axgate serve: shutting down", "timeout", c.shutdownTimeout)
			sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
			defer cancel()
			if humanSrv != nil {
				_ = humanSrv.Shutdown(sctx)
			}
			if err := srv.Shutdown(sctx); err != nil {
				return failf(e, "serve", "shutdown: %v", err)
			}
			log.Info("axgate serve: stopped")
			return exitOK
		}
	}
}

// Server timeouts. A slow client must not hold a connection (and a call's
// goroutine) forever: the headers must arrive within
// serverReadHeaderTimeout (ample for any client that is not trickling them
// byte by byte), the body within serverReadTimeout, and the answer may take
// as long as the upstream may, plus writeSlack to relay it.
const (
	serverReadHeaderTimeout = 10 * time.Second
	serverReadTimeout       = 30 * time.Second
	serverIdleTimeout       = 2 * time.Minute
	writeSlack              = 5 * time.Second
)

// serverMaxHeaderBytes bounds a request's headers (net/http answers 431
// beyond it). The default, 1 MiB, let 500 connections with a 1 MB header
// take the process to 1.2 GB; a bearer token, a confirmation, a few approval
// tokens and a trace context fit in a few KiB.
const serverMaxHeaderBytes = 64 << 10

// newServer returns the HTTP server of the gateway, with every timeout set.
func newServer(h http.Handler, c serveConfig, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: serverReadHeaderTimeout,
		MaxHeaderBytes:    serverMaxHeaderBytes,
		ReadTimeout:       serverReadTimeout,
		// WriteTimeout runs from the end of the request headers, so it
		// covers reading the body too: at least the read timeout, plus the
		// upstream's time, plus the time to write the answer.
		WriteTimeout: serverReadTimeout + c.upstreamTimeout + writeSlack,
		IdleTimeout:  serverIdleTimeout,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// notify delivers the process's signals.
func notify(sig ...os.Signal) (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sig...)
	return ch, func() { signal.Stop(ch) }
}

// gateway serves the enforced tool routes of the manifest loaded last, and
// /healthz. A reload swaps the whole handler at once, so that a request sees
// one manifest from start to end.
type gateway struct {
	cfg      serveConfig
	upstream *upstream
	log      *slog.Logger
	// What lives as long as the gateway and is handed to every
	// generation, so that a reload forgets nothing (enforcer.go).
	shared    *enforcerState
	mu        sync.Mutex // serializes reloads
	loaded    atomic.Pointer[loadedManifest]
	startedAt time.Time
}

// loadedManifest is one generation of the gateway.
type loadedManifest struct {
	enf       *axgate.Enforcer
	handler   http.Handler
	human     http.Handler // the pages for people (--human), nil without
	toolCount int
	loadedAt  time.Time
}

func newGateway(ctx context.Context, c serveConfig, up *url.URL, log *slog.Logger) (*gateway, error) {
	g := &gateway{
		cfg:       c,
		upstream:  newUpstream(up, c.upstreamTimeout),
		log:       log,
		startedAt: time.Now(),
	}
	shared, err := openEnforcerState(ctx, c.enforcerConfig, "serve", false, log)
	if err != nil {
		return nil, err
	}
	g.shared = shared
	l, err := g.load()
	if err != nil {
		g.close()
		return nil, err
	}
	g.loaded.Store(l)
	return g, nil
}

// load builds one generation from the manifest and key files as they are
// now.
func (g *gateway) load() (*loadedManifest, error) {
	c := g.cfg
	m, err := manifest.LoadFile(c.manifest)
	if err != nil {
		return nil, err
	}
	keys, err := g.shared.keys()
	if err != nil {
		return nil, err
	}
	opts, err := g.shared.options(keys)
	if err != nil {
		return nil, err
	}
	if c.enforcerOptions != nil {
		more, err := c.enforcerOptions(m)
		if err != nil {
			return nil, err
		}
		opts = append(opts, more...)
	}
	if c.humanBase != "" {
		opts = append(opts, axgate.WithDecisionPages(c.humanBase))
	}
	enf, err := axgate.New(m, opts...)
	if err != nil {
		return nil, err
	}
	hopts := []httpgate.Option{httpgate.WithLogger(g.log), httpgate.WithPropagator(w3cPropagator)}
	if c.anonymous {
		hopts = append(hopts, httpgate.WithPrincipal(httpgate.Anonymous))
	} else {
		pf, err := httpgate.JWTBearer(httpgate.BearerConfig{Keyfunc: token.Keyfunc(keys), Issuer: c.issuer, Audience: c.audience})
		if err != nil {
			enf.Close()
			return nil, err
		}
		hopts = append(hopts, httpgate.WithPrincipal(pf))
	}
	handlers := make(map[string]middleware.Invoker, len(m.Actions))
	for _, a := range m.Actions {
		handlers[a.ToolName()] = g.upstream.tool(a.ToolName())
	}
	ts, err := httpgate.NewToolServer(enf, handlers, hopts...)
	if err != nil {
		enf.Close()
		return nil, err
	}
	l := &loadedManifest{enf: enf, handler: ts, toolCount: len(m.Actions), loadedAt: time.Now()}
	if c.humanBase != "" {
		popts, err := c.pages.options(c.humanBase, c.signingKey)
		if err != nil {
			enf.Close()
			return nil, err
		}
		// No HumanPrincipalFunc: serve takes no people's bearer tokens,
		// so the JSON endpoints beside the pages refuse (401); people
		// sign in to the pages.
		l.human = mount(httpgate.NewHumanHandler(enf, nil, append(popts, httpgate.WithLogger(g.log))...), c.humanBase)
	}
	return l, nil
}

// reload loads the manifest again; on failure the running one stays.
func (g *gateway) reload(context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l, err := g.load()
	if err != nil {
		g.log.Error("axgate serve: reload failed; keeping the manifest in use", "manifest", g.cfg.manifest, "err", err)
		return
	}
	old := g.loaded.Swap(l)
	// Close stops the old generation's background work; calls still in its
	// chain finish with what they hold.
	old.enf.Close()
	g.log.Info("axgate serve: manifest reloaded", "manifest", g.cfg.manifest, "tools", l.toolCount)
}

func (g *gateway) current() *loadedManifest { return g.loaded.Load() }

func (g *gateway) close() {
	if l := g.loaded.Load(); l != nil {
		l.enf.Close()
	}
	if g.shared != nil {
		g.shared.close()
	}
}

// serveHuman serves the current generation's pages for people. A reload
// builds them anew: people signed in before it sign in again.
func (g *gateway) serveHuman(w http.ResponseWriter, r *http.Request) {
	g.current().human.ServeHTTP(w, r)
}

// ServeHTTP serves /healthz and the current generation's tool routes.
func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l := g.current()
	if r.URL.Path == "/healthz" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"status": "ok", "tools": l.toolCount,
			"manifest_loaded_at": l.loadedAt.UTC().Format(time.RFC3339),
			"started_at":         g.startedAt.UTC().Format(time.RFC3339),
		})
		return
	}
	l.handler.ServeHTTP(w, r)
}

// maxUpstreamBytes bounds the upstream's answer.
const maxUpstreamBytes = 16 << 20

// upstream forwards allowed calls to the tool server behind the gateway.
type upstream struct {
	base       *url.URL
	client     *http.Client
	propagator propagation.TextMapPropagator
}

// maxIdleUpstreamConns bounds the idle connections kept to the upstream.
// http.DefaultTransport keeps 2, so that with more agents than that most
// calls opened a new connection (a dial, a handshake and a socket in
// TIME_WAIT per call: a fifth of serve's CPU with eight agents).
const maxIdleUpstreamConns = 256

// newUpstream returns the forwarder to base; a call may take up to timeout.
func newUpstream(base *url.URL, timeout time.Duration) *upstream {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = maxIdleUpstreamConns, maxIdleUpstreamConns
	return &upstream{
		base: base,
		client: &http.Client{
			Transport: t,
			Timeout:   timeout,
			// Never follow a redirect: it would send the arguments and the
			// caller's identity (X-Axgate-Principal, X-Axgate-Tenant)
			// wherever the Location says. The 3xx itself is the answer, and
			// a failure.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		propagator: w3cPropagator,
	}
}

// w3cPropagator reads the caller's W3C trace context and baggage
// (traceparent, tracestate, baggage) and forwards them upstream. It is set
// here rather than taken from otel.GetTextMapPropagator(), which is a no-op
// until a program installs one: serve would forward nothing.
var w3cPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// tool returns the invoker that forwards calls of one tool.
func (u *upstream) tool(name string) middleware.Invoker {
	target := u.base.JoinPath("tools", name, "call").String()
	return middleware.InvokerFunc(func(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
		// The canonical encoding of the value the chain checked, shared
		// with the digest tokens bind: the upstream's parser cannot read
		// the caller's bytes otherwise than the gates did (a repeated key
		// under another case, a number spelled to round differently).
		body, err := call.CanonicalArguments()
		if err != nil {
			return middleware.Result{}, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			return middleware.Result{}, err
		}
		setUpstreamHeaders(req.Header, call)
		u.propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
		resp, err := u.client.Do(req)
		if err != nil {
			return middleware.Result{}, fmt.Errorf("upstream %s: %w", target, err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBytes+1))
		if err != nil {
			return middleware.Result{}, fmt.Errorf("upstream %s: reading the answer: %w", target, err)
		}
		if len(data) > maxUpstreamBytes {
			return middleware.Result{}, fmt.Errorf("upstream %s: answer larger than %d bytes", target, maxUpstreamBytes)
		}
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			// Not relayed as an envelope either: a redirect is not the
			// tool's answer.
			return middleware.Result{}, axerr.Newf(axerr.CodeToolFailed, "the tool server answered %d %s, a redirect the gateway does not follow", resp.StatusCode, http.StatusText(resp.StatusCode)).
				With("upstream_status", resp.StatusCode).With("tool", name)
		}
		if resp.StatusCode != http.StatusOK {
			return middleware.Result{}, upstreamError(name, resp.StatusCode, data)
		}
		result, ok := resultOf(data)
		if !ok {
			return middleware.Result{}, fmt.Errorf("upstream %s: answer is not {\"result\": …}", target)
		}
		if passThrough(call.Action, result) {
			return middleware.Result{Value: result}, nil
		}
		var v any
		if err := json.Unmarshal(result, &v); err != nil {
			return middleware.Result{}, fmt.Errorf("upstream %s: %w", target, err)
		}
		return middleware.Result{Value: v}, nil
	})
}

// resultOf returns the value of the member "result" of the upstream's
// answer, as json.Unmarshal into a struct with that one field reads it, or
// false when the answer is not a JSON object with that member.
func resultOf(data []byte) (json.RawMessage, bool) {
	if v, ok := soleResult(data); ok {
		return v, true
	}
	var ok struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &ok); err != nil || ok.Result == nil {
		return nil, false
	}
	return ok.Result, true
}

// soleResult reads the usual answer, {"result": V} with that one member
// spelled so, in one scan of V (json.Unmarshal scans the whole answer
// twice). It returns false for every other answer, which resultOf then
// leaves to json.Unmarshal: the answer is {"result": V}, V one valid JSON
// value, exactly when this accepts it, and json.Unmarshal reads V from it
// too.
func soleResult(data []byte) (json.RawMessage, bool) {
	rest, ok := bytes.CutPrefix(trimJSONSpace(data), []byte("{"))
	if !ok {
		return nil, false
	}
	if rest, ok = bytes.CutPrefix(trimJSONSpace(rest), []byte(`"result"`)); !ok {
		return nil, false
	}
	if rest, ok = bytes.CutPrefix(trimJSONSpace(rest), []byte(":")); !ok {
		return nil, false
	}
	v, ok := bytes.CutSuffix(rest, []byte("}"))
	if v = trimJSONSpace(v); !ok || !json.Valid(v) {
		return nil, false
	}
	// json.Valid(v) allows v encoding/json's nesting limit, which the
	// answer's object exceeds by one: json.Unmarshal refuses the answer of
	// a v nested that deep. Only a v of 2×maxJSONNesting bytes or more can
	// be; the whole answer is checked then.
	if len(v) >= 2*maxJSONNesting && !json.Valid(data) {
		return nil, false
	}
	return v, true
}

// maxJSONNesting is encoding/json's limit on nesting (its scanner's
// maxNestingDepth): json.Valid and json.Unmarshal refuse deeper JSON.
const maxJSONNesting = 10000

// trimJSONSpace trims the whitespace JSON allows around a value (not
// bytes.TrimSpace's, which would accept more than a JSON parser does).
func trimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// passThrough reports whether the upstream's result can go to the client
// as the JSON it is (compacted when written), without being decoded into Go
// values and encoded again: when the action declares no postcondition and
// no output_schema, no gate reads the result, so there is nothing the
// client could read otherwise than a check did. The result is one JSON
// value already (resultOf accepted the whole answer as one JSON object,
// trailing data included, within maxUpstreamBytes) and its encoding is checked again when
// it is written. Invalid UTF-8, which the decoder would have replaced with
// U+FFFD, takes the decoding path: the client never receives bytes that are
// not UTF-8. An action resolved to nothing (which the chain refuses before
// the tool) decodes too.
func passThrough(a *manifest.Action, result json.RawMessage) bool {
	return a != nil && len(a.Postconditions) == 0 && a.CompiledOutputSchema() == nil && utf8.Valid(result) && numbersDecode(result)
}

// numbersDecode reports whether every number of v (valid JSON) is one a
// float64 holds, as json.Unmarshal into an any requires: a result with a
// number beyond that range (1e400) takes the decoding path, which refuses
// it, as serve always has. Only a number with an exponent, or of 309
// characters or more, can be beyond it; only those are parsed.
func numbersDecode(v []byte) bool {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"': // v is valid: the string ends
			for i++; v[i] != '"'; i++ {
				if v[i] == '\\' {
					i++
				}
			}
		case c == '-' || ('0' <= c && c <= '9'):
			j, exp := i, false
			for ; j < len(v) && strings.IndexByte("+-.0123456789eE", v[j]) >= 0; j++ {
				exp = exp || v[j] == 'e' || v[j] == 'E'
			}
			if exp || j-i >= 309 {
				if _, err := strconv.ParseFloat(string(v[i:j]), 64); err != nil {
					return false
				}
			}
			i = j - 1
		}
	}
	return true
}

// idempotencyKeyHeader is wire.HeaderIdempotencyKey as http.Header keys
// it, so that it can be set without canonicalizing it on every call.
var idempotencyKeyHeader = http.CanonicalHeaderKey(wire.HeaderIdempotencyKey)

// setUpstreamHeaders sets the headers of a forwarded call on h: its body's
// type, the caller's Idempotency-Key and who called. The values share one
// slice (each key's a capped slice of it, which an append elsewhere copies
// rather than overwrites) and the keys are canonical already, as
// http.Header.Set would make them: one allocation instead of one per
// header.
func setUpstreamHeaders(h http.Header, call *middleware.Call) {
	vals := [...]string{"application/json", call.Credentials.IdempotencyKey, call.Principal.ID, call.Principal.Tenant}
	all := vals[:]
	h["Content-Type"], h["Accept"] = all[0:1:1], all[0:1:1]
	if all[1] != "" {
		h[idempotencyKeyHeader] = all[1:2:2]
	}
	if all[2] != "" {
		h["X-Axgate-Principal"] = all[2:3:3]
	}
	if all[3] != "" {
		h["X-Axgate-Tenant"] = all[3:4:4]
	}
}

// upstreamError relays a refusal the upstream wrote as an AXAG envelope with
// a code axgate knows; anything else becomes AXGATE_TOOL_FAILED with the
// upstream's status in the details (never its body: it may hold internals).
func upstreamError(tool string, status int, body []byte) error {
	var env struct {
		Error struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error.Code != "" {
		for _, c := range axerr.Codes() {
			if string(c) == env.Error.Code && c != axerr.CodeInternal {
				e := axerr.New(c, env.Error.Message).With("upstream_status", status)
				for k, v := range env.Error.Details {
					if _, taken := e.Details[k]; !taken {
						e = e.With(k, v)
					}
				}
				return e
			}
		}
	}
	return axerr.Newf(axerr.CodeToolFailed, "the tool server answered %d %s", status, http.StatusText(status)).
		With("upstream_status", status).With("tool", tool)
}
