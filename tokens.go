package axgate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// DevKeyID is the kid of the signing key New generates when no key at all is
// configured.
const DevKeyID = "axgate-ephemeral"

// TokenOptions configure the confirmation and approval tokens: which are
// accepted and how those axgate issues are made. A zero field keeps its
// default, documented where the setting is used (the gates field each
// names); New fails on a negative lifetime or size.
type TokenOptions struct {
	// Issuer is the iss of issued tokens and the iss accepted
	// (token.VerifierConfig.Issuer).
	Issuer string
	// Audience is the aud of issued tokens and the aud accepted
	// (token.VerifierConfig.Audience).
	Audience string
	// Algorithms is the allow-list of token algorithms
	// (token.VerifierConfig.Algorithms); WithSharedSecret adds HS256.
	Algorithms []string
	// ConfirmationLifetime is the longest lifetime (exp - iat) accepted for
	// a confirmation token, and the lifetime of those IssueConfirmation
	// signs (token.DefaultConfirmationLifetime).
	ConfirmationLifetime time.Duration
	// ApprovalLifetime is the same for approval tokens, which
	// Approvals().Decide signs (token.DefaultApprovalLifetime).
	ApprovalLifetime time.Duration
	// Leeway is the clock skew allowed on exp, nbf and iat
	// (token.VerifierConfig.Leeway).
	Leeway time.Duration
	// MaxBytes caps a token's size; larger ones are refused before parsing
	// (token.VerifierConfig.MaxBytes).
	MaxBytes int
	// ConfirmationThreshold is the risk level from which a call needs
	// confirmation even without confirmation_required (default high;
	// critical actions always need it).
	ConfirmationThreshold manifest.RiskLevel

	// Keys verify both kinds of token; ConfirmationKeys only confirmation
	// tokens, ApprovalKeys only approval tokens (token.JoinKeySets joins
	// several sets). The public key of WithSigningKey and the keys of
	// WithJWKSFile and JWKSURL verify both kinds as well.
	Keys, ConfirmationKeys, ApprovalKeys token.KeySet
	// JWKSURL, when set, is a JWK Set URL whose public keys verify both
	// kinds of token. New fetches it once (and fails if it cannot); it is
	// then refreshed in the background until Close. A token naming a key
	// the last fetch did not have is refused without fetching again.
	JWKSURL string
	// JWKS says how JWKSURL is fetched and refreshed (its refresh interval,
	// timeout and client: token.RemoteKeySetOptions).
	JWKS token.RemoteKeySetOptions
}

// ApprovalOptions configure the approval workflow. A zero field keeps its
// default; New fails on a negative RequestTTL.
type ApprovalOptions struct {
	// RequestTTL is how long a request stays pending (default 24h).
	RequestTTL time.Duration
	// Quota is how many pending requests one requester may hold (default
	// 20; negative: no quota); a request over it is refused with 429
	// AXAG_RATE_LIMITED, reason approval_quota.
	Quota int
	// NotificationsPerMinute caps the notifications of new requests per
	// tenant and minute, in each process (default 60; negative: no cap);
	// the count of those held back rides on the tenant's next one
	// (ApprovalRequest.Coalesced).
	NotificationsPerMinute int
	// Notifier, when set, hears of each new request once, within
	// NotificationsPerMinute.
	Notifier gates.Notifier
}

// tokenConfig configures the confirmation and approval gates: what the user
// set, nothing built.
type tokenConfig struct {
	opts      TokenOptions
	approvals ApprovalOptions
	jwksFiles []string

	signer        *token.Signer
	sharedSecret  bool
	replay        token.ReplayStore
	approvalStore gates.ApprovalStore
	// pages is the base URL of the decision pages (WithDecisionPages),
	// with its trailing slash; "" when not set.
	pages string

	// errs are option errors reported by New.
	errs []error
}

// tokenRuntime is what tokenStages built, for IssueConfirmation and
// Approvals.
type tokenRuntime struct {
	approval    *gate.Approval
	issuer      token.Issuer
	confirmLife time.Duration
	// replay is where tokens are spent (WithReplayStore, or the memory
	// store made for the enforcer); the decision pages record their
	// single-use sign-ins there (gate.ReplayOf).
	replay token.ReplayStore
}

