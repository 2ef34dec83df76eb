package axgate

import "github.com/axgate/axgate/middleware"

// policyConfig configures roles, scope, tenant, constraints, preconditions,
// rate limits, idempotency and postconditions.
type policyConfig struct{}

func defaultPolicyConfig() policyConfig { return policyConfig{} }

// accessStages returns the roles, scope and tenant gates.
func (e *Enforcer) accessStages() ([]middleware.Stage, error) { return nil, nil }

// conditionStages returns the constraint and precondition gates.
func (e *Enforcer) conditionStages() ([]middleware.Stage, error) { return nil, nil }

// postStages returns the postcondition and output-schema checks, which run
// after the tool.
func (e *Enforcer) postStages() ([]middleware.Stage, error) { return nil, nil }
