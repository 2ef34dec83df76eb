package httpgate

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// WriteError writes err as the AXAG error envelope: the status of the error
// table, Content-Type application/json, Retry-After (whole seconds, rounded
// up) when the error carries a retry delay, and WWW-Authenticate: Bearer on
// 401 unless the response already has a challenge. An error that is not an
// *errors.Error is written as 500 AXGATE_INTERNAL with a generic message; its
// text is never shown to the caller.
func WriteError(w http.ResponseWriter, err error) {
	e, ok := axerr.As(err)
	if !ok {
		e = internalError(err)
	}
	h := w.Header()
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfterSeconds()))
	}
	status := e.HTTPStatus()
	if status == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
		h.Set("WWW-Authenticate", bearerChallenge(e))
	}
	writeJSON(w, status, e.Envelope())
}

func internalError(err error) *axerr.Error {
	return axerr.New(axerr.CodeInternal, "the server failed to handle the call").WithCause(err)
}

// writeError is WriteError that also logs causes the caller does not see.
func (c *config) writeError(ctx context.Context, w http.ResponseWriter, err error) {
	if e, ok := axerr.As(err); !ok || e.Code == axerr.CodeInternal || e.Code == axerr.CodeToolFailed {
		c.log.LogAttrs(ctx, slog.LevelError, "httpgate: call failed", slog.Any("error", err))
	}
	WriteError(w, err)
}

// writeJSON writes v with the status. Responses are small, so they are
// encoded into memory first: an encoding failure then still gets a proper
// 500 instead of half a body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		_ = json.NewEncoder(&buf).Encode(internalError(err).Envelope())
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// writeMessage writes the discovery API's {"error": "..."} body.
func writeMessage(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, struct {
		Error string `json:"error"`
	}{msg})
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
	return p, axerr.New(axerr.CodeUnauthenticated, "the request is not authenticated").WithCause(err)
}

// credentials reads the call's credentials from the request headers.
func credentials(h http.Header) middleware.Credentials {
	cr := middleware.Credentials{
		Confirmation:   h.Get(HeaderConfirmation),
		IdempotencyKey: h.Get(HeaderIdempotencyKey),
		ClaimedTenant:  h.Get(HeaderTenant),
	}
	for _, v := range h.Values(HeaderApproval) {
		// A JWT never contains a comma, so splitting is unambiguous.
		for tok := range strings.SplitSeq(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				cr.Approvals = append(cr.Approvals, tok)
			}
		}
	}
	return cr
}
