package httpgate

import (
	"context"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel/propagation"

	"github.com/axgate/axgate/internal/wire"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// The request prelude: what the gated routes (NewMiddleware), the tool
// server's call endpoint and the human endpoints do with a request before
// their own work, written once so that the three cannot drift apart in the
// order of the checks, the status codes or the body rules.

// bodyRule says what the prelude does with a request's body.
type bodyRule uint8

const (
	// noBody: the endpoint takes no body (GET /approvals), which is not read.
	noBody bodyRule = iota
	// argumentsBody: the body holds arguments; a non-empty one must be
	// declared JSON (readJSONBody), an empty one needs no media type.
	argumentsBody
	// declaredJSON: the request must be declared application/json (or a
	// +json type), body or not (requireJSON): the human endpoints' rule,
	// which keeps a cross-site form from minting a token.
	declaredJSON
)

// prelude is what the prelude learnt of a request.
type prelude struct {
	// ctx is the request's context continuing the trace of its
	// traceparent, set also when begin fails (for writeError).
	ctx       context.Context
	principal middleware.Principal
	// body is the body as read (nil without one, or with noBody).
	body []byte
}

// begin continues the request's trace, authenticates it, then reads its
// body by rule, in this order: no body is read for a caller who is not
// authenticated. The first refusal is returned; pre.ctx is set in any case.
func (c *config) begin(w http.ResponseWriter, r *http.Request, rule bodyRule) (pre prelude, err error) {
	pre.ctx = c.propagator.Extract(r.Context(), headerCarrier(r.Header))
	if pre.principal, err = c.authenticate(r); err != nil {
		return pre, err
	}
	switch rule {
	case argumentsBody:
		pre.body, err = c.readJSONBody(w, r)
	case declaredJSON:
		if e := requireJSON(r); e != nil {
			return pre, e
		}
		pre.body, err = c.readBody(w, r)
	}
	return pre, err
}

// beginCall is begin for a call of action a, followed by the call itself:
// its arguments, the principal, the credentials of the X-AXAG-Confirmation,
// X-AXAG-Approval, Idempotency-Key and X-AXAG-Tenant headers, and the limits
// configured here.
//
// The arguments are the body (an empty one is {}); with fromURL, the path
// values and query parameters named like a parameter of a or like one of
// the identity names ident join them (see arguments), and merged reports
// that some did. The tool server passes fromURL false: its path names the
// tool, not an argument.
func (c *config) beginCall(w http.ResponseWriter, r *http.Request, a *manifest.Action, fromURL bool, ident []*manifest.Parameter) (pre prelude, call *middleware.Call, merged bool, err error) {
	if pre, err = c.begin(w, r, argumentsBody); err != nil {
		return pre, nil, false, err
	}
	var extra []argument
	if fromURL {
		if extra, err = pathAndQuery(a, ident, r); err != nil {
			return pre, nil, false, err
		}
	}
	lim := c.callLimits()
	if lim == (middleware.Limits{}) {
		lim.MaxBytes = int(c.maxBodyBytes)
	}
	var args json.RawMessage
	if args, merged, err = arguments(a, pre.body, extra, lim); err != nil {
		return pre, nil, false, err
	}
	call = &middleware.Call{
		Tool:        a.ToolName(),
		Action:      a,
		Arguments:   args,
		Principal:   pre.principal,
		Credentials: wire.FromHeader(r.Header),
		Limits:      c.callLimits(),
	}
	return pre, call, merged, nil
}

// headerCarrier is propagation.HeaderCarrier with the W3C propagators'
// keys (traceparent, tracestate, baggage) looked up in the canonical form
// http.Header stores them in: HeaderCarrier canonicalizes the lower-case
// key on every lookup, which allocates a copy of it each time, on every
// request.
type headerCarrier http.Header

// canonicalKey returns http.CanonicalHeaderKey(k) for the W3C keys, k
// itself for any other (which http.Header canonicalizes as before).
func canonicalKey(k string) string {
	switch k {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	case "baggage":
		return "Baggage"
	}
	return k
}

func (h headerCarrier) Get(k string) string { return http.Header(h).Get(canonicalKey(k)) }

func (h headerCarrier) Values(k string) []string { return http.Header(h).Values(canonicalKey(k)) }

func (h headerCarrier) Set(k, v string) { http.Header(h).Set(k, v) }

func (h headerCarrier) Keys() []string { return propagation.HeaderCarrier(h).Keys() }
