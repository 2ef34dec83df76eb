package gate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// Defaults of IdempotencyOptions.
const (
	DefaultIdempotencyWindow = 24 * time.Hour
	DefaultIdempotencyLease  = 5 * time.Minute
	DefaultDuplicateWindow   = time.Minute
	DefaultIdempotencyQuota  = 1000
)

// Idempotency is the gate for actions the manifest declares `idempotent: false`.
//
// It is safe for concurrent use.
//
// With an idempotency key (call.Credentials.IdempotencyKey, the HTTP
// Idempotency-Key header; IETF draft semantics), scoped to the principal, the
// tenant and the intent: the first call claims the key and runs; a retry with
// the same arguments (compared by their JCS SHA-256) gets the stored outcome
// without the tool running again (call.Facts.Replayed); a retry with other
// arguments is refused with AXGATE_IDEMPOTENCY_KEY_REUSED (422); a retry while
// the first call still runs is refused with AXGATE_DUPLICATE_IN_FLIGHT (409).
//
// The outcome is stored once the tool has run (call.Executed), whatever it
// was: the result, or the refusal — the tool's error (AXGATE_TOOL_FAILED), a
// postcondition that failed. As the IETF draft has it, the response is
// replayed, errors included: a non-idempotent tool that failed may have done
// part of its work (charged a card, then timed out), and running it again
// under the same key could do it twice. The replayed refusal keeps its code,
// message and details, adds "replayed": true and the key, and says to send a
// new key to try again. A call refused before its tool ran (a token spent
// meanwhile, a rate limit lost at the commit) releases the key, and a retry
// may run.
//
// Without a key, a repeat of the same call inside the duplicate window is
// handled by the DuplicatePolicy; a call refused before its tool ran is no
// original for a duplicate.
//
// A check-only call (Enforcer.Check) passes without the store being touched:
// the store can only be asked by claiming.
//
// The gate tells a call refused before its tool ran from one whose tool
// failed by call.Executed, which the tool boundary of Enforcer.Wrap sets. In
// a chain of your own, call Call.MarkExecuted right before the tool runs;
// otherwise a failed call is taken as never run (its key released), while a
// successful one is always kept.
type Idempotency struct {
	store     IdempotencyStore
	quota     int
	window    time.Duration
	lease     time.Duration
	dup       DuplicatePolicy
	dupWindow time.Duration
}

// withDefaults returns o with each zero setting replaced by its default:
// the one place the defaults of IdempotencyOptions are applied (the root
// package passes zero settings through to here).
func idempotencyDefaults(o IdempotencyOptions) IdempotencyOptions {
	if o.Quota == 0 {
		o.Quota = DefaultIdempotencyQuota
	}
	if o.Window == 0 {
		o.Window = DefaultIdempotencyWindow
	}
	if o.Lease == 0 {
		o.Lease = DefaultIdempotencyLease
	}
	if o.DuplicateWindow == 0 {
		o.DuplicateWindow = DefaultDuplicateWindow
	}
	return o
}

// NewIdempotency returns the idempotency gate, or an error when the options
// are not usable: no store, a negative duration or quota, an unknown
// duplicate policy. Zero settings take their defaults.
func NewIdempotency(o IdempotencyOptions) (*Idempotency, error) {
	if o.Store == nil {
		return nil, errors.New("idempotency: no store")
	}
	o = idempotencyDefaults(o)
	if o.Quota < 0 {
		return nil, errors.New("idempotency: quota must be positive")
	}
	if o.Window < 0 || o.Lease < 0 || o.DuplicateWindow < 0 {
		return nil, errors.New("idempotency: window, lease and duplicate window must be positive")
	}
	if o.Duplicates < DuplicateWarn || o.Duplicates > DuplicateIgnore {
		return nil, fmt.Errorf("idempotency: unknown duplicate policy %d", int(o.Duplicates))
	}
	return &Idempotency{store: o.Store, quota: o.Quota, window: o.Window, lease: o.Lease, dup: o.Duplicates, dupWindow: o.DuplicateWindow}, nil
}

// Stage returns the gate as a chain stage.
func (g *Idempotency) Stage() middleware.Stage {
	return middleware.Stage{Name: StageIdempotency, Interceptor: g.intercept, Applies: nonIdempotent}
}

