package httpgate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	igate "github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/internal/wire"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// NewMiddleware returns net/http middleware gating bound routes by the chain.
//
// The routes are the ServeMux patterns bound with WithRoute, and with
// WithIntentHeaderOn the intent-dispatch endpoints; the chain is the
// enforcer's whole chain. A mistake in the bindings is an error here, at
// start-up, not on the first request: an invalid pattern, two patterns that
// conflict, a route naming a tool the manifest does not declare, or a route
// with a path value that is neither a parameter of its action nor a user or
// tenant argument name (Enforcer.IdentityArgs). MustMiddleware panics
// instead.
//
// A gated request's caller is authenticated (WithPrincipal), its arguments
// are the JSON body merged with the path values and query parameters named
// like the action's parameters or a user or tenant argument, and its
// credentials come from the X-AXAG-* and Idempotency-Key headers. The
// handler runs only if the chain lets the call through, and then reads as
// its body the RFC 8785 encoding of the checked arguments from the body;
// the principal is PrincipalFrom's. A refusal is written with WriteError.
// A response with status 500 or more counts as a failed call. The request
// path, body and response rules are docs/http.md's.
func NewMiddleware(enf *axgate.Enforcer, opts ...Option) (func(http.Handler) http.Handler, error) {
	if enf == nil {
		return nil, errors.New("httpgate: nil enforcer")
	}
	cfg := newConfig(opts)
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, err
	}
	m := enf.Manifest()
	ident := identityParams(enf.IdentityArgs())
	bound := http.NewServeMux()
	byPattern := make(map[string]boundRoute, len(cfg.routes))
	var errs []error
	for _, rt := range cfg.routes {
		a := lookup(m, rt.tool)
		if a == nil {
			errs = append(errs, fmt.Errorf("httpgate: route %q names %q, which the manifest does not declare", rt.pattern, rt.tool))
			continue
		}
		if err := register(bound, rt.pattern); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := checkWildcards(rt, a, ident); err != nil {
			errs = append(errs, err)
			continue
		}
		byPattern[rt.pattern] = boundRoute{action: a, wildcards: strings.Contains(rt.pattern, "{")}
	}
	for _, pattern := range cfg.dispatch {
		// Registered in the same mux as the routes, so that a dispatch
		// pattern conflicting with a route fails at start-up.
		if err := register(bound, pattern); err != nil {
			errs = append(errs, err)
			continue
		}
		byPattern[pattern] = boundRoute{dispatch: true, wildcards: strings.Contains(pattern, "{")}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		g := &gate{cfg: cfg, m: m, ident: ident, bound: bound, byPattern: byPattern, next: next}
		g.chain = enf.Wrap(middleware.InvokerFunc(g.invokeHandler))
		return g
	}, nil
}

// MustMiddleware is NewMiddleware that panics on a configuration mistake.
//
// It is for package-level wiring (var api = httpgate.MustMiddleware(…)),
// where a bad binding should stop the program at start-up as
// ServeMux.Handle does; anywhere else, NewMiddleware returns the error.
func MustMiddleware(enf *axgate.Enforcer, opts ...Option) func(http.Handler) http.Handler {
	mw, err := NewMiddleware(enf, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}

// register adds pattern to mux, turning ServeMux's panic on a bad or
// conflicting pattern into an error.
func register(mux *http.ServeMux, pattern string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("httpgate: route %q: %v", pattern, p)
		}
	}()
	mux.Handle(pattern, matched{}) // only its pattern and path values are used
	return nil
}

// checkWildcards refuses a route with a path value ({name}) that is neither
// a declared parameter of its action nor a user or tenant argument name: the
// gates would never see it, and the handler would act on a value nobody
// checked ({tenant} when the enforcer knows the tenant as tenant_id). The
// pattern is valid here (register accepted it).
func checkWildcards(rt route, a *manifest.Action, ident []*manifest.Parameter) error {
	var bad []string
	for _, name := range wildcardNames(rt.pattern) {
		if a.Param(name) != nil || slices.ContainsFunc(ident, func(p *manifest.Parameter) bool { return p.Name == name }) {
			continue
		}
		bad = append(bad, "{"+name+"}")
	}
	if bad == nil {
		return nil
	}
	return fmt.Errorf("httpgate: route %q: path value %s: no gate would check it (not a parameter of %q nor a user or tenant argument)",
		rt.pattern, strings.Join(bad, ", "), a.ToolName())
}

