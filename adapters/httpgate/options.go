package httpgate

import (
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/axgate/axgate/middleware"
)

// Headers httpgate reads or sets besides the credential headers, which are
// X-AXAG-Confirmation, X-AXAG-Approval, Idempotency-Key and X-AXAG-Tenant.
const (
	// HeaderIntent names the intent (or tool name) of a request, read by
	// the middleware only with WithIntentHeader.
	HeaderIntent = "X-AXAG-Intent"
	// HeaderReplayed is set to "true" on a response the idempotency gate
	// answered from a stored result instead of running the handler again.
	HeaderReplayed = "Idempotent-Replayed"
)

// DefaultMaxBodyBytes is the largest request body read by default (1 MiB);
// a larger one is refused with 413 AXGATE_PAYLOAD_TOO_LARGE.
const DefaultMaxBodyBytes = 1 << 20

// Option configures NewMiddleware, NewToolServer and NewHumanHandler.
type Option func(*config)

type config struct {
	principal    PrincipalFunc
	routes       []route
	dispatch     []string // patterns of WithIntentHeaderOn
	intentHeader bool
	requireRoute bool
	passThrough  map[string]bool // methods of WithPassThroughMethods
	maxBodyBytes int64
	maxDepth     int
	callsOff     bool
	bufferAll    bool
	propagator   propagation.TextMapPropagator
	log          *slog.Logger
	errs         []error
	signIn       *signIn // the pages' sign-in (NewHumanHandler)
}

type route struct {
	pattern string
	tool    string
}

