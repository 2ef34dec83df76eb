package httpgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	igate "github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/middleware"
)

// HumanPrincipalFunc authenticates the person at the endpoints of NewHumanHandler.
//
// It returns who confirms or approves, or an error (written as
// PrincipalFunc's are).
//
// It is a type of its own, not a PrincipalFunc, because these endpoints
// mint the tokens a person gives: an agent that could authenticate here
// could confirm and approve its own calls. So the agents' authentication (the
// PrincipalFunc of JWTBearer, of WithPrincipal) does not compile where a
// person's is expected. A plain function (a UI backend's session lookup)
// converts implicitly; HumanBearer authenticates bearer JWTs of the
// people's own audience. Converting a PrincipalFunc takes an explicit
// HumanPrincipalFunc(f): do it only for one that authenticates people only.
type HumanPrincipalFunc func(r *http.Request) (middleware.Principal, error)

// HumanBearer authenticates people with bearer JWTs of an audience of their own.
//
// cfg is as for JWTBearer, and cfg.Audience is the people's audience.
// agentsAudience is the audience of the tokens agents hold (the Audience of
// the JWTBearer of the API they call): it is required and must differ from
// cfg.Audience, and a token whose aud names it as well is refused (401
// AXGATE_UNAUTHENTICATED, reason wrong_audience), since it also
// authenticates an agent.
func HumanBearer(cfg BearerConfig, agentsAudience string) (HumanPrincipalFunc, error) {
	switch {
	case agentsAudience == "":
		return nil, errors.New("httpgate: HumanBearer needs the agents' audience")
	case cfg.Audience == agentsAudience:
		return nil, fmt.Errorf("httpgate: HumanBearer's audience is the agents' (%q)", agentsAudience)
	}
	pf, err := JWTBearer(cfg)
	if err != nil {
		return nil, err
	}
	return func(r *http.Request) (middleware.Principal, error) {
		p, err := pf(r)
		if err != nil {
			return p, err
		}
		if aud, _ := jwt.MapClaims(p.Claims).GetAudience(); slices.Contains(aud, agentsAudience) {
			return middleware.Principal{}, unauthenticated(axerr.Reason(reasons.TokenAudience),
				"the bearer token is also meant for the agents' API; the endpoints people confirm and approve with take people's tokens only")
		}
		return p, nil
	}, nil
}

// NewHumanHandler returns the endpoints a person confirms and approves with.
//
// A person uses them through a UI, to let an agent's call through:
//
//	POST /confirmations   {"tool","arguments"} → {"token","expires_at"}
//	                      a confirmation token for exactly that call, for the
//	                      authenticated person (who is the agent's principal)
//	GET  /approvals?limit=&cursor=
//	                      {"approvals":[…],"next_cursor"}: a page of the
//	                      pending requests the authenticated approver may
//	                      decide, oldest first (limit at most 100, default
//	                      50); next_cursor, when present, fetches the next
//	                      page
//	POST /approvals/{id}  {"approve":bool,"reason"} →
//	                      {"id","approved":true,"token","expires_at"} or
//	                      {"id","approved":false}; an approver decides a
//	                      request once: a second decision is 409
//	                      AXGATE_ALREADY_DECIDED (reason already_decided)
//
// These endpoints mint tokens, so they must take people's credentials only:
// authenticate them with the UI backend's session, a sign-in, or
// HumanBearer (tokens of the people's own audience), never with the agents'
// PrincipalFunc (which is why it is a HumanPrincipalFunc). Mount the handler
// on the UI backend, not on the API agents call. A nil person refuses every
// request, and so does a person without an ID (401 AXGATE_UNAUTHENTICATED,
// reason no_caller_id): a token for nobody is a token for every anonymous
// caller. Any WithPrincipal among opts is ignored.
// The POST bodies must be Content-Type application/json; any other media
// type is refused with 415, so that a cross-site form cannot ride on a
// session cookie (CSRF). Errors are AXAG envelopes; an unknown approval
// request is 404.
func NewHumanHandler(enf *axgate.Enforcer, person HumanPrincipalFunc, opts ...Option) http.Handler {
	var principal PrincipalFunc
	if person != nil {
		principal = func(r *http.Request) (middleware.Principal, error) {
			p, err := person(r)
			if err == nil && p.ID == "" {
				return middleware.Principal{}, unauthenticated(reasons.NoCallerID, "the person is not identified: the endpoints people confirm and approve with need who they are")
			}
			return p, err
		}
	}
	cfg := newConfig(append(opts, WithPrincipal(principal)))
	var key []byte
	if cfg.signIn != nil && cfg.signIn.oidc != nil {
		key = cfg.signIn.oidc.cfg.CookieKey
	}
	h := &humanHandler{cfg: cfg, enf: enf, mux: http.NewServeMux(), sessions: newSessions(key, igate.ReplayOf(enf)), crossOrigin: http.NewCrossOriginProtection()}
	h.mux.HandleFunc("POST /confirmations", h.confirm)
	h.mux.HandleFunc("GET /approvals", h.pending)
	h.mux.HandleFunc("POST /approvals/{id}", h.decide)
	h.mux.HandleFunc("GET /{$}", h.inbox)
	h.mux.HandleFunc("GET /requests/{id}", h.request)
	h.mux.HandleFunc("POST /requests/{id}", h.decideForm)
	h.mux.HandleFunc("GET /signin", h.signInStart)
	h.mux.HandleFunc("POST /signin", h.devSignIn)
	h.mux.HandleFunc("GET /callback", h.callback)
	h.mux.HandleFunc("POST /signout", h.signOut)
	return h
}

type humanHandler struct {
	cfg         config
	enf         *axgate.Enforcer
	mux         *http.ServeMux
	sessions    *sessions
	crossOrigin *http.CrossOriginProtection
}