// WithTokens configures the confirmation and approval tokens: see
// TokenOptions. A later WithTokens replaces an earlier one; the shortcuts
// (WithSigningKey, WithSharedSecret, WithJWKSFile, WithReplayStore) are
// kept apart and add to it.
func WithTokens(o TokenOptions) Option {
	o.Algorithms = append([]string(nil), o.Algorithms...)
	return func(c *config) { c.tokens.opts = o }
}

// WithApprovals configures the approval workflow: see ApprovalOptions. A
// later WithApprovals replaces an earlier one.
func WithApprovals(o ApprovalOptions) Option {
	return func(c *config) { c.tokens.approvals = o }
}

// WithSigningKey signs the tokens IssueConfirmation and Approvals().Decide return.
//
// Its public key also verifies confirmation and approval tokens. Without
// any signing or verification key, New generates an ephemeral Ed25519 key
// (kid DevKeyID) so that one process can issue and accept tokens with no
// set-up; such tokens die with the process and are not accepted by other
// replicas.
func WithSigningKey(s *token.Signer) Option {
	return func(c *config) { c.tokens.signer = s }
}

// WithSharedSecret uses an HS256 shared secret (at least 32 bytes) to sign
// and verify tokens, and adds HS256 to the allowed algorithms. Prefer an
// asymmetric key: anyone who can verify with a shared secret can also mint.
func WithSharedSecret(kid string, secret []byte) Option {
	return func(c *config) {
		s, err := token.NewSigner(kid, secret)
		if err != nil {
			c.tokens.errs = append(c.tokens.errs, fmt.Errorf("shared secret: %w", err))
			return
		}
		c.tokens.signer = s
		c.tokens.sharedSecret = true
	}
}

// WithJWKSFile adds the public keys of a JWK Set file (read once, by New) for
// both kinds of token. It can be given several times.
func WithJWKSFile(path string) Option {
	return func(c *config) { c.tokens.jwksFiles = append(c.tokens.jwksFiles, path) }
}

// WithReplayStore sets where used token ids are recorded (default: in
// memory, one process). Use a shared store with several replicas.
func WithReplayStore(s token.ReplayStore) Option { return func(c *config) { c.tokens.replay = s } }

// WithDecisionPages holds people's decisions server-side, bound to the exact call.
//
// baseURL is the public URL where the human pages are mounted
// (httpgate.NewHumanHandler), e.g. "https://ops.example/axgate/"; a slash
// is added when it lacks one, and New fails unless it is an absolute http
// or https URL without query or fragment. Then a call refused with
// AXAG_CONFIRMATION_MISSING (no token, not a check) records a confirmation
// request in the approval store (Kind "confirmation", decided by its
// requester alone through Approvals().Decide), as a call refused with
// AXAG_APPROVAL_MISSING records an approval request; both refusals carry
// details decision_id, decision_url (baseURL + "requests/" + id) and an
// agent_action telling the agent to show the page to the user. The same
// call repeated after the decision (confirmed, or approved by enough
// approvers) runs once without a token: the commit spends the decision
// with the call's tokens and moves the request to executed, so of
// concurrent repeats one runs, and a later one is refused and opens a new
// request. A denial keeps the call refused. Tokens in hand work as without
// it. Confirmation requests count in the requester's quota and the
// tenant's capacity as approval requests do (ApprovalOptions).
func WithDecisionPages(baseURL string) Option {
	return func(c *config) {
		u, err := url.Parse(baseURL)
		switch {
		case err != nil:
			c.tokens.errs = append(c.tokens.errs, fmt.Errorf("decision pages: %w", err))
			return
		case u.Scheme != "http" && u.Scheme != "https", u.Host == "", u.RawQuery != "", u.Fragment != "", u.User != nil:
			c.tokens.errs = append(c.tokens.errs, fmt.Errorf("decision pages: %q is not an absolute http(s) URL without query, fragment or user", baseURL))
			return
		}
		if !strings.HasSuffix(baseURL, "/") {
			baseURL += "/"
		}
		c.tokens.pages = baseURL
	}
}

// WithApprovalStore sets where approval requests are kept (default: a
// memstore.NewApprovalStore for one process, at most 100,000 requests per
// tenant).
func WithApprovalStore(s gates.ApprovalStore) Option {
	return func(c *config) { c.tokens.approvalStore = s }
}