// nonIdempotent reports whether a is declared not idempotent, the only
// actions the gate looks after (true for a nil action, which it passes on).
func nonIdempotent(a *manifest.Action) bool {
	return a == nil || (a.Idempotent != nil && !*a.Idempotent)
}

func (g *Idempotency) intercept(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
	a := call.Action
	if a == nil || !nonIdempotent(a) || call.CheckOnly() {
		return next.Invoke(ctx, call)
	}
	if key := call.Credentials.IdempotencyKey; key != "" {
		return g.keyed(ctx, call, next, key)
	}
	if g.dup == DuplicateIgnore {
		return next.Invoke(ctx, call)
	}
	return g.unkeyed(ctx, call, next)
}

// keyed handles a call that carries an idempotency key.
func (g *Idempotency) keyed(ctx context.Context, call *middleware.Call, next middleware.Invoker, key string) (middleware.Result, error) {
	intent := call.Intent()
	digest, err := call.ArgsSHA256()
	if err != nil {
		return middleware.Result{}, err
	}
	// The key is the caller's text: hash it so that its length and bytes
	// cannot shape the store key.
	sum := sha256.Sum256([]byte(key))
	skey := StateKey("idem", call.Principal.Tenant, call.Principal.ID, intent, base64.RawURLEncoding.EncodeToString(sum[:]))

	owner := IdempotencyOwner{Tenant: call.Principal.Tenant, Principal: call.Principal.ID, Quota: g.quota}
	rec, claim, err := g.store.Begin(ctx, owner, skey, digest, g.lease)
	if err != nil {
		var qe *QuotaError
		if errors.As(err, &qe) {
			return middleware.Result{}, IdempotencyQuotaExceeded(intent, g.quota, qe.RetryAfter)
		}
		return middleware.Result{}, StoreUnavailable(intent, "the idempotency store", err)
	}
	if claim == "" {
		return g.held(call, rec, key, digest)
	}

	finished := false
	defer func() {
		if !finished {
			// A panic after the claim. Before the tool ran: forget the
			// claim so a retry may run. After: the tool may have done its
			// work, so a retry gets a refusal rather than a second run.
			if !call.Executed() {
				g.release(ctx, call, owner, skey, claim)
				return
			}
			e := axerr.New(axerr.CodeInternal, "the call failed unexpectedly after the tool ran").WithIntent(intent)
			g.complete(ctx, call, owner, skey, claim, IdempotencyOutcome{Refusal: envelopeJSON(e)})
		}
	}()
	res, err := next.Invoke(ctx, call)
	finished = true
	if err != nil && !call.Executed() {
		// Refused before the tool ran: there is no outcome to keep, and a
		// retry may run.
		g.release(ctx, call, owner, skey, claim)
		return res, err
	}
	// The tool has run (a result counts as such even in a chain that does
	// not mark calls executed): from here on the caller gets its outcome
	// whatever happens to the record, and a retry with the key gets the
	// same.
	var out IdempotencyOutcome
	if err != nil {
		ae, ok := axerr.As(err)
		if !ok {
			// Outside the standard chain, a tool's plain error: the tool
			// boundary would have answered the same.
			ae = axerr.New(axerr.CodeToolFailed, "the tool failed to complete the call").WithIntent(intent)
		}
		out.Refusal = envelopeJSON(ae)
	} else if raw, merr := json.Marshal(res.Value); merr == nil {
		out.Result = raw
	} else {
		// The result cannot be replayed; refuse the retries rather than
		// run the tool again.
		e := axerr.New(axerr.CodeInternal, "the first call with this idempotency key ran, but its result could not be kept for a retry").WithIntent(intent)
		out = IdempotencyOutcome{Refusal: envelopeJSON(e)}
		call.Facts.Warnings = append(call.Facts.Warnings, "idempotency: the result cannot be stored as JSON; a retry with this key will be refused")
	}
	g.complete(ctx, call, owner, skey, claim, out)
	return res, err
}