// wildcardNames returns the names of a valid ServeMux pattern's wildcards
// ("{id}", "{rest...}"; not "{$}").
func wildcardNames(pattern string) []string {
	var out []string
	for {
		i := strings.IndexByte(pattern, '{')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(pattern[i:], '}')
		if j < 0 {
			return out
		}
		name := strings.TrimSuffix(pattern[i+1:i+j], "...")
		if name != "$" {
			out = append(out, name)
		}
		pattern = pattern[i+j+1:]
	}
}

// matched is the handler of every bound pattern: matching a request sets its
// path values, and there is nothing else to do. It is a comparable type so
// that resolve can tell it from the redirect ServeMux.Handler returns for a
// path that is not in canonical form.
type matched struct{}

func (matched) ServeHTTP(http.ResponseWriter, *http.Request) {}

// boundRoute is the tool of a bound pattern, or an intent-dispatch pattern.
type boundRoute struct {
	action *manifest.Action
	// dispatch: a pattern of WithIntentHeaderOn, whose tool is the one the
	// intent header names (action is nil).
	dispatch bool
	// wildcards: the pattern has path values ({name}), which the request
	// only carries after a second match.
	wildcards bool
}

// lookup finds an action by tool name or by intent.
func lookup(m *manifest.Manifest, name string) *manifest.Action {
	if a := m.Tool(name); a != nil {
		return a
	}
	return m.Action(name)
}

type gate struct {
	cfg       config
	m         *manifest.Manifest
	ident     []*manifest.Parameter // the user and tenant argument names
	bound     *http.ServeMux
	byPattern map[string]boundRoute
	next      http.Handler
	chain     middleware.Invoker
}

// keyIntent is the intent header's key as net/http stores it (canonical
// form), so reading it does not allocate.
var keyIntent = http.CanonicalHeaderKey(HeaderIntent)

type exchangeKey struct{}

// exchange is what the handler invoker needs of the request being served,
// passed through the chain in the context.
type exchange struct {
	principal middleware.Principal
	w         http.ResponseWriter
	r         *http.Request
	rec       *recorder // the handler's buffered response, once it ran
	stream    *streamed // or the handler's response as it went out
	// buffer: a stage after the tool needs the response; decode: as a
	// value, not only as bytes.
	buffer, decode bool
	// body is the request body as read, without surrounding blanks (empty
	// when there was none); merged: the call's arguments also hold path or
	// query values, so they are not the body alone.
	body   []byte
	merged bool
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a, wildcards, redirect, err := g.resolve(r)
	switch {
	case err != nil:
		g.cfg.writeError(r.Context(), w, err)
		return
	case redirect != nil:
		// A bound route, spelled in a form that is not canonical
		// ("/orders/./1/cancel", a missing trailing slash): answer with
		// ServeMux's redirect to the canonical path, without running the
		// chain (no token is spent on a request that only gets a redirect)
		// and without handing the odd spelling to the application, whose
		// router might read it otherwise.
		redirect.ServeHTTP(w, r)
		return
	case a == nil:
		g.next.ServeHTTP(w, r)
		return
	}
	if wildcards {
		// Match again on a copy of the request so that it carries the
		// pattern's path values, leaving the caller's request untouched.
		r = r.WithContext(r.Context())
		g.bound.ServeHTTP(noWrite{}, r)
		if r.Pattern == "" {
			// resolve saw the same request match; this cannot happen,
			// but a request without its path values is never gated.
			g.cfg.writeError(r.Context(), w, axerr.Newf(axerr.CodeIntentNotFound, "%s %s is not a tool of this server", r.Method, r.URL.Path))
			return
		}
	}
	g.serve(w, r, a)
}