func (h *humanHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Tokens and pages must never sit in a shared cache, be framed or run
	// script.
	setPageHeaders(w.Header())
	h.mux.ServeHTTP(w, r)
}

// TokenResponse is the answer of POST /confirmations and of an approval.
//
// It answers an approving or refusing POST /approvals/{id} too.
type TokenResponse struct {
	// ID is the approval request decided (approvals only).
	ID string `json:"id,omitempty"`
	// Approved is set on an approval decision.
	Approved *bool `json:"approved,omitempty"`
	// Token is the signed token; the agent sends it in X-AXAG-Confirmation
	// or X-AXAG-Approval.
	Token string `json:"token,omitempty"`
	// ExpiresAt is when the token stops being accepted.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

func (h *humanHandler) confirm(w http.ResponseWriter, r *http.Request) {
	pre, err := h.cfg.begin(w, r, declaredJSON)
	ctx, p := pre.ctx, pre.principal
	if err != nil {
		h.cfg.writeError(ctx, w, err)
		return
	}
	var req struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := h.decodeBody(pre.body, &req); err != nil {
		h.cfg.writeError(ctx, w, err)
		return
	}
	if req.Tool == "" {
		h.cfg.writeError(ctx, w, badRequest(`the body must name the "tool" to confirm`))
		return
	}
	if len(req.Arguments) == 0 || string(req.Arguments) == "null" {
		req.Arguments = json.RawMessage("{}")
	}
	tok, exp, err := h.enf.IssueConfirmation(ctx, p, req.Tool, req.Arguments)
	if err != nil {
		h.cfg.writeError(ctx, w, err)
		return
	}
	writeJSON(w, http.StatusOK, TokenResponse{Token: tok, ExpiresAt: &exp})
}

// PendingResponse is the answer of GET /approvals: one page of the inbox.
type PendingResponse struct {
	// Approvals are the page's requests, oldest first (never null).
	Approvals []gates.ApprovalRequest `json:"approvals"`
	// NextCursor, when set, is the cursor query parameter of the next
	// page; a page may be short (even empty) while it is set.
	NextCursor string `json:"next_cursor,omitempty"`
}

func (h *humanHandler) pending(w http.ResponseWriter, r *http.Request) {
	pre, err := h.cfg.begin(w, r, noBody)
	ctx, p := pre.ctx, pre.principal
	if err != nil {
		h.cfg.writeError(ctx, w, err)
		return
	}
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > igate.MaxApprovalPage {
			h.cfg.writeError(ctx, w, badRequest(fmt.Sprintf("limit must be a whole number from 1 to %d", igate.MaxApprovalPage)).
				WithReason(reasons.InvalidLimit))
			return
		}
		limit = n
	}
	list, next, err := h.enf.Approvals().Pending(ctx, p, q.Get("cursor"), limit)
	if err != nil {
		h.cfg.writeError(ctx, w, err)
		return
	}
	if list == nil {
		list = []gates.ApprovalRequest{}
	}
	writeJSON(w, http.StatusOK, PendingResponse{Approvals: list, NextCursor: next})
}

func (h *humanHandler) decide(w http.ResponseWriter, r *http.Request) {
	pre, err := h.cfg.begin(w, r, declaredJSON)
	ctx, p := pre.ctx, pre.principal
	if err != nil {
		h.cfg.writeError(ctx, w, err)
		return
	}
	id := r.PathValue("id")
	var req struct {
		Approve *bool  `json:"approve"`
		Reason  string `json:"reason"`
	}
	if err := h.decodeBody(pre.body, &req); err != nil {
		h.cfg.writeError(ctx, w, err)
		return
	}
	if req.Approve == nil {
		h.cfg.writeError(ctx, w, badRequest(`the body must say "approve": true or false`))
		return
	}
	_, tok, exp, err := h.enf.Approvals().Decide(ctx, p, id, *req.Approve, req.Reason)
	if err != nil {
		if errors.Is(err, gates.ErrNotFound) {
			writeMessage(w, http.StatusNotFound, "Approval request not found: "+id)
			return
		}
		h.cfg.writeError(ctx, w, err)
		return
	}
	resp := TokenResponse{ID: id, Approved: req.Approve}
	if *req.Approve && tok != "" {
		// A confirmation request decided here mints no token: the same
		// call repeated runs on it (axgate.WithDecisionPages).
		resp.Token, resp.ExpiresAt = tok, &exp
	}
	writeJSON(w, http.StatusOK, resp)
}

// decodeBody decodes a small JSON request object, read by the prelude
// (declared JSON, bounded), strictly: no unknown fields, nothing after it.
func (h *humanHandler) decodeBody(body []byte, v any) error {
	if _, err := h.cfg.callLimits().Resolved().Decode(body); err != nil {
		return badRequest("the body is not a valid JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("the body does not have the expected fields: " + err.Error())
	}
	return nil
}

// requireJSON refuses a request body that is not declared application/json,
// with 415. A browser sends a cross-site form (text/plain, urlencoded,
// multipart) without a CORS preflight and with the person's cookies: a UI
// backend that authenticates by session cookie would otherwise mint a token
// for a page the person merely visited (CSRF). A cross-site application/json
// request needs a preflight, which the backend does not grant.
// It takes the same JSON media types as the gated routes (jsonMediaType):
// every one of them needs a preflight cross-site.
func requireJSON(r *http.Request) *axerr.Error {
	if cts := r.Header["Content-Type"]; len(cts) != 1 || !jsonMediaType(cts[0]) {
		return unsupportedMediaType(cts)
	}
	return nil
}

func badRequest(msg string) *axerr.Error {
	return axerr.New(axerr.CodeInvalidArguments, msg)
}
