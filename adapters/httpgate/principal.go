package httpgate

import (
	"context"
	"net/http"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
)

// PrincipalFunc authenticates a request: who makes the call, or an error.
//
// An *axerr.Error is written as it is; any other error becomes
// 401 AXGATE_UNAUTHENTICATED with the error's text in the message (it is
// the service's own: "bad api key"), so it must not hold what the caller
// may not see. A 401 carries a WWW-Authenticate: Bearer challenge only when
// bearer authentication failed (JWTBearer's refusals).
// JWTBearer is a ready one for bearer JWTs, Anonymous one that lets every
// request in.
type PrincipalFunc func(r *http.Request) (middleware.Principal, error)

// Anonymous is a PrincipalFunc letting every request in, as nobody.
//
// The principal it returns is the empty one: no ID, tenant, roles or
// scopes. Use it only on purpose, for example behind a gateway that already
// authenticated the caller and where no gate depends on who calls.
func Anonymous(*http.Request) (middleware.Principal, error) { return middleware.Principal{}, nil }

// WithPrincipal sets how requests are authenticated.
//
// Without it every gated request is refused with 401
// AXGATE_UNAUTHENTICATED: a forgotten option fails closed. Pass Anonymous
// to let requests through unauthenticated on purpose. The validation and
// discovery endpoints of the tool server never call it.
func WithPrincipal(f PrincipalFunc) Option { return func(c *config) { c.principal = f } }

// PrincipalFrom returns the principal a gated request was authenticated as,
// for the handler behind the middleware.
func PrincipalFrom(ctx context.Context) (middleware.Principal, bool) {
	ex, ok := ctx.Value(exchangeKey{}).(*exchange)
	if !ok {
		return middleware.Principal{}, false
	}
	return ex.principal, true
}

// authenticate runs the PrincipalFunc and turns its failures into refusals.
func (c *config) authenticate(r *http.Request) (middleware.Principal, error) {
	f := c.principal
	if f == nil {
		f = unauthenticatedByDefault
	}
	p, err := f(r)
	if err == nil {
		return p, nil
	}
	if _, ok := axerr.As(err); ok {
		return p, err
	}
	// The function's words are the service's own reason ("bad api key"):
	// the caller needs them to fix the request.
	return p, axerr.New(axerr.CodeUnauthenticated, "the request is not authenticated: "+err.Error()).WithCause(err)
}

// unauthenticatedByDefault refuses every request: the PrincipalFunc of a
// config without WithPrincipal.
func unauthenticatedByDefault(*http.Request) (middleware.Principal, error) {
	return middleware.Principal{}, axerr.New(axerr.CodeUnauthenticated, "this server has no authentication configured, so it refuses every call").
		WithReason(reasons.NoAuthenticator)
}
