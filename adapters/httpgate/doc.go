// Package httpgate puts axgate in front of net/http.
//
// It uses the standard library only (no router). There are three entry
// points:
//
//   - NewMiddleware gates the routes of an existing handler (MustMiddleware
//     panics on a configuration mistake instead of returning it, for
//     package-level wiring). A ServeMux pattern ("POST /orders",
//     "DELETE /accounts/{account_id}") is bound to a manifest tool; a
//     request on that route is authenticated, its arguments are gathered
//     from the JSON body, the path values and the query parameters, and the
//     whole axgate chain runs before the handler is called, which reads the
//     canonical encoding (RFC 8785) of the checked arguments. A body must be
//     JSON (415 otherwise), and a method not bound on a bound path gets 405
//     (WithPassThroughMethods to let some through). A refused request gets
//     the AXAG error envelope and never reaches the handler. The
//     X-AXAG-Intent header never chooses the tool of an ordinary route: on
//     a bound route it may only repeat the route's tool (WithIntentHeader),
//     and it selects the tool only on the intent-dispatch endpoints
//     declared with WithIntentHeaderOn ("POST /agent"). Anywhere else a
//     request carrying it is refused with AXAG_INTENT_NOT_FOUND, so an
//     agent cannot run an unbound handler after the checks of an action of
//     its choosing.
//   - NewToolServer serves a manifest as a tool API: GET /tools,
//     GET /tools/{name}, POST /tools/{name}/validate (the Tool Validation API,
//     not gated by authentication and never calling a handler) and
//     POST /tools/{name}/call (the whole chain, then the tool).
//   - NewHumanHandler serves the endpoints a person uses through a UI:
//     POST /confirmations, GET /approvals and POST /approvals/{id}. They
//     mint tokens, so they take people's credentials only: a
//     HumanPrincipalFunc (the UI backend's session, or HumanBearer's tokens
//     of an audience of the people's own), never the agents' PrincipalFunc,
//     which does not compile there. Mount it on the UI backend only.
//
// The three share one request prelude: the trace context is continued, the
// caller is authenticated, then the body is read. Who calls is decided by a
// PrincipalFunc; JWTBearer is a ready one for OAuth-style bearer tokens.
// Confirmation and approval tokens, the idempotency key and a claimed tenant
// travel in the X-AXAG-Confirmation, X-AXAG-Approval, Idempotency-Key and
// X-AXAG-Tenant headers.
//
// Every refusal is written by WriteError: the status of the AXAG error table,
// Content-Type application/json, the envelope
// {"error":{"code","type","message","details"}}, Retry-After when the error
// says when to retry, and WWW-Authenticate: Bearer on a 401 of bearer
// authentication.
//
// A W3C traceparent on the request is continued: the propagator (by default
// otel.GetTextMapPropagator()) extracts it into the context the chain runs in.
package httpgate
