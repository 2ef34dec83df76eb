package axgate

import (
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/middleware"
)

// stateConfig configures the rate-limit, cooldown and idempotency gates:
// what the user set, nothing defaulted.
type stateConfig struct {
	// limiter counts calls for rate limits and cooldowns; nil means a
	// gates.MemoryLimiter made by New.
	limiter gates.Limiter
	// idempotency configures the idempotency gate; zero settings take the
	// gate's defaults (gates.IdempotencyOptions), a nil Store means a
	// gates.MemoryIdempotencyStore made by New.
	idempotency gates.IdempotencyOptions
}

// WithLimiter counts rate limits and cooldowns in l, for example a Redis
// limiter shared by several replicas. The default is a gates.MemoryLimiter:
// one process, idle keys forgotten, at most gates.DefaultMaxKeys busy keys
// per tenant.
func WithLimiter(l gates.Limiter) Option {
	return func(c *config) { c.state.limiter = l }
}

// WithIdempotency configures the idempotency gate.
//
// The gate looks after the actions the manifest declares idempotent: false.
// Each field and its default are documented on gates.IdempotencyOptions: a
// zero field keeps the default, and New fails on a negative duration or
// quota or an unknown duplicate policy. It replaces the settings of an
// earlier WithIdempotency, except that a nil Store keeps the store already
// set (WithIdempotencyStore) or the default.
func WithIdempotency(o gates.IdempotencyOptions) Option {
	return func(c *config) {
		if o.Store == nil {
			o.Store = c.state.idempotency.Store
		}
		c.state.idempotency = o
	}
}

// WithIdempotencyStore keeps idempotency records and recent calls in s.
//
// Pass, for example, a Redis store shared by several replicas. The default
// is a gates.MemoryIdempotencyStore for one process, holding at most
// gates.DefaultMaxKeys live records per tenant. It is
// gates.IdempotencyOptions.Store, for short.
func WithIdempotencyStore(s gates.IdempotencyStore) Option {
	return func(c *config) { c.state.idempotency.Store = s }
}

// rateStages returns the rate-limit and cooldown gate.
func (e *Enforcer) rateStages() ([]middleware.Stage, error) {
	l := e.cfg.state.limiter
	if l == nil {
		l = gates.NewMemoryLimiter(0)
	}
	return []middleware.Stage{gates.RateLimit(l)}, nil
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
