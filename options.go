package axgate

import "github.com/axgate/axgate/middleware"

// Option configures an Enforcer.
type Option func(*config)

// config holds the options: only what the user set, never what New built
// or defaulted (that lives on the Enforcer). Each group of gates keeps its
// own settings in its own struct, declared beside its gates.
type config struct {
	limits             middleware.Limits
	allowUnknownParams bool
	maxViolations      int
	editPre            func([]middleware.Stage) []middleware.Stage

	tokens  tokenConfig
	policy  policyConfig
	state   stateConfig
	observe observeConfig
	shadow  *ShadowOptions
}

func defaultConfig() config {
	return config{policy: defaultPolicyConfig()}
}

// WithLimits bounds the arguments of every call; a zero field keeps its default.
//
// MaxBytes is the size in bytes (default 1 MiB; over it → 413
// AXGATE_PAYLOAD_TOO_LARGE), MaxDepth the nesting depth (default 64) and
// MaxMembers the members of any one object (default 1,000; over it → 400
// AXGATE_INVALID_ARGUMENTS, reason too_many_members, before the arguments
// are decoded) and MaxItems the items of any one array (default 10,000;
// over it → 400 AXGATE_INVALID_ARGUMENTS, reason too_many_items, also
// before decoding).
func WithLimits(l middleware.Limits) Option {
	return func(c *config) { c.limits = l }
}

// WithMaxViolations sets how many violations a refusal (and a Validation API answer) lists.
//
// They are the first n in path order, the others only counted, in
// details.violations_omitted (errors_omitted in the Validation API). The
// default is axerr.DefaultMaxViolations (20); n below 1 is taken as 1. The
// cap bounds the work as well as the answer: violations past it are counted,
// never built, so 90,000 unknown keys cost a count, not 90,000 entries.
func WithMaxViolations(n int) Option {
	return func(c *config) { c.maxViolations = max(n, 1) }
}

// WithUnknownParams accepts arguments the manifest does not declare. By
// default they are refused with AXGATE_UNKNOWN_PARAM so that a misspelled
// argument is never silently ignored.
func WithUnknownParams() Option { return func(c *config) { c.allowUnknownParams = true } }

// WithPreExecution edits the standard chain's pre-execution stages (intent … idempotency).
//
// The edit runs before the enforcer is built; it may reorder them, drop
// one, or add your own middleware.Stage. The commit stage, the
// postconditions and the tool always follow. A stage whose Interceptor is
// not one of the standard ones runs for every call, whatever its Applies
// says: wrap a standard gate in code of your own and your code sees every
// call, not only those of the actions the gate had something to check for.
func WithPreExecution(edit func(std []middleware.Stage) []middleware.Stage) Option {
	return func(c *config) { c.editPre = edit }
}
