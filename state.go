package axgate

import (
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/middleware"
)

// stateConfig configures the rate-limit, cooldown and idempotency gates:
// what the user set, nothing defaulted.
type stateConfig struct {
	// limiter counts calls for rate limits and cooldowns; nil means a
	// memory limiter made by New.
	limiter gates.Limiter
	// idempotency configures the idempotency gate; zero settings take the
	// gate's defaults (gates.IdempotencyOptions), a nil Store means a
	// memory store made by New.
	idempotency gates.IdempotencyOptions
}

// WithLimiter counts rate limits and cooldowns in l, for example a Redis
// limiter shared by several replicas. The default is memstore.NewLimiter(0):
// one process, idle keys forgotten, at most 100,000 busy keys per tenant.
func WithLimiter(l gates.Limiter) Option {
	return func(c *config) { c.state.limiter = l }
}

// WithIdempotency configures the idempotency gate and where its records live.
//
// The gate looks after the actions the manifest declares idempotent: false.
// Each field and its default are documented on gates.IdempotencyOptions; the
// default Store is memstore.NewIdempotencyStore(0), for one process (pass a
// Redis store, say, for several replicas). New fails on a negative duration
// or quota or an unknown duplicate policy. The non-zero fields of a later
// WithIdempotency replace those of an earlier one.
func WithIdempotency(o gates.IdempotencyOptions) Option {
	return func(c *config) {
		old := &c.state.idempotency
		if o.Store != nil {
			old.Store = o.Store
		}
		if o.Window != 0 {
			old.Window = o.Window
		}
		if o.Lease != 0 {
			old.Lease = o.Lease
		}
		if o.Duplicates != 0 {
			old.Duplicates = o.Duplicates
		}
		if o.DuplicateWindow != 0 {
			old.DuplicateWindow = o.DuplicateWindow
		}
		if o.Quota != 0 {
			old.Quota = o.Quota
		}
	}
}

// rateStages returns the rate-limit and cooldown gate.
func (e *Enforcer) rateStages() ([]middleware.Stage, error) {
	l := e.cfg.state.limiter
	if l == nil {
		l = gate.NewMemoryLimiter(0)
	}
	return []middleware.Stage{gate.RateLimit(l)}, nil
}

// idempotencyStages returns the idempotency gate.
func (e *Enforcer) idempotencyStages() ([]middleware.Stage, error) {
	o := e.cfg.state.idempotency
	if o.Store == nil {
		o.Store = gate.NewMemoryIdempotencyStore(0)
	}
	g, err := gate.NewIdempotency(o)
	if err != nil {
		return nil, err
	}
	return []middleware.Stage{g.Stage()}, nil
}
