package axgate

import (
	"time"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/middleware"
)

// stateConfig configures the rate-limit, cooldown and idempotency gates.
type stateConfig struct {
	// limiter counts calls for rate limits and cooldowns; nil means a
	// gates.MemoryLimiter made by New.
	limiter gates.Limiter
	// idempotency configures the idempotency gate; a nil Store means a
	// gates.MemoryIdempotencyStore made by New.
	idempotency gates.IdempotencyOptions
}

func defaultStateConfig() stateConfig {
	return stateConfig{idempotency: gates.IdempotencyOptions{
		Window:          gates.DefaultIdempotencyWindow,
		Lease:           gates.DefaultIdempotencyLease,
		Duplicates:      gates.DuplicateWarn,
		DuplicateWindow: gates.DefaultDuplicateWindow,
		Quota:           gates.DefaultIdempotencyQuota,
	}}
}

// WithLimiter counts rate limits and cooldowns in l, for example a Redis
// limiter shared by several replicas. The default is a gates.MemoryLimiter:
// one process, idle keys forgotten, at most gates.DefaultMaxKeys busy keys
// per tenant.
func WithLimiter(l gates.Limiter) Option {
	return func(c *config) { c.state.limiter = l }
}

// WithIdempotencyStore keeps idempotency records and recent calls in s, for
// example a Redis store shared by several replicas. The default is a
// gates.MemoryIdempotencyStore for one process, holding at most
// gates.DefaultMaxKeys live records per tenant.
func WithIdempotencyStore(s gates.IdempotencyStore) Option {
	return func(c *config) { c.state.idempotency.Store = s }
}

// WithIdempotencyWindow sets how long the outcome of a call made with an
// idempotency key is kept and replayed: its result, or its refusal once the
// tool ran (default 24h). A zero keeps the default; New fails when it is
// negative.
func WithIdempotencyWindow(window time.Duration) Option {
	return func(c *config) {
		if window != 0 {
			c.state.idempotency.Window = window
		}
	}
}

// WithIdempotencyLease sets how long a call made with an idempotency key
// counts as in flight (default 5m): retries with the key are refused with
// AXGATE_DUPLICATE_IN_FLIGHT meanwhile. It ends early when the call's outcome
// is stored; it only runs out when the process dies mid-call, the outcome
// cannot be stored, or the tool takes longer — then a retry may run the tool
// again, so make it longer than the slowest tool. A zero keeps the default;
// New fails when it is negative.
func WithIdempotencyLease(lease time.Duration) Option {
	return func(c *config) {
		if lease != 0 {
			c.state.idempotency.Lease = lease
		}
	}
}

// WithIdempotencyQuota sets how many live records made with an idempotency
// key one caller (principal and tenant) may hold at once (default 1,000; see
// gates.IdempotencyOptions.Quota). A call with a new key over it is refused
// with 429 AXAG_RATE_LIMITED, reason idempotency_quota, and a retry_after;
// other callers are unaffected. A zero keeps the default; New fails when it
// is negative.
func WithIdempotencyQuota(n int) Option {
	return func(c *config) {
		if n != 0 {
			c.state.idempotency.Quota = n
		}
	}
}

// WithDuplicateCalls says what to do with a repeat, without an idempotency
// key, of the same non-idempotent call (same principal, tenant, intent and
// arguments) within window: gates.DuplicateWarn (the default; the call runs
// and call.Facts.Warnings records it), gates.DuplicateRefuse (409
// AXGATE_DUPLICATE_CALL) or gates.DuplicateIgnore (no lookup). The default
// window is one minute; a zero window keeps it, a negative one fails New.
func WithDuplicateCalls(p gates.DuplicatePolicy, window time.Duration) Option {
	return func(c *config) {
		c.state.idempotency.Duplicates = p
		if window != 0 {
			c.state.idempotency.DuplicateWindow = window
		}
	}
}

// rateStages returns the rate-limit and cooldown gate.
func (e *Enforcer) rateStages() ([]middleware.Stage, error) {
	if e.cfg.state.limiter == nil {
		e.cfg.state.limiter = gates.NewMemoryLimiter(0)
	}
	return []middleware.Stage{gates.RateLimit(e.cfg.state.limiter)}, nil
}

// idempotencyStages returns the idempotency gate.
func (e *Enforcer) idempotencyStages() ([]middleware.Stage, error) {
	o := e.cfg.state.idempotency
	if o.Store == nil {
		o.Store = gates.NewMemoryIdempotencyStore(0)
	}
	g, err := gates.NewIdempotency(o)
	if err != nil {
		return nil, err
	}
	return []middleware.Stage{g.Stage()}, nil
}
