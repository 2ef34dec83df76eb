package axgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// DevKeyID is the kid of the signing key New generates when no key at all is
// configured.
const DevKeyID = "axgate-ephemeral"

// tokenConfig configures the confirmation and approval gates.
type tokenConfig struct {
	// Verification keys: for confirmations only, approvals only, or both.
	confirmKeys, approvalKeys, bothKeys []token.KeySet
	jwksFiles                           []string
	jwksURLs                            []jwksURL

	signer        *token.Signer
	issuer        string
	audience      string
	algorithms    []string
	sharedSecret  bool
	replay        token.ReplayStore
	approvals     gates.ApprovalStore
	notifier      gates.Notifier
	threshold     manifest.RiskLevel
	confirmLife   time.Duration
	approvalLife  time.Duration
	leeway        time.Duration
	maxTokenBytes int
	requestTTL    time.Duration
	// approvalQuota and notifyPerMinute: see WithApprovalQuota and
	// WithApprovalNotifications (0 keeps the gate's default).
	approvalQuota   int
	notifyPerMinute int

	// errs are option errors reported by New.
	errs []error
	// rt is what tokenStages built, for IssueConfirmation and Decide.
	rt *tokenRuntime
}

type jwksURL struct {
	url     string
	refresh time.Duration
}

type tokenRuntime struct {
	confirmation *gates.Confirmation
	approval     *gates.Approval
	issuer       token.Issuer
	confirmLife  time.Duration
}

func defaultTokenConfig() tokenConfig {
	return tokenConfig{
		threshold:    manifest.RiskHigh,
		confirmLife:  token.DefaultConfirmationLifetime,
		approvalLife: token.DefaultApprovalLifetime,
	}
}

// WithSigningKey signs the tokens IssueConfirmation and Decide return. Its
// public key also verifies confirmation and approval tokens. Without any
// signing or verification key, New generates an ephemeral Ed25519 key (kid
// DevKeyID) so that one process can issue and accept tokens with no set-up;
// such tokens die with the process and are not accepted by other replicas.
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

// WithTokenKeys adds verification keys for confirmation and approval tokens.
func WithTokenKeys(keys token.KeySet) Option {
	return func(c *config) { c.tokens.bothKeys = append(c.tokens.bothKeys, keys) }
}

// WithConfirmationKeys adds verification keys for confirmation tokens only.
func WithConfirmationKeys(keys token.KeySet) Option {
	return func(c *config) { c.tokens.confirmKeys = append(c.tokens.confirmKeys, keys) }
}

// WithApprovalKeys adds verification keys for approval tokens only.
func WithApprovalKeys(keys token.KeySet) Option {
	return func(c *config) { c.tokens.approvalKeys = append(c.tokens.approvalKeys, keys) }
}

// WithJWKSFile adds the public keys of a JWK Set file (read once, by New) for
// both kinds of token.
func WithJWKSFile(path string) Option {
	return func(c *config) { c.tokens.jwksFiles = append(c.tokens.jwksFiles, path) }
}

// WithJWKSURL adds the public keys of a JWK Set URL for both kinds of token.
// New fetches it once (and fails if it cannot); it is then refreshed in the
// background every refresh (default 5 minutes) until Close. A token naming a
// key the last fetch did not have is refused without fetching again.
func WithJWKSURL(url string, refresh time.Duration) Option {
	return func(c *config) { c.tokens.jwksURLs = append(c.tokens.jwksURLs, jwksURL{url, refresh}) }
}

// WithIssuer sets the iss of issued tokens and the iss accepted (default
// "axgate").
func WithIssuer(iss string) Option { return func(c *config) { c.tokens.issuer = iss } }

// WithAudience sets the aud of issued tokens and the aud accepted (default
// "axgate").
func WithAudience(aud string) Option { return func(c *config) { c.tokens.audience = aud } }

// WithTokenAlgorithms replaces the allow-list of token algorithms (default
// EdDSA, ES256, RS256). "none" is never accepted.
func WithTokenAlgorithms(algs ...string) Option {
	return func(c *config) { c.tokens.algorithms = append([]string(nil), algs...) }
}

// WithReplayStore sets where used token ids are recorded (default: in
// memory, one process). Use a shared store with several replicas.
func WithReplayStore(s token.ReplayStore) Option { return func(c *config) { c.tokens.replay = s } }

// WithApprovalStore sets where approval requests are kept (default: a
// gates.MemoryApprovalStore for one process, at most
// gates.DefaultApprovalRequests requests per tenant).
func WithApprovalStore(s gates.ApprovalStore) Option {
	return func(c *config) { c.tokens.approvals = s }
}