// resolve finds the action of a request: by bound pattern, or by intent
// header on a dispatch pattern. It returns nil for a request that is not
// gated, whether the request was matched by a pattern with path values, and
// the redirect to answer instead when the request names a bound pattern by a
// path that is not canonical.
//
// The intent header never picks the tool of a request outside the dispatch
// patterns: on a bound route it may only repeat the route's tool, and on any
// other route it is refused. Otherwise an agent could run any handler of the
// application (POST /admin/wipe) after the checks of whichever action it
// chose (system.ping).
func (g *gate) resolve(r *http.Request) (a *manifest.Action, wildcards bool, redirect http.Handler, err error) {
	var rt boundRoute
	var allowed []string // the path is bound, for these methods only
	if len(g.byPattern) > 0 {
		h, p := g.bound.Handler(r)
		if p != "" {
			var ok bool
			if rt, ok = g.byPattern[p]; ok && h != (matched{}) {
				return nil, false, h, nil
			}
		} else if allowed = methodNotAllowed(h, r); allowed == nil {
			if twin := g.slashTwin(r); twin != nil {
				return nil, false, twin, nil
			}
		}
	}
	var name string
	if g.cfg.intentHeader {
		name = wire.Header(r.Header, keyIntent)
	}
	switch {
	case rt.dispatch:
		if name == "" {
			return nil, false, nil, axerr.Newf(axerr.CodeIntentNotFound, "%s %s dispatches by intent, and the request names none", r.Method, r.URL.Path).
				WithSuggestion("Name the tool's intent in the " + HeaderIntent + " header.")
		}
		h := lookup(g.m, name)
		if h == nil {
			return nil, false, nil, igate.IntentNotFound(g.m, name)
		}
		return h, rt.wildcards, nil, nil
	case rt.action != nil:
		if name != "" {
			h := lookup(g.m, name)
			switch {
			case h == nil:
				return nil, false, nil, igate.IntentNotFound(g.m, name)
			case h != rt.action:
				return nil, false, nil, axerr.Newf(axerr.CodeIntentNotFound, "the %s header names %q, but this route is %q", HeaderIntent, name, rt.action.Intent).
					WithIntent(rt.action.Intent).With("tool", name).
					WithSuggestion("Drop the header or name the route's own intent.")
			}
		}
		return rt.action, rt.wildcards, nil, nil
	case allowed != nil && !g.cfg.passThrough[r.Method]:
		// Not passed through ungated: the application's router may well
		// send PUT /orders to the handler bound for POST /orders, which
		// would then run without any check.
		return nil, false, nil, axerr.Newf(axerr.CodeMethodNotAllowed, "%s %s: this path is bound to a tool for %s only", r.Method, r.URL.Path, strings.Join(allowed, ", ")).
			WithReason(reasons.MethodNotAllowed).With(detailAllowedMethods, allowed).
			WithSuggestion("Call the path with one of the methods in the Allow header.")
	case name != "":
		return nil, false, nil, axerr.Newf(axerr.CodeIntentNotFound, "%s %s is not bound to a tool, and the %s header cannot choose one for it", r.Method, r.URL.Path, HeaderIntent).
			With("tool", name).
			WithSuggestion("Call the route bound to the tool, or an intent-dispatch endpoint of this server.")
	case allowed != nil:
		// A method of WithPassThroughMethods: ungated, by the
		// application's choice, also with WithRequireIntent.
		return nil, false, nil, nil
	case g.cfg.requireRoute:
		return nil, false, nil, axerr.Newf(axerr.CodeIntentNotFound, "%s %s is not a tool of this server", r.Method, r.URL.Path).
			WithSuggestion("Use one of the routes bound to a tool.")
	}
	return nil, false, nil, nil
}

// slashTwin returns a redirect to the bound route that the request names
// but for a trailing slash ("POST /invoices/" where "POST /invoices" is
// bound, or the other way round), or nil when there is none. ServeMux tells
// the two paths apart, but many routers do not (chi's StripSlashes, echo's
// RemoveTrailingSlash, gin's RedirectTrailingSlash): passed through ungated,
// the request would reach the bound route's handler with no check. It gets
// the same answer as any other non-canonical spelling of a bound route, a
// 307 to the bound path (query kept), and neither the chain nor the handler
// runs. Only a twin bound for the request's own method counts: a different
// method on the twin path is the application's route, not the tool's.
func (g *gate) slashTwin(r *http.Request) http.Handler {
	p := r.URL.Path
	if len(p) <= 1 {
		return nil
	}
	toggle := func(s string) string {
		if s == "" {
			return ""
		}
		if strings.HasSuffix(s, "/") {
			return strings.TrimRight(s, "/")
		}
		return s + "/"
	}
	u := *r.URL
	u.Path, u.RawPath = toggle(u.Path), toggle(u.RawPath)
	if u.Path == "" {
		return nil
	}
	r2 := r.WithContext(r.Context()) // ServeMux.Handler reads only
	r2.URL = &u
	h, pattern := g.bound.Handler(r2)
	if _, ok := g.byPattern[pattern]; pattern == "" || !ok {
		return nil
	}
	if h != (matched{}) {
		return h // the twin is not canonical either: ServeMux's redirect
	}
	target := url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: r.URL.RawQuery}
	return http.RedirectHandler(target.String(), http.StatusTemporaryRedirect)
}