// held answers a call whose key another call holds: the stored outcome, or
// a refusal.
func (g *Idempotency) held(call *middleware.Call, rec *IdempotencyRecord, key, digest string) (middleware.Result, error) {
	intent := call.Intent()
	if rec == nil {
		return middleware.Result{}, StoreUnavailable(intent, "the idempotency store", errors.New("key held but no record returned"))
	}
	if rec.ArgsSHA256 != digest {
		return middleware.Result{}, axerr.New(axerr.CodeIdempotencyKeyReused, "this idempotency key was already used for a call with other arguments").
			WithIntent(intent).
			WithSuggestion("Send a new idempotency key with these arguments, or the original arguments to get the original result.").
			With("idempotency_key", key).
			With("args_sha256", digest)
	}
	switch rec.State {
	case IdempotencyDone:
		if len(rec.Refusal) > 0 {
			e, err := replayedRefusal(rec.Refusal, key)
			if err != nil {
				return middleware.Result{}, StoreUnavailable(intent, "the idempotency store", err)
			}
			call.Facts.Replayed = true
			return middleware.Result{}, e
		}
		call.Facts.Replayed = true
		return middleware.Result{Value: json.RawMessage(rec.Result)}, nil
	case IdempotencyInFlight:
		e := axerr.New(axerr.CodeDuplicateInFlight, "the first call with this idempotency key is still running").
			WithIntent(intent).
			WithSuggestion("Wait for it to finish, then call again with the same key and arguments to get its result.").
			With("idempotency_key", key)
		e.RetryAfter = time.Second
		return middleware.Result{}, e
	}
	return middleware.Result{}, StoreUnavailable(intent, "the idempotency store", fmt.Errorf("record in unknown state %q", rec.State))
}

// unkeyed detects a repeat of a call that carries no idempotency key.
func (g *Idempotency) unkeyed(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
	intent := call.Intent()
	digest, err := call.ArgsSHA256()
	if err != nil {
		return middleware.Result{}, err
	}
	skey := StateKey("dup", call.Principal.Tenant, call.Principal.ID, intent, digest)
	// The markers are charged to the caller, under a quota of their own
	// (an owner apart from the caller's keyed records): one caller's calls
	// without a key can neither fill its tenant's share and refuse the
	// others, nor use up its own quota of keys.
	owner := IdempotencyOwner{Tenant: call.Principal.Tenant, Principal: dupMarkerOwner + call.Principal.ID, Quota: g.quota}
	_, claim, err := g.store.Begin(ctx, owner, skey, digest, g.dupWindow)
	if err != nil {
		var qe *QuotaError
		if errors.As(err, &qe) {
			return middleware.Result{}, DuplicateMarkersExceeded(intent, g.quota, qe.RetryAfter)
		}
		return middleware.Result{}, StoreUnavailable(intent, "the idempotency store", err)
	}
	if claim == "" {
		if g.dup == DuplicateRefuse {
			return middleware.Result{}, DuplicateCall(intent, digest, g.dupWindow)
		}
		call.Facts.Warnings = append(call.Facts.Warnings, fmt.Sprintf("duplicate call: %s was called with the same arguments within the last %s", intent, g.dupWindow))
		return next.Invoke(ctx, call)
	}
	// A call refused before its tool ran (or that panicked before it) is no
	// original for a duplicate. One whose tool ran is, whatever it returned:
	// the tool may have done its work.
	finished := false
	defer func() {
		if !finished && !call.Executed() {
			g.release(ctx, call, owner, skey, claim)
		}
	}()
	res, err := next.Invoke(ctx, call)
	finished = true
	if err != nil && !call.Executed() {
		g.release(ctx, call, owner, skey, claim)
	}
	return res, err
}

// release forgets this call's claim on skey, so that a retry may run.
func (g *Idempotency) release(ctx context.Context, call *middleware.Call, owner IdempotencyOwner, skey, claim string) {
	err := g.store.Release(context.WithoutCancel(ctx), owner, skey, claim)
	switch {
	case err == nil, errors.Is(err, ErrNotFound):
		// Released, or the lease ended first: nothing is held either way.
	default:
		call.Facts.Warnings = append(call.Facts.Warnings, "idempotency: the claim could not be released; a retry will be refused until the lease ends")
	}
}