// WithNotifier is told of new approval requests: once per request, at most
// WithApprovalNotifications per tenant and minute.
func WithNotifier(n gates.Notifier) Option { return func(c *config) { c.tokens.notifier = n } }

// WithConfirmationThreshold sets the risk level from which a call needs
// confirmation even without confirmation_required (default high). Critical
// actions always need it.
func WithConfirmationThreshold(level manifest.RiskLevel) Option {
	return func(c *config) { c.tokens.threshold = level }
}

// WithTokenLifetimes sets the longest lifetime (exp - iat) accepted for
// confirmation and approval tokens, which is also the lifetime of the tokens
// axgate issues (defaults 5 minutes and 24 hours). Zero keeps a default.
func WithTokenLifetimes(confirmation, approval time.Duration) Option {
	return func(c *config) {
		if confirmation > 0 {
			c.tokens.confirmLife = confirmation
		}
		if approval > 0 {
			c.tokens.approvalLife = approval
		}
	}
}

// WithTokenLeeway sets the clock skew allowed on exp, nbf and iat (default
// 30 seconds).
func WithTokenLeeway(d time.Duration) Option { return func(c *config) { c.tokens.leeway = d } }

// WithMaxTokenBytes caps the size of a token; larger ones are refused before
// parsing (default 8 KiB).
func WithMaxTokenBytes(n int) Option { return func(c *config) { c.tokens.maxTokenBytes = n } }

// WithApprovalRequestTTL sets how long an approval request stays pending
// (default 24 hours).
func WithApprovalRequestTTL(d time.Duration) Option {
	return func(c *config) { c.tokens.requestTTL = d }
}

// WithApprovalQuota sets how many pending approval requests one requester
// (principal and tenant) may hold at once (default
// gates.DefaultApprovalQuota, 20). A call that would open one more is
// refused with 429 AXAG_RATE_LIMITED, reason approval_quota, and a
// retry_after until the requester's oldest pending request expires; no
// request is made and no one is notified. The same call while its request
// is pending still finds that request. n < 0 lifts the quota; 0 keeps the
// default.
func WithApprovalQuota(n int) Option {
	return func(c *config) { c.tokens.approvalQuota = n }
}

// WithApprovalNotifications caps the notifications of new approval requests
// per tenant and minute, in each process (default
// gates.DefaultNotificationsPerMinute, 60). The requests over the cap are
// recorded but not notified; how many were held back is carried on the
// tenant's next notification (gates.ApprovalRequest.Coalesced). n < 0 lifts
// the cap; 0 keeps the default.
func WithApprovalNotifications(perMinute int) Option {
	return func(c *config) { c.tokens.notifyPerMinute = perMinute }
}