// detailAllowedMethods is the detail of a 405 refusal listing the methods
// bound on its path; WriteError turns it into the Allow header.
const detailAllowedMethods = "allowed_methods"

// notFound identifies ServeMux's handler for a path no pattern matches
// (http.NotFoundHandler is http.HandlerFunc(http.NotFound)).
var notFound = reflect.ValueOf(http.NotFound).Pointer()

// methodNotAllowed returns the methods bound on the request's path when the
// bound patterns match its path but not its method, and nil otherwise. h is
// what ServeMux.Handler returned with an empty pattern: its 404 handler, a
// redirect to a cleaned path, or, when a pattern matches except for the
// method, a handler that answers 405 with the Allow header ServeMux
// computed. That handler is run on a writer that only keeps the header, so
// the list is ServeMux's own (with HEAD where GET is bound). The pointer
// check spares requests to unbound paths, the common case, from running
// the 404 handler; the status check keeps the answer right even if it
// misses.
func methodNotAllowed(h http.Handler, r *http.Request) []string {
	f, ok := h.(http.HandlerFunc)
	if !ok || reflect.ValueOf(f).Pointer() == notFound {
		return nil
	}
	hw := headerWriter{header: http.Header{}}
	f(&hw, r)
	if hw.status != http.StatusMethodNotAllowed {
		return nil
	}
	var methods []string
	for _, v := range strings.Split(hw.header.Get("Allow"), ",") {
		if v = strings.TrimSpace(v); v != "" {
			methods = append(methods, v)
		}
	}
	return methods
}

// headerWriter keeps the header and status a handler writes, and drops the
// body.
type headerWriter struct {
	header http.Header
	status int
}