// complete stores the outcome of the call that holds claim on skey.
func (g *Idempotency) complete(ctx context.Context, call *middleware.Call, owner IdempotencyOwner, skey, claim string, out IdempotencyOutcome) {
	err := g.store.Complete(context.WithoutCancel(ctx), owner, skey, claim, out, g.window)
	switch {
	case err == nil:
	case errors.Is(err, ErrNotFound):
		call.Facts.Warnings = append(call.Facts.Warnings, "idempotency: the call outlived its lease, so its outcome was not stored; a retry with this key may run the tool again (make the lease longer than the tool)")
	default:
		call.Facts.Warnings = append(call.Facts.Warnings, "idempotency: the outcome could not be stored; a retry with this key will be refused until the lease ends, then run again")
	}
}

// envelopeJSON renders a refusal as its AXAG envelope, as the caller sees
// it; this is what a record keeps.
func envelopeJSON(e *axerr.Error) json.RawMessage {
	raw, err := json.Marshal(e.Envelope())
	if err != nil {
		// A detail that does not render (a channel, say): keep the code and
		// message, which always do.
		raw, _ = json.Marshal(axerr.New(e.Code, e.Message).WithIntent(e.Intent).Envelope())
	}
	return raw
}

// Details the envelope derives from the code or the error's own fields;
// replayedRefusal rebuilds those fields instead of copying them as details.
var derivedDetails = []string{"intent", "suggestion", "violations", "retry_after", "gate", "retryable", "agent_action"}