// check reports the settings New refuses: negative lifetimes, sizes and
// request TTLs, which no default can stand for.
func (tc *tokenConfig) check() error {
	errs := append([]error(nil), tc.errs...)
	o := tc.opts
	if o.ConfirmationLifetime < 0 {
		errs = append(errs, fmt.Errorf("TokenOptions.ConfirmationLifetime is negative (%v)", o.ConfirmationLifetime))
	}
	if o.ApprovalLifetime < 0 {
		errs = append(errs, fmt.Errorf("TokenOptions.ApprovalLifetime is negative (%v)", o.ApprovalLifetime))
	}
	if o.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("TokenOptions.MaxBytes is negative (%d)", o.MaxBytes))
	}
	if tc.approvals.RequestTTL < 0 {
		errs = append(errs, fmt.Errorf("ApprovalOptions.RequestTTL is negative (%v)", tc.approvals.RequestTTL))
	}
	return errors.Join(errs...)
}

// tokenStages returns the confirmation and approval gates, and keeps on the
// enforcer what IssueConfirmation and Approvals need.
func (e *Enforcer) tokenStages() ([]middleware.Stage, error) {
	tc := &e.cfg.tokens
	if err := tc.check(); err != nil {
		return nil, err
	}
	o := tc.opts
	var both []token.KeySet
	for _, path := range tc.jwksFiles {
		ks, err := token.LoadJWKSFile(path)
		if err != nil {
			return nil, err
		}
		both = append(both, ks)
	}
	if o.JWKSURL != "" {
		ks, err := token.NewRemoteKeySet(o.JWKSURL, o.JWKS)
		if err != nil {
			return nil, err
		}
		e.closers = append(e.closers, ks.Close)
		both = append(both, ks)
	}
	if o.Keys != nil {
		both = append(both, o.Keys)
	}
	signer := tc.signer
	if signer == nil && len(both) == 0 && o.ConfirmationKeys == nil && o.ApprovalKeys == nil {
		var err error
		if signer, err = token.GenerateDevKey(DevKeyID); err != nil {
			return nil, fmt.Errorf("ephemeral signing key: %w", err)
		}
	}
	if signer != nil {
		own, err := token.NewKeySet(signer.PublicKey())
		if err != nil {
			return nil, err
		}
		both = append([]token.KeySet{own}, both...)
	}
	algs := o.Algorithms
	if len(algs) == 0 {
		algs = token.DefaultAlgorithms
	}
	if tc.sharedSecret {
		algs = append(append([]string(nil), algs...), "HS256")
	}
	confirmLife := cmp.Or(o.ConfirmationLifetime, token.DefaultConfirmationLifetime)
	approvalLife := cmp.Or(o.ApprovalLifetime, token.DefaultApprovalLifetime)
	verifier := func(typ string, life time.Duration, only token.KeySet) (*token.Verifier, error) {
		sets := append([]token.KeySet(nil), both...)
		if only != nil {
			sets = append(sets, only)
		}
		if len(sets) == 0 {
			return nil, nil
		}
		return token.NewVerifier(token.VerifierConfig{
			Type: typ, Keys: token.JoinKeySets(sets...), Issuer: o.Issuer, Audience: o.Audience,
			Algorithms: algs, MaxLifetime: life, Leeway: o.Leeway, MaxBytes: o.MaxBytes,
		})
	}
	cv, err := verifier(token.TypConfirmation, confirmLife, o.ConfirmationKeys)
	if err != nil {
		return nil, fmt.Errorf("confirmation tokens: %w", err)
	}
	av, err := verifier(token.TypApproval, approvalLife, o.ApprovalKeys)
	if err != nil {
		return nil, fmt.Errorf("approval tokens: %w", err)
	}
	replay := tc.replay
	if replay == nil {
		replay = token.NewMemoryReplayStore(token.MemoryReplayOptions{})
	}
	store := tc.approvalStore
	if store == nil {
		store = gate.NewMemoryApprovalStore(gate.MemoryApprovalOptions{})
	}
	issuer := token.Issuer{Signer: signer, Issuer: o.Issuer, Audience: o.Audience}
	ao := tc.approvals
	appr, err := gate.NewApproval(gate.ApprovalConfig{
		Verifier: av, Replay: replay, Store: store, Notifier: ao.Notifier,
		RequestTTL: ao.RequestTTL, Issuer: issuer, TokenLifetime: approvalLife,
		Quota: ao.Quota, NotificationsPerMinute: ao.NotificationsPerMinute,
		Pages: tc.pages, ConfirmationLifetime: confirmLife,
	})
	if err != nil {
		return nil, err
	}
	var requests *gate.Approval
	if tc.pages != "" {
		requests = appr
	}
	conf, err := gate.NewConfirmation(gate.ConfirmationConfig{Verifier: cv, Audience: o.Audience, Replay: replay, Threshold: o.ConfirmationThreshold, Requests: requests})
	if err != nil {
		return nil, err
	}
	e.tokens = &tokenRuntime{approval: appr, issuer: issuer, confirmLife: confirmLife, replay: replay}
	return []middleware.Stage{conf.Stage(), appr.Stage()}, nil
}

