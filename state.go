package axgate

import "github.com/axgate/axgate/middleware"

// stateConfig configures the rate-limit, cooldown and idempotency gates.
type stateConfig struct{}

func defaultStateConfig() stateConfig { return stateConfig{} }

// rateStages returns the rate-limit and cooldown gate.
func (e *Enforcer) rateStages() ([]middleware.Stage, error) { return nil, nil }

// idempotencyStages returns the idempotency gate.
func (e *Enforcer) idempotencyStages() ([]middleware.Stage, error) { return nil, nil }
