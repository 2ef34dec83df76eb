package gates

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// StageIdempotency is the name of the idempotency stage.
const StageIdempotency = "idempotency"

// DuplicatePolicy says what the idempotency gate does with a repeat of a
// non-idempotent call that carries no idempotency key.
type DuplicatePolicy int

const (
	// DuplicateWarn lets the repeat run and records a warning in
	// call.Facts.Warnings (for the audit log and the trace). The default.
	DuplicateWarn DuplicatePolicy = iota
	// DuplicateRefuse refuses the repeat with AXGATE_DUPLICATE_CALL (409).
	DuplicateRefuse
	// DuplicateIgnore does not look for repeats (no store round trip).
	DuplicateIgnore
)

// String returns "warn", "refuse" or "ignore".
func (p DuplicatePolicy) String() string {
	switch p {
	case DuplicateWarn:
		return "warn"
	case DuplicateRefuse:
		return "refuse"
	case DuplicateIgnore:
		return "ignore"
	}
	return fmt.Sprintf("DuplicatePolicy(%d)", int(p))
}

// Defaults of IdempotencyOptions.
const (
	DefaultIdempotencyWindow = 24 * time.Hour
	DefaultIdempotencyLease  = 5 * time.Minute
	DefaultDuplicateWindow   = time.Minute
)

// IdempotencyOptions configure the idempotency gate. Zero durations take the
// defaults.
type IdempotencyOptions struct {
	// Store keeps the records. Required.
	Store IdempotencyStore
	// Window is how long the result of a call made with an idempotency key
	// is kept and replayed (default 24h).
	Window time.Duration
	// Lease is how long a call with a key counts as in flight: a retry with
	// the same key inside it gets 409 AXGATE_DUPLICATE_IN_FLIGHT. It only
	// matters when the process dies mid-call or cannot store the result;
	// make it longer than your slowest tool (default 5m).
	Lease time.Duration
	// Duplicates says what to do with a repeat, without a key, of the same
	// call (principal, tenant, intent, arguments) inside DuplicateWindow.
	Duplicates DuplicatePolicy
	// DuplicateWindow is how long a call without a key is remembered
	// (default 1m).
	DuplicateWindow time.Duration
}

// Idempotency is the gate for actions the manifest declares
// `idempotent: false`. It is safe for concurrent use.
//
// With an idempotency key (call.Credentials.IdempotencyKey, the HTTP
// Idempotency-Key header; IETF draft semantics), scoped to the principal, the
// tenant and the intent: the first call claims the key and runs; a retry with
// the same arguments (compared by their JCS SHA-256) gets the stored result
// without the tool running again (call.Facts.Replayed); a retry with other
// arguments is refused with AXGATE_IDEMPOTENCY_KEY_REUSED (422); a retry while
// the first call still runs is refused with AXGATE_DUPLICATE_IN_FLIGHT (409).
// When the call fails, at the tool or at any stage after this one (a token
// spent meanwhile, a rate limit lost at the commit), the key is released so
// that a retry may run.
//
// Without a key, a repeat of the same call inside the duplicate window is
// handled by the DuplicatePolicy.
//
// A check-only call (Enforcer.Check) passes without the store being touched:
// the store can only be asked by claiming.
type Idempotency struct {
	store     IdempotencyStore
	window    time.Duration
	lease     time.Duration
	dup       DuplicatePolicy
	dupWindow time.Duration
}

// NewIdempotency returns the idempotency gate, or an error when the options
// are not usable.
func NewIdempotency(o IdempotencyOptions) (*Idempotency, error) {
	if o.Store == nil {
		return nil, errors.New("idempotency: no store")
	}
	g := &Idempotency{store: o.Store, window: o.Window, lease: o.Lease, dup: o.Duplicates, dupWindow: o.DuplicateWindow}
	if g.window == 0 {
		g.window = DefaultIdempotencyWindow
	}
	if g.lease == 0 {
		g.lease = DefaultIdempotencyLease
	}
	if g.dupWindow == 0 {
		g.dupWindow = DefaultDuplicateWindow
	}
	if g.window < 0 || g.lease < 0 || g.dupWindow < 0 {
		return nil, errors.New("idempotency: window, lease and duplicate window must be positive")
	}
	if g.dup < DuplicateWarn || g.dup > DuplicateIgnore {
		return nil, fmt.Errorf("idempotency: unknown duplicate policy %d", int(g.dup))
	}
	return g, nil
}

// Stage returns the gate as a chain stage.
func (g *Idempotency) Stage() middleware.Stage {
	return middleware.Stage{Name: StageIdempotency, Interceptor: g.intercept}
}