// IssueConfirmation signs a confirmation token for this exact call, for a
// host whose UI has just asked the person: the principal's call of tool with
// args. The token is valid once, for the confirmation lifetime
// (TokenOptions.ConfirmationLifetime).
func (e *Enforcer) IssueConfirmation(ctx context.Context, p middleware.Principal, tool string, args json.RawMessage) (token string, expiresAt time.Time, err error) {
	rt := e.tokens
	a := e.m.Tool(tool)
	if a == nil {
		return "", time.Time{}, gate.IntentNotFound(e.m, tool)
	}
	if rt.issuer.Signer == nil {
		return "", time.Time{}, axerr.New(axerr.CodeInternal, "no signing key is configured, so confirmation tokens cannot be issued").WithIntent(a.Intent)
	}
	call := middleware.NewCall(tool, args, p)
	call.Action, call.Limits = a, e.cfg.limits
	digest, err := call.ArgsSHA256()
	if err != nil {
		return "", time.Time{}, err
	}
	token, expiresAt, err = rt.issuer.Confirmation(p, a.Intent, digest, rt.confirmLife)
	if err != nil {
		return "", time.Time{}, axerr.New(axerr.CodeInternal, "the confirmation token could not be signed").WithIntent(a.Intent).WithCause(err)
	}
	return token, expiresAt, nil
}

// Approvals is the approval workflow of an enforcer: the approvers' inbox,
// one request, the decisions and the requester's withdrawal. Get it with
// Enforcer.Approvals; it is safe for concurrent use.
type Approvals struct{ g *gate.Approval }

func init() {
	gate.ReplayOf = func(enf any) token.ReplayStore {
		if e, ok := enf.(*Enforcer); ok && e != nil && e.tokens != nil {
			return e.tokens.replay
		}
		return nil
	}
}

// Approvals returns the enforcer's approval workflow.
func (e *Enforcer) Approvals() *Approvals { return &Approvals{e.tokens.approval} }

// Pending lists, a page at a time, the pending requests the approver may decide.
//
// Those are the approval requests of the approver's tenant that one of
// their roles may approve and that are not their own, and (with
// WithDecisionPages) their own pending confirmation requests. They come
// oldest first. cursor is "" for the first page, else the next
// cursor of the page before; limit is at most 100 (50 when 0). next is "" after
// the last page.
func (a *Approvals) Pending(ctx context.Context, approver middleware.Principal, cursor string, limit int) (page []gates.ApprovalRequest, next string, err error) {
	return a.g.Pending(ctx, approver, cursor, limit)
}

// Request returns one approval request, with the call's arguments, to
// viewer: its requester, or an approver who may decide it. A confirmation
// request is shown to its requester only; to anyone else it reads as
// unknown (reason request_not_found).
func (a *Approvals) Request(ctx context.Context, viewer middleware.Principal, id string) (gates.ApprovalRequest, error) {
	return a.g.Request(ctx, viewer, id)
}

// Decide records a person's decision on a pending request: approve or deny.
//
// For an approval request it returns the request as it now stands and, on
// approval, a signed approval token for the requester's call with its
// expiry.
//
// A confirmation request (Kind "confirmation", WithDecisionPages) is decided
// by its requester only (anyone else: reason request_not_found, as for a
// request of another tenant); confirming returns no token: the same call
// repeated runs on the request once, within the confirmation lifetime
// (TokenOptions.ConfirmationLifetime), and a denial refuses it (reason
// declined) as long. The transport must have authenticated person as a
// person (the human endpoints), never as the agent making the call.
func (a *Approvals) Decide(ctx context.Context, approver middleware.Principal, id string, approve bool, reason string) (req gates.ApprovalRequest, token string, expiresAt time.Time, err error) {
	return a.g.Decide(ctx, approver, id, approve, reason)
}

// Cancel withdraws a pending request; only its requester may.
func (a *Approvals) Cancel(ctx context.Context, requester middleware.Principal, id string) error {
	return a.g.Cancel(ctx, requester, id)
}
