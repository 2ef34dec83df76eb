package axgate

import (
	"context"
	"errors"
	"maps"
	"slices"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/middleware"
)

// policyConfig configures roles, scope, tenant, constraints, preconditions
// and postconditions.
type policyConfig struct {
	access gates.AccessOptions
	pre    map[string]gate.Precondition
	post   map[string]gate.Postcondition
	// allowUnbound builds an enforcer although some conditions of the
	// manifest are bound to nothing; each call records a warning instead.
	allowUnbound bool
	// celCostLimit bounds each evaluation of a CEL expression; 0 means
	// the default, 1,000,000.
	celCostLimit uint64
}

func defaultPolicyConfig() policyConfig {
	return policyConfig{pre: map[string]gate.Precondition{}, post: map[string]gate.Postcondition{}}
}

// WithAccess configures the access gate: which arguments name a user and a
// tenant, and which roles may act on other users' data. Each field, its
// default and what an empty list means are documented on
// gates.AccessOptions; a later WithAccess replaces an earlier one.
func WithAccess(o gates.AccessOptions) Option {
	o.UserArgs = slices.Clone(o.UserArgs)
	o.UserOverrideRoles = slices.Clone(o.UserOverrideRoles)
	o.TenantArgs = slices.Clone(o.TenantArgs)
	return func(c *config) { c.policy.access = o }
}

// PreconditionFailed is the refusal of a precondition check that does not
// hold, with a message of its own: AXAG_PRECONDITION_FAILED (412), reason
// precondition_failed, details.failed_precondition set to name. An empty
// message says "precondition not met: <name>".
func PreconditionFailed(intent, name, message string) *axerr.Error {
	return gate.PreconditionFailed(intent, name, message)
}

// WithPrecondition binds a precondition name of the manifest to a Go check.
//
// The check returns nil when the precondition holds. Any other error refuses
// the call with AXAG_PRECONDITION_FAILED (its text stays out of the refusal;
// return PreconditionFailed for a message of your own, or an *axerr.Error
// of your own (AXGATE_STORE_UNAVAILABLE, say) to answer with that: the
// caller gets a copy, so a package-level error is never changed). The check
// must not change anything: Enforcer.Check runs it too. A later binding of
// the same name replaces an earlier one.
func WithPrecondition(name string, check func(ctx context.Context, call *middleware.Call) error) Option {
	return func(c *config) { c.policy.pre[name] = gate.Precondition{Check: check} }
}

// WithPreconditionExpr binds the manifest's precondition name to a boolean
// CEL expression over args, principal and the action's parameters, compiled
// by New. A precondition whose expression cannot be evaluated (an argument
// it reads is absent) does not hold.
func WithPreconditionExpr(name, expr string) Option {
	return func(c *config) { c.policy.pre[name] = gate.Precondition{Expr: expr} }
}

// WithPostcondition binds the manifest's postcondition name to a Go check of
// the tool's result. An error answers the call with
// AXGATE_POSTCONDITION_FAILED (502) instead of the result; an *axerr.Error
// answers with a copy of itself. It runs only when the tool succeeded.
func WithPostcondition(name string, check func(ctx context.Context, call *middleware.Call, res middleware.Result) error) Option {
	return func(c *config) { c.policy.post[name] = gate.Postcondition{Check: check} }
}

// WithPostconditionExpr binds the manifest's postcondition name to a boolean
// CEL expression over args, principal, the action's parameters and result
// (the tool's result as encoding/json renders it).
func WithPostconditionExpr(name, expr string) Option {
	return func(c *config) { c.policy.post[name] = gate.Postcondition{Expr: expr} }
}

// WithUnboundConditions builds an enforcer although some pre- or postconditions have no check.
//
// By default New refuses, listing them: a condition nobody checks would pass
// open. With this option such a condition is skipped and every call of its
// action records a warning in call.Facts.Warnings (and so in the audit
// record).
func WithUnboundConditions() Option {
	return func(c *config) { c.policy.allowUnbound = true }
}

// WithCELCostLimit sets the cost limit of every CEL expression, constraints and conditions alike.
//
// The limit is in cel-go cost units (default 1,000,000 units: about 200,000 iterations of a simple loop). An
// evaluation that reaches it is refused (412 AXAG_PRECONDITION_FAILED,
// reason constraint_not_evaluable for a constraint), and New refuses an
// expression whose estimated worst-case cost, given the declared maxLength,
// maximum and maxItems of the parameters it reads, exceeds it. 0 keeps the
// default.
func WithCELCostLimit(limit uint64) Option {
	return func(c *config) { c.policy.celCostLimit = limit }
}

// IdentityArgs returns the argument names the access gate reads as naming a user and a tenant.
//
// They are WithAccess's, or their defaults. An adapter that builds
// arguments from more than one place (httpgate: the path and the query
// besides the body) takes these names from everywhere, declared or not, so
// that a handler never acts on a user or tenant the gate did not see. The
// slices are copies.
func (e *Enforcer) IdentityArgs() (user, tenant []string) {
	user, tenant = e.cfg.policy.access.UserArgs, e.cfg.policy.access.TenantArgs
	if user == nil {
		user = gate.DefaultUserArgs
	}
	if tenant == nil {
		tenant = gate.DefaultTenantArgs
	}
	return slices.Clone(user), slices.Clone(tenant)
}

// celLimits are the bounds of CEL evaluation: the cost limit, and the
// argument size limit, which bounds what the manifest leaves unbounded.
func (e *Enforcer) celLimits() gate.CELLimits {
	return gate.CELLimits{CostLimit: e.cfg.policy.celCostLimit, MaxArgBytes: e.cfg.limits.MaxBytes}
}

// accessStages returns the roles, scope and tenant gate.
func (e *Enforcer) accessStages() ([]middleware.Stage, error) {
	return []middleware.Stage{gate.NewAccess(e.m, e.cfg.policy.access).Stage()}, nil
}

// conditionStages returns the constraint and precondition gates.
func (e *Enforcer) conditionStages() ([]middleware.Stage, error) {
	cons, cerr := gate.NewConstraints(e.m, e.celLimits())
	pre, perr := gate.NewPreconditions(e.m, maps.Clone(e.cfg.policy.pre), e.cfg.policy.allowUnbound, e.celLimits())
	if err := errors.Join(cerr, perr); err != nil {
		return nil, err
	}
	return []middleware.Stage{cons.Stage(), pre.Stage()}, nil
}

// postStages returns the postcondition and output-schema checks, which run
// after the tool.
func (e *Enforcer) postStages() ([]middleware.Stage, error) {
	post, err := gate.NewPostconditions(e.m, maps.Clone(e.cfg.policy.post), e.cfg.policy.allowUnbound, e.celLimits())
	if err != nil {
		return nil, err
	}
	post.MaxViolations = e.cfg.maxViolations
	return []middleware.Stage{post.Stage()}, nil
}