func (g *Idempotency) intercept(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
	a := call.Action
	if a == nil || a.Idempotent == nil || *a.Idempotent || call.CheckOnly() {
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

	rec, claimed, err := g.store.Begin(ctx, skey, digest, g.lease)
	if err != nil {
		return middleware.Result{}, StoreUnavailable(intent, "the idempotency store", err)
	}
	if !claimed {
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

	done := false
	defer func() {
		if !done {
			// The call failed (or panicked) after the claim: forget it so a
			// retry may run.
			g.release(ctx, call, skey)
		}
	}()
	res, err := next.Invoke(ctx, call)
	if err != nil {
		return res, err
	}
	done = true
	// The tool has run: from here on the caller gets its result whatever
	// happens to the record. A record that cannot be stored stays in flight
	// until the lease ends, so that a retry is refused rather than run twice.
	raw, err := json.Marshal(res.Value)
	if err != nil {
		call.Facts.Warnings = append(call.Facts.Warnings, "idempotency: the result cannot be stored as JSON; a retry with this key will be refused until the lease ends, then run again")
		return res, nil
	}
	if err := g.store.Complete(context.WithoutCancel(ctx), skey, raw, g.window); err != nil {
		call.Facts.Warnings = append(call.Facts.Warnings, "idempotency: the result could not be stored; a retry with this key will be refused until the lease ends, then run again")
	}
	return res, nil
}

// unkeyed detects a repeat of a call that carries no idempotency key.
func (g *Idempotency) unkeyed(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
	intent := call.Intent()
	digest, err := call.ArgsSHA256()
	if err != nil {
		return middleware.Result{}, err
	}
	skey := StateKey("dup", call.Principal.Tenant, call.Principal.ID, intent, digest)
	_, claimed, err := g.store.Begin(ctx, skey, digest, g.dupWindow)
	if err != nil {
		return middleware.Result{}, StoreUnavailable(intent, "the idempotency store", err)
	}
	if !claimed {
		if g.dup == DuplicateRefuse {
			return middleware.Result{}, DuplicateCall(intent, digest, g.dupWindow)
		}
		call.Facts.Warnings = append(call.Facts.Warnings, fmt.Sprintf("duplicate call: %s was called with the same arguments within the last %s", intent, g.dupWindow))
		return next.Invoke(ctx, call)
	}
	done := false
	defer func() {
		if !done {
			// A call that failed is no original for a duplicate.
			g.release(ctx, call, skey)
		}
	}()
	res, err := next.Invoke(ctx, call)
	done = err == nil
	return res, err
}

func (g *Idempotency) release(ctx context.Context, call *middleware.Call, skey string) {
	if err := g.store.Release(context.WithoutCancel(ctx), skey); err != nil {
		call.Facts.Warnings = append(call.Facts.Warnings, "idempotency: the claim could not be released; a retry will be refused until the lease ends")
	}
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

// idempotencySweepEvery is how often the memory store forgets expired
// records, at the latest.
const idempotencySweepEvery = time.Minute

// MemoryIdempotencyStore is an IdempotencyStore for one process. Records
// expire after their ttl and are swept as new keys arrive; at most maxKeys
// live records are held. It is safe for concurrent use.
type MemoryIdempotencyStore struct {
	mu        sync.Mutex
	records   map[string]*memoryRecord
	maxKeys   int
	lastSweep time.Time
	now       func() time.Time
}

type memoryRecord struct {
	rec     IdempotencyRecord
	expires time.Time
}

// NewMemoryIdempotencyStore returns a store that holds at most maxKeys live
// records (DefaultMaxKeys when maxKeys ≤ 0). When all are live, Begin of a
// new key returns ErrStoreFull: the call is refused, never run unrecorded.
func NewMemoryIdempotencyStore(maxKeys int) *MemoryIdempotencyStore {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	return &MemoryIdempotencyStore{records: make(map[string]*memoryRecord), maxKeys: maxKeys, now: time.Now}
}

// Begin claims key (see IdempotencyStore). The returned record is a copy.
func (s *MemoryIdempotencyStore) Begin(ctx context.Context, key, argsSHA256 string, ttl time.Duration) (*IdempotencyRecord, bool, error) {
	if ttl <= 0 {
		return nil, false, fmt.Errorf("ttl %s is not positive", ttl)
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[key]; ok {
		if now.Before(r.expires) {
			cp := r.rec
			cp.Result = bytes.Clone(r.rec.Result)
			return &cp, false, nil
		}
		delete(s.records, key)
	}
	if since := now.Sub(s.lastSweep); since >= idempotencySweepEvery || (len(s.records) >= s.maxKeys && since >= sweepFullEvery) {
		s.sweep(now)
	}
	if len(s.records) >= s.maxKeys {
		return nil, false, ErrStoreFull
	}
	s.records[key] = &memoryRecord{rec: IdempotencyRecord{ArgsSHA256: argsSHA256, State: IdempotencyInFlight}, expires: now.Add(ttl)}
	return nil, true, nil
}

// Complete stores the result of the call that claimed key. It returns
// ErrNotFound when the claim has expired or was released.
func (s *MemoryIdempotencyStore) Complete(ctx context.Context, key string, result json.RawMessage, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("ttl %s is not positive", ttl)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[key]
	if !ok || !now.Before(r.expires) {
		return ErrNotFound
	}
	r.rec.State = IdempotencyDone
	r.rec.Result = bytes.Clone(result)
	r.expires = now.Add(ttl)
	return nil
}

// Release forgets key; releasing a key not held is not an error.
func (s *MemoryIdempotencyStore) Release(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.records, key)
	s.mu.Unlock()
	return nil
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
			delete(s.records, k)
		}
	}
	s.lastSweep = now
}