func (w *headerWriter) Header() http.Header         { return w.header }
func (w *headerWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *headerWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

// noWrite is the ResponseWriter of the second match, whose handler never
// writes. Its Header is a fresh map all the same, so that a handler that
// does write (a redirect) cannot panic.
type noWrite struct{}

func (noWrite) Header() http.Header         { return http.Header{} }
func (noWrite) Write(b []byte) (int, error) { return len(b), nil }
func (noWrite) WriteHeader(int)             {}

func (g *gate) serve(w http.ResponseWriter, r *http.Request, a *manifest.Action) {
	pre, call, merged, err := g.cfg.beginCall(w, r, a, true, g.ident)
	if err != nil {
		g.cfg.writeError(pre.ctx, w, err)
		return
	}
	checksResult := a.OutputSchema != nil || len(a.Postconditions) > 0
	ex := &exchange{
		principal: pre.principal, w: w, r: r,
		body: bytes.TrimSpace(pre.body), merged: merged,
		buffer: g.cfg.bufferAll || checksResult || call.Credentials.IdempotencyKey != "",
		decode: checksResult,
	}
	ctx := context.WithValue(pre.ctx, exchangeKey{}, ex)
	res, err := g.chain.Invoke(ctx, call)
	switch {
	case ex.stream != nil && ex.stream.wrote:
		// The response went out as the handler wrote it.
		if err != nil && !isHandlerFailure(err) {
			g.cfg.log.LogAttrs(ctx, slog.LevelError, "httpgate: the chain refused a call after its response was sent", slog.String("tool", call.Tool), slog.Any("error", err))
		}
	case err != nil:
		if hf, ok := errors.AsType[*handlerFailure](err); ok && hf.rec != nil {
			hf.rec.flush(w)
			return
		}
		g.cfg.writeError(ctx, w, err)
	case ex.rec != nil:
		ex.rec.flush(w)
	case ex.stream != nil:
		// The handler wrote nothing at all: net/http's 200 with no body.
	default:
		// The chain answered without running the handler: a replayed result.
		w.Header()[HeaderReplayed] = []string{"true"}
		writeJSON(w, http.StatusOK, res.Value)
	}
}

func isHandlerFailure(err error) bool {
	_, ok := errors.AsType[*handlerFailure](err)
	return ok
}

// invokeHandler is the tool at the end of the chain: the wrapped handler,
// writing into a buffer.
func (g *gate) invokeHandler(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
	ex, ok := ctx.Value(exchangeKey{}).(*exchange)
	if !ok {
		return middleware.Result{}, errors.New("httpgate: handler invoked outside a request")
	}
	if err := ex.canonicalBody(call); err != nil {
		return middleware.Result{}, err
	}
	if !ex.buffer {
		ex.stream = &streamed{ResponseWriter: ex.w}
		g.next.ServeHTTP(ex.stream, ex.r.WithContext(ctx))
		if ex.stream.status >= http.StatusInternalServerError {
			return middleware.Result{}, &handlerFailure{status: ex.stream.status}
		}
		return middleware.Result{}, nil
	}
	ex.rec = newRecorder()
	g.next.ServeHTTP(ex.rec, ex.r.WithContext(ctx))
	if ex.rec.status >= http.StatusInternalServerError {
		return middleware.Result{}, &handlerFailure{status: ex.rec.status, rec: ex.rec}
	}
	v, err := ex.rec.value(ex.decode)
	if err != nil {
		return middleware.Result{}, err
	}
	return middleware.Result{Value: v}, nil
}

// canonicalBody gives the handler's request a fresh body: the RFC 8785
// canonical encoding of the arguments that came from the body, never the
// bytes as sent. The gates judged a decoded value; a handler that decoded the
// original bytes with another parser (one that takes the last of two equal
// keys, or reads numbers differently) could act on another value. The
// canonical bytes have one reading. When the arguments are the body alone
// (no path or query values), they are the call's CanonicalArguments, shared
// with ArgsSHA256; otherwise the body is canonicalized on its own, so that
// path and query values stay where the handler looks for them. A request
// without a body keeps none.
func (ex *exchange) canonicalBody(call *middleware.Call) error {
	r := ex.r
	if len(ex.body) == 0 {
		r.Body, r.ContentLength, r.TransferEncoding = http.NoBody, 0, nil
		r.Header.Del("Content-Length")
		return nil
	}
	var canon []byte
	var err error
	if ex.merged {
		canon, err = jcs.Transform(ex.body)
		if err != nil {
			err = axerr.New(axerr.CodeInvalidArguments, "arguments cannot be canonicalized: "+err.Error()).WithIntent(call.Intent())
		}
	} else {
		canon, err = call.CanonicalArguments()
	}
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(canon))
	r.ContentLength, r.TransferEncoding = int64(len(canon)), nil // the length is known now
	r.Header.Set("Content-Length", strconv.Itoa(len(canon)))
	return nil
}

// handlerFailure is a handler's response with status 500 or more: a failed
// call, whose response is still passed on as written (from rec when it was
// buffered).
type handlerFailure struct {
	status int
	rec    *recorder
}

func (f *handlerFailure) Error() string {
	return fmt.Sprintf("handler responded %d %s", f.status, http.StatusText(f.status))
}

// streamed passes a handler's response straight to the client, noting its
// status.
type streamed struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *streamed) WriteHeader(status int) {
	if !s.wrote && status >= 200 { // 1xx are informational, more follows
		s.status, s.wrote = status, true
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *streamed) Write(b []byte) (int, error) {
	if !s.wrote {
		s.status, s.wrote = http.StatusOK, true
	}
	return s.ResponseWriter.Write(b)
}

// Flush sends what was written so far, for handlers that stream (as
// http.Flusher; the status is then 200 unless set before).
func (s *streamed) Flush() {
	if !s.wrote {
		s.status, s.wrote = http.StatusOK, true
	}
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the client's writer (Flush,
// deadlines, Hijack).
func (s *streamed) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// recorder buffers a handler's response.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: make(http.Header)} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *recorder) flush(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.header {
		h[k] = v
	}
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(r.body.Bytes())
}

// value is the tool result the chain sees: a JSON body as json.RawMessage
// (decoded when a check after the tool needs the value), any other body as a
// string, no body as nil.
func (r *recorder) value(decode bool) (any, error) {
	b := r.body.Bytes()
	if len(b) == 0 {
		return nil, nil
	}
	if !isJSON(r.header.Get("Content-Type")) || !json.Valid(b) {
		return string(b), nil
	}
	if !decode {
		return json.RawMessage(b), nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

func isJSON(contentType string) bool {
	if contentType == "application/json" {
		return true // the common case, without parsing
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
