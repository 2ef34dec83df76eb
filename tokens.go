package axgate

import "github.com/axgate/axgate/middleware"

// tokenConfig configures the confirmation and approval gates.
type tokenConfig struct{}

func defaultTokenConfig() tokenConfig { return tokenConfig{} }

// tokenStages returns the confirmation and approval gates.
func (e *Enforcer) tokenStages() ([]middleware.Stage, error) { return nil, nil }