func newConfig(opts []Option) config {
	c := config{maxBodyBytes: DefaultMaxBodyBytes}
	for _, o := range opts {
		o(&c)
	}
	if c.propagator == nil {
		c.propagator = otel.GetTextMapPropagator()
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c
}

// callLimits is what a Call gets: zero (the enforcer's own limits) unless the
// depth was configured here.
func (c *config) callLimits() middleware.Limits {
	if c.maxDepth == 0 {
		return middleware.Limits{}
	}
	return middleware.Limits{MaxBytes: int(c.maxBodyBytes), MaxDepth: c.maxDepth}
}

// WithRoute binds a ServeMux pattern to a manifest tool, for NewMiddleware.
//
// The pattern is net/http's ("POST /orders",
// "DELETE /accounts/{account_id}"), the tool its tool name or its intent.
// Patterns follow ServeMux's rules, including precedence between
// overlapping patterns; a request that matches no bound pattern passes
// through ungated (one that matches but for a trailing slash is redirected
// to the bound path). Every path value ({name}) must be a parameter of the
// tool or a user or tenant argument name, so that a gate sees it;
// NewMiddleware refuses the route otherwise.
func WithRoute(pattern, tool string) Option {
	return func(c *config) { c.routes = append(c.routes, route{pattern, tool}) }
}

// WithRoutes binds several patterns at once (see WithRoute).
func WithRoutes(routes map[string]string) Option {
	return func(c *config) {
		for p, t := range routes {
			c.routes = append(c.routes, route{p, t})
		}
	}
}

// WithIntentHeader lets the middleware read the X-AXAG-Intent header.
//
// The header names an intent such as "order.place", or a tool name. On a
// bound route it may only repeat the route's own tool, and a different one
// is refused with AXAG_INTENT_NOT_FOUND rather than guessed between. On a
// route that is not bound (nor a WithIntentHeaderOn pattern) a request
// carrying the header is refused the same way: the header never chooses
// which action's rules guard a handler that was not bound to it.
func WithIntentHeader() Option { return func(c *config) { c.intentHeader = true } }

// WithIntentHeaderOn declares intent-dispatch endpoints ("POST /agent").
//
// They are ServeMux patterns whose requests are gated as the tool the
// X-AXAG-Intent header names, for a handler that serves every tool behind
// one route and dispatches by intent itself. A request to such a pattern without the
// header, or naming an intent the manifest does not declare, is refused
// with AXAG_INTENT_NOT_FOUND. It implies WithIntentHeader. Only these
// patterns are dispatched by the header: declare them for handlers that
// really act on the header's intent, since the chain checks the rules of the
// intent named, not of whatever the handler does.
func WithIntentHeaderOn(patterns ...string) Option {
	return func(c *config) {
		c.intentHeader = true
		c.dispatch = append(c.dispatch, patterns...)
	}
}

// WithRequireIntent makes the middleware refuse requests that name no tool.
//
// A request on no bound route and no dispatch pattern is refused with 404
// AXAG_INTENT_NOT_FOUND instead of passed through: for a handler that
// serves agents only.
func WithRequireIntent() Option { return func(c *config) { c.requireRoute = true } }

// WithPassThroughMethods lets unbound methods on a bound path reach the handler.
//
// A request with one of these methods (case-sensitive, as net/http's
// patterns are: "OPTIONS", "HEAD") whose path matches a bound route but
// whose method does not is let through unchecked, as any request on a route
// that is not bound is. Without it such a request is refused with 405
// AXGATE_METHOD_NOT_ALLOWED and an Allow header naming the bound methods,
// and the handler never runs. The common use is a CORS preflight
// ("OPTIONS"); pass only methods whose handlers do nothing an action's rules
// should guard. A method that is bound on the path is always
// gated: this option never exempts it. Pass-through requests are let through
// also with WithRequireIntent.
func WithPassThroughMethods(methods ...string) Option {
	return func(c *config) {
		if c.passThrough == nil {
			c.passThrough = make(map[string]bool, len(methods))
		}
		for _, m := range methods {
			if m == "" || strings.ContainsAny(m, " \t/") {
				c.errs = append(c.errs, fmt.Errorf("httpgate: WithPassThroughMethods: %q is not a method", m))
				continue
			}
			c.passThrough[m] = true
		}
	}
}

// WithLimits bounds the size of request bodies and the nesting of arguments.
//
// A body has at most maxBodyBytes bytes (default 1 MiB; over it → 413
// AXGATE_PAYLOAD_TOO_LARGE) and, when maxDepth > 0, the arguments at most
// maxDepth levels of nesting (otherwise the enforcer's limit applies, 64 by
// default). Zero keeps a default.
func WithLimits(maxBodyBytes int64, maxDepth int) Option {
	return func(c *config) {
		if maxBodyBytes < 0 || maxDepth < 0 {
			c.errs = append(c.errs, fmt.Errorf("httpgate: negative limits %d, %d", maxBodyBytes, maxDepth))
			return
		}
		if maxBodyBytes > 0 {
			c.maxBodyBytes = maxBodyBytes
		}
		c.maxDepth = maxDepth
	}
}

// WithResponseBuffering makes the middleware buffer every handler response.
//
// The buffered response is the chain's result (a JSON body as
// json.RawMessage, other bodies as a string), also when no standard stage
// after the tool needs it: for a custom stage (axgate.WithPreExecution) that
// reads results, or that may refuse after the handler ran. Without it a
// response is buffered only when the action declares postconditions or an
// output schema or the request carries an Idempotency-Key, and streamed to
// the client otherwise.
func WithResponseBuffering() Option { return func(c *config) { c.bufferAll = true } }

// WithCallsDisabled makes the tool server refuse every call, with 403.
//
// Discovery and validation keep working (the allow_execute=false of the
// Tool Validation API); POST /tools/{name}/call is refused.
func WithCallsDisabled() Option { return func(c *config) { c.callsOff = true } }

// WithPropagator sets how a trace context is read from request headers.
//
// The default is otel.GetTextMapPropagator() at construction time;
// configure the global propagator (for example propagation.TraceContext{})
// before building.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagator = p }
}

// WithLogger sets where faults the caller is not shown are logged.
//
// Those are an error that is not an *axerr.Error and a response that could
// not be written. The default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }
