package axgate

import "github.com/axgate/axgate/middleware"

// observeConfig configures tracing, metrics and the audit log.
type observeConfig struct{}

func defaultObserveConfig() observeConfig { return observeConfig{} }

// observeStages returns the stages that wrap the whole chain (tracing,
// metrics, audit).
func (e *Enforcer) observeStages() ([]middleware.Stage, error) { return nil, nil }

// observer returns the observer that hears every stage's outcome, or nil.
func (e *Enforcer) observer() middleware.Observer { return nil }