// tokenStages returns the confirmation and approval gates.
func (e *Enforcer) tokenStages() ([]middleware.Stage, error) {
	tc := &e.cfg.tokens
	if len(tc.errs) > 0 {
		return nil, errors.Join(tc.errs...)
	}
	var both []token.KeySet
	for _, path := range tc.jwksFiles {
		ks, err := token.LoadJWKSFile(path)
		if err != nil {
			return nil, err
		}
		both = append(both, ks)
	}
	for _, u := range tc.jwksURLs {
		ks, err := token.NewRemoteKeySet(u.url, token.RemoteKeySetOptions{RefreshInterval: u.refresh})
		if err != nil {
			return nil, err
		}
		e.closers = append(e.closers, ks.Close)
		both = append(both, ks)
	}
	both = append(both, tc.bothKeys...)
	signer := tc.signer
	if signer == nil && len(both) == 0 && len(tc.confirmKeys) == 0 && len(tc.approvalKeys) == 0 {
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
	algs := tc.algorithms
	if len(algs) == 0 {
		algs = token.DefaultAlgorithms
	}
	if tc.sharedSecret {
		algs = append(append([]string(nil), algs...), token.AlgHS256)
	}
	verifier := func(typ string, life time.Duration, only []token.KeySet) (*token.Verifier, error) {
		sets := append(append([]token.KeySet(nil), both...), only...)
		if len(sets) == 0 {
			return nil, nil
		}
		return token.NewVerifier(token.VerifierConfig{
			Type: typ, Keys: token.JoinKeySets(sets...), Issuer: tc.issuer, Audience: tc.audience,
			Algorithms: algs, MaxLifetime: life, Leeway: tc.leeway, MaxBytes: tc.maxTokenBytes,
		})
	}
	cv, err := verifier(token.TypConfirmation, tc.confirmLife, tc.confirmKeys)
	if err != nil {
		return nil, fmt.Errorf("confirmation tokens: %w", err)
	}
	av, err := verifier(token.TypApproval, tc.approvalLife, tc.approvalKeys)
	if err != nil {
		return nil, fmt.Errorf("approval tokens: %w", err)
	}
	replay := tc.replay
	if replay == nil {
		replay = token.NewMemoryReplayStore(token.MemoryReplayOptions{})
	}
	store := tc.approvals
	if store == nil {
		store = gates.NewMemoryApprovalStore(gates.MemoryApprovalOptions{})
	}
	issuer := token.Issuer{Signer: signer, Issuer: tc.issuer, Audience: tc.audience}
	conf, err := gates.NewConfirmation(gates.ConfirmationConfig{Verifier: cv, Replay: replay, Threshold: tc.threshold})
	if err != nil {
		return nil, err
	}
	appr, err := gates.NewApproval(gates.ApprovalConfig{
		Verifier: av, Replay: replay, Store: store, Notifier: tc.notifier,
		RequestTTL: tc.requestTTL, Issuer: issuer, TokenLifetime: tc.approvalLife,
		Quota: tc.approvalQuota, NotificationsPerMinute: tc.notifyPerMinute,
	})
	if err != nil {
		return nil, err
	}
	tc.rt = &tokenRuntime{confirmation: conf, approval: appr, issuer: issuer, confirmLife: tc.confirmLife}
	return []middleware.Stage{conf.Stage(), appr.Stage()}, nil
}

// IssueConfirmation signs a confirmation token for this exact call, for a
// host whose UI has just asked the person: the principal's call of tool with
// args. The token is valid for the confirmation lifetime (default 5
// minutes), once.
func (e *Enforcer) IssueConfirmation(ctx context.Context, p middleware.Principal, tool string, args json.RawMessage) (token string, expiresAt time.Time, err error) {
	rt := e.cfg.tokens.rt
	a := e.m.Tool(tool)
	if a == nil {
		return "", time.Time{}, gates.IntentNotFound(e.m, tool)
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

// Decide records an approver's decision on a pending approval request and,
// on approval, returns a signed approval token for the requester's call.
// The approver must belong to the request's tenant (a request of another
// tenant reads as unknown: AXAG_APPROVAL_INVALID, reason request_not_found,
// matching gates.ErrNotFound, telling nothing of it), not be its requester and hold one of its approval
// roles (AXAG_APPROVAL_INVALID otherwise). A request is approved once enough
// distinct approvers approved and denied at the first denial; deciding a
// request that is no longer pending is refused, except that an approver who
// already approved gets a fresh token.
func (e *Enforcer) Decide(ctx context.Context, approver middleware.Principal, requestID string, approve bool, reason string) (token string, expiresAt time.Time, err error) {
	_, token, expiresAt, err = e.cfg.tokens.rt.approval.Decide(ctx, approver, requestID, approve, reason)
	return token, expiresAt, err
}

// PendingApprovals lists, a page at a time, the pending requests the
// approver may decide: of the approver's tenant (requests without a tenant
// for an approver without one), approvable by one of the approver's roles,
// not the approver's own; oldest first. cursor is "" for the first page,
// else the next cursor of the page before; limit is at most
// gates.MaxApprovalPage (gates.DefaultApprovalPage when 0). next is "" after
// the last page; a page may be short while next is not.
func (e *Enforcer) PendingApprovals(ctx context.Context, approver middleware.Principal, cursor string, limit int) (page []gates.ApprovalRequest, next string, err error) {
	return e.cfg.tokens.rt.approval.Pending(ctx, approver, cursor, limit)
}

// ApprovalRequest returns one approval request, with the call's arguments,
// to viewer: its requester, or an approver who may decide it (of its tenant,
// holding one of its roles). Anyone else is refused with
// AXAG_APPROVAL_INVALID and learns nothing of the request: reason
// request_not_found for another tenant's request (as for an unknown id),
// not_allowed within the tenant.
func (e *Enforcer) ApprovalRequest(ctx context.Context, viewer middleware.Principal, id string) (gates.ApprovalRequest, error) {
	return e.cfg.tokens.rt.approval.Request(ctx, viewer, id)
}

// CancelApproval cancels a pending approval request; only its requester may.
func (e *Enforcer) CancelApproval(ctx context.Context, requester middleware.Principal, id string) error {
	return e.cfg.tokens.rt.approval.Cancel(ctx, requester, id)
}