// replayedRefusal rebuilds the stored refusal of the first call with key:
// the same code, message, intent, violations and details, marked replayed.
// It names this gate, which answered without the tool running.
func replayedRefusal(envelope json.RawMessage, key string) (*axerr.Error, error) {
	var env struct {
		Error struct {
			Code    axerr.Code      `json:"code"`
			Message string          `json:"message"`
			Details json.RawMessage `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(envelope, &env); err != nil || env.Error.Code == "" {
		return nil, fmt.Errorf("stored refusal is not an AXAG envelope: %v", err)
	}
	var fields struct {
		Intent     string            `json:"intent"`
		Violations []axerr.Violation `json:"violations"`
		Gate       string            `json:"gate"`
	}
	var details map[string]any
	if len(env.Error.Details) > 0 {
		if err := json.Unmarshal(env.Error.Details, &fields); err != nil {
			return nil, fmt.Errorf("stored refusal has malformed details: %w", err)
		}
		if err := json.Unmarshal(env.Error.Details, &details); err != nil {
			return nil, fmt.Errorf("stored refusal has malformed details: %w", err)
		}
	}
	e := axerr.New(env.Error.Code, env.Error.Message).WithIntent(fields.Intent)
	e.Violations = fields.Violations
	for _, k := range derivedDetails {
		delete(details, k)
	}
	e.Details = details
	if fields.Gate != "" {
		e.With("first_gate", fields.Gate)
	}
	e.Gate = StageIdempotency
	e.Suggestion = "This is the stored outcome of the first call with this idempotency key: the tool ran once and will not run again for this key. To try again, send a new idempotency key."
	return e.With("replayed", true).With("idempotency_key", key), nil
}

// DuplicateCall is the refusal of a repeat, without an idempotency key, of a
// non-idempotent call made within window: 409 AXGATE_DUPLICATE_CALL.
func DuplicateCall(intent, argsSHA256 string, window time.Duration) *axerr.Error {
	return axerr.Newf(axerr.CodeDuplicateCall, "%s was just called with the same arguments, and it is not idempotent", intent).
		WithIntent(intent).
		WithSuggestion("Do not repeat the call unless the user asks; to make it again on purpose, send it with a new idempotency key.").
		With("args_sha256", argsSHA256).
		With("window_seconds", seconds(window))
}

// dupMarkerOwner prefixes the principal of the owner charged with a
// caller's duplicate markers: a NUL no authenticated principal id carries
// keeps it apart from every caller's own records.
const dupMarkerOwner = "\x00dup\x00"

// DuplicateMarkersExceeded is the refusal of a call without an idempotency
// key from a caller whose calls without a key inside the duplicate window
// number quota already: 429 AXAG_RATE_LIMITED, reason idempotency_quota,
// retry_after when its oldest marker expires.
func DuplicateMarkersExceeded(intent string, quota int, retryAfter time.Duration) *axerr.Error {
	e := IdempotencyQuotaExceeded(intent, quota, retryAfter)
	e.Message = fmt.Sprintf("this caller made %d distinct calls without an idempotency key inside the duplicate window, as many as allowed", quota)
	e.Suggestion = fmt.Sprintf("Wait %d seconds for an older call to leave the duplicate window, then call again.", e.RetryAfterSeconds())
	return e
}

// IdempotencyQuotaExceeded is the refusal of a call with a new idempotency
// key from a caller that holds quota live records: 429 AXAG_RATE_LIMITED,
// reason idempotency_quota, retry_after when its oldest record expires.
func IdempotencyQuotaExceeded(intent string, quota int, retryAfter time.Duration) *axerr.Error {
	e := axerr.Newf(axerr.CodeRateLimited, "this caller holds %d live idempotency keys, as many as allowed", quota).
		WithIntent(intent).
		WithReason(reasons.IdempotencyQuota).
		With("quota", quota)
	e.RetryAfter = max(retryAfter, time.Second)
	e.Gate = StageIdempotency
	e.Suggestion = fmt.Sprintf("Reuse an idempotency key only to retry the same call; wait %d seconds for an older key to expire, then call again.", e.RetryAfterSeconds())
	return e
}

// idempotencySweepEvery is how often the memory store forgets expired
// records, at the latest.
const idempotencySweepEvery = time.Minute

// MemoryIdempotencyStore is an IdempotencyStore for one process.
//
// Records expire after their ttl and are swept as new keys arrive. Its
// capacity is kept per tenant: each tenant (by IdempotencyOwner.Tenant; ""
// for callers without one) holds at most maxKeys live records, so one tenant
// filling its share never refuses another tenant's calls; within a tenant,
// each principal holds at most its quota of records made with a key. It is
// safe for concurrent use.
type MemoryIdempotencyStore struct {
	mu      sync.Mutex
	records map[string]*memoryRecord
	// tenants counts the records of each tenant, expired ones not yet
	// swept included.
	tenants map[string]int
	// owners holds the records charged to each owner's quota.
	owners    map[memoryOwner]*ownerRecords
	maxKeys   int
	lastSweep time.Time
	claims    uint64
	now       func() time.Time
}

// memoryOwner is the map key of an owner: its quota is not part of it.
type memoryOwner struct{ tenant, principal string }

// ownerRecords are the keys of the records charged to one owner.
type ownerRecords struct {
	keys map[string]struct{}
	// soonest is no later than the expiry of any of them: until then none
	// has expired, and a refusal needs no look at them.
	soonest time.Time
}

type memoryRecord struct {
	rec     IdempotencyRecord
	claim   string
	expires time.Time
	owner   memoryOwner
	// charged says whether the record counts against its owner's quota.
	charged bool
}

// NewMemoryIdempotencyStore returns a store that holds at most maxKeys live
// records per tenant (DefaultMaxKeys when maxKeys ≤ 0). When all of a
// tenant's are live, Begin of a new key of that tenant returns ErrStoreFull:
// the call is refused, never run unrecorded; other tenants are unaffected.
func NewMemoryIdempotencyStore(maxKeys int) *MemoryIdempotencyStore {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	return &MemoryIdempotencyStore{
		records: make(map[string]*memoryRecord),
		tenants: make(map[string]int),
		owners:  make(map[memoryOwner]*ownerRecords),
		maxKeys: maxKeys,
		now:     time.Now,
	}
}

// Begin claims key (see IdempotencyStore). The returned record is a copy.
// The quota is checked and charged under the store's lock, with the claim.
func (s *MemoryIdempotencyStore) Begin(ctx context.Context, owner IdempotencyOwner, key, argsSHA256 string, ttl time.Duration) (*IdempotencyRecord, string, error) {
	if ttl <= 0 {
		return nil, "", fmt.Errorf("ttl %s is not positive", ttl)
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	now := s.now()
	o := memoryOwner{owner.Tenant, owner.Principal}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[key]; ok {
		if now.Before(r.expires) {
			cp := r.rec
			cp.Result = bytes.Clone(r.rec.Result)
			cp.Refusal = bytes.Clone(r.rec.Refusal)
			return &cp, "", nil
		}
		s.drop(key, r)
	}
	if owner.Quota > 0 {
		if or := s.owners[o]; or != nil && len(or.keys) >= owner.Quota {
			if !now.Before(or.soonest) {
				// Some may have expired: forget those (at most Quota
				// records to look at), and learn when the next one does.
				var soonest time.Time
				for k := range or.keys {
					r := s.records[k]
					if !now.Before(r.expires) {
						s.drop(k, r)
					} else if soonest.IsZero() || r.expires.Before(soonest) {
						soonest = r.expires
					}
				}
				or.soonest = soonest
			}
			if len(or.keys) >= owner.Quota {
				return nil, "", &QuotaError{RetryAfter: max(or.soonest.Sub(now), time.Millisecond)}
			}
		}
	}
	if sweepDue(now, s.lastSweep, idempotencySweepEvery, s.tenants[o.tenant] >= s.maxKeys) {
		s.sweep(now)
	}
	if s.tenants[o.tenant] >= s.maxKeys {
		return nil, "", ErrStoreFull
	}
	// Claims only need to differ within this store: a counter does.
	s.claims++
	claim := strconv.FormatUint(s.claims, 36)
	r := &memoryRecord{rec: IdempotencyRecord{ArgsSHA256: argsSHA256, State: IdempotencyInFlight}, claim: claim, expires: now.Add(ttl), owner: o, charged: owner.Quota > 0}
	s.records[key] = r
	s.tenants[o.tenant]++
	if r.charged {
		or := s.owners[o]
		if or == nil {
			or = &ownerRecords{keys: make(map[string]struct{}), soonest: r.expires}
			s.owners[o] = or
		}
		or.keys[key] = struct{}{}
		if r.expires.Before(or.soonest) {
			or.soonest = r.expires
		}
	}
	return nil, claim, nil
}

// Complete stores the outcome of the call that holds claim on key. It
// returns ErrNotFound when the claim has expired or was released, or another
// call holds the key now.
func (s *MemoryIdempotencyStore) Complete(ctx context.Context, _ IdempotencyOwner, key, claim string, out IdempotencyOutcome, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("ttl %s is not positive", ttl)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.held(key, claim, now)
	if r == nil {
		return ErrNotFound
	}
	r.rec.State = IdempotencyDone
	r.rec.Result = bytes.Clone(out.Result)
	r.rec.Refusal = bytes.Clone(out.Refusal)
	r.expires = now.Add(ttl)
	return nil
}

// Release forgets key while claim holds it in flight; otherwise it returns
// ErrNotFound and changes nothing.
func (s *MemoryIdempotencyStore) Release(ctx context.Context, _ IdempotencyOwner, key, claim string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.held(key, claim, now)
	if r == nil || r.rec.State != IdempotencyInFlight {
		return ErrNotFound
	}
	s.drop(key, r)
	return nil
}

// held returns the live record of key when claim holds it. Call with s.mu
// held.
func (s *MemoryIdempotencyStore) held(key, claim string, now time.Time) *memoryRecord {
	r, ok := s.records[key]
	if !ok || claim == "" || r.claim != claim || !now.Before(r.expires) {
		return nil
	}
	return r
}

// drop forgets the record r of key and uncharges its tenant and owner. Call
// with s.mu held.
func (s *MemoryIdempotencyStore) drop(key string, r *memoryRecord) {
	delete(s.records, key)
	if n := s.tenants[r.owner.tenant] - 1; n > 0 {
		s.tenants[r.owner.tenant] = n
	} else {
		delete(s.tenants, r.owner.tenant)
	}
	if r.charged {
		or := s.owners[r.owner]
		delete(or.keys, key)
		if len(or.keys) == 0 {
			delete(s.owners, r.owner)
		}
	}
}

// Len returns how many records the store holds now (expired ones not yet
// swept included).
func (s *MemoryIdempotencyStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

func (s *MemoryIdempotencyStore) sweep(now time.Time) {
	for k, r := range s.records {
		if !now.Before(r.expires) {
			s.drop(k, r)
		}
	}
	s.lastSweep = now
}
