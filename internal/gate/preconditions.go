package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// Checker checks a precondition of a call.
//
// It returns nil when the precondition holds. An *axerr.Error is the
// checker's own answer (a checker whose own store failed returns
// StoreUnavailable): the caller gets a copy, with the action's intent when it
// names none and, for AXAG_PRECONDITION_FAILED, the precondition's name and
// suggestion when it lacks them, so a package-level error may be returned
// safely. Any other error means the precondition does not hold, and its text
// stays in the refusal's cause, for logs, never shown to the caller. Use
// PreconditionFailed to give the caller a message of your own.
//
// A checker must not change anything: Enforcer.Check runs it too.
type Checker func(ctx context.Context, call *middleware.Call) error

// Precondition binds a precondition name of the manifest to a check: a Go
// Checker, or a boolean CEL expression over args, principal and the action's
// parameters (see the package's CEL environment). Exactly one is set.
type Precondition struct {
	Check Checker
	Expr  string
}

// Preconditions checks each action's preconditions, in manifest order.
//
// The first that does not hold refuses the call with
// AXAG_PRECONDITION_FAILED.
//
// A precondition expression that cannot be evaluated (an argument it reads
// outside has() is absent, a type does not fit, an error that || or &&
// would absorb, the cost limit, the call's context ended) does not hold:
// the call is refused with reason precondition_not_evaluable. Expressions
// are bounded as constraints are (CELLimits).
type Preconditions struct {
	rules map[*manifest.Action]*preRule
	// producers maps a condition name to the intents whose postconditions
	// produce it, for the refusal's suggestion.
	producers map[string][]string
}

type preRule struct {
	checks []condition[Checker]
	// warnings are recorded on every call when unbound preconditions are
	// allowed.
	warnings []string
}

// NewPreconditions binds every precondition of m.
//
// Unless allowUnbound, a precondition with no binding fails it with an
// *UnboundError listing them all (fail closed); with allowUnbound each
// call of an action with an unbound precondition records a warning in
// call.Facts.Warnings. An expression that does not compile, or whose
// estimated worst-case cost exceeds the limit, fails it with the action's
// path. lim, at most one, bounds evaluation.
func NewPreconditions(m *manifest.Manifest, bound map[string]Precondition, allowUnbound bool, lim ...CELLimits) (*Preconditions, error) {
	bindings := make(map[string]conditionBinding[Checker], len(bound))
	for name, b := range bound {
		bindings[name] = conditionBinding[Checker]{check: b.Check, hasCheck: b.Check != nil, expr: b.Expr}
	}
	g := &Preconditions{rules: map[*manifest.Action]*preRule{}, producers: Producers(m)}
	envs := &celEnvs{limits: celLimitsOf(lim)}
	unbound := map[string][]string{}
	var errs []error
	for _, a := range m.Actions {
		if len(a.Preconditions) == 0 {
			continue
		}
		checks, warnings, bindErrs := bindConditions(preconditionKind, a, a.Preconditions, bindings, envs, unbound)
		errs = append(errs, bindErrs...)
		g.rules[a] = &preRule{checks: checks, warnings: warnings}
	}
	if len(unbound) > 0 && !allowUnbound {
		errs = append(errs, &UnboundError{Kind: "precondition", Names: unbound})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return g, nil
}

// Producers maps each postcondition name of m to the intents of the actions
// that declare it, in manifest order: what to call to make a precondition of
// that name true.
func Producers(m *manifest.Manifest) map[string][]string {
	out := map[string][]string{}
	for _, a := range m.Actions {
		for _, p := range a.Postconditions {
			if !slices.Contains(out[p], a.Intent) {
				out[p] = append(out[p], a.Intent)
			}
		}
	}
	return out
}

// Stage returns the gate as a chain stage.
func (g *Preconditions) Stage() middleware.Stage {
	return checkStage(StagePreconditions, g.Applies, g.Check)
}

// Applies reports whether a declares preconditions (bound or, with unbound
// conditions allowed, warned about on every call).
func (g *Preconditions) Applies(a *manifest.Action) bool {
	_, ok := g.rules[a]
	return ok || a == nil || len(a.Preconditions) > 0
}

// Check runs the preconditions of the call's action in manifest order and
// returns the first refusal, or nil.
func (g *Preconditions) Check(ctx context.Context, call *middleware.Call) error {
	a := call.Action
	if a == nil {
		return unresolvedAction(StagePreconditions)
	}
	r, ok := g.rules[a]
	if !ok {
		if len(a.Preconditions) == 0 {
			return nil
		}
		return axerr.Newf(axerr.CodeInternal, "the preconditions of %s were not bound: the action is not in the enforced manifest", a.Intent).WithIntent(a.Intent)
	}
	if len(r.warnings) > 0 && !call.CheckOnly() {
		call.Facts.Warnings = append(call.Facts.Warnings, r.warnings...)
	}
	var vars *celVars
	for i := range r.checks {
		pc := &r.checks[i]
		if pc.x == nil {
			if err := pc.check(ctx, call); err != nil {
				return conditionRefusal(preconditionKind, a, pc.name, err, preSuggestion(pc.name, g.producers[pc.name]), func() *axerr.Error {
					return g.notMet(a, pc.name)
				})
			}
			continue
		}
		if vars == nil {
			args, err := call.Args()
			if err != nil {
				return err
			}
			vars = getCELVars(args, call)
			defer vars.release()
		}
		switch out, err := pc.x.eval(ctx, vars); out {
		case celHolds:
		case celFails:
			return g.notMet(a, pc.name)
		default:
			return g.notMet(a, pc.name).WithReason(reasons.PreconditionNotEvaluable).WithCause(err)
		}
	}
	return nil
}

// notMet is the gate's refusal for precondition name of a, which does not
// hold: PreconditionFailed with a suggestion of what to call first.
func (g *Preconditions) notMet(a *manifest.Action, name string) *axerr.Error {
	producedBy := g.producers[name]
	e := PreconditionFailed(a.Intent, name, "").WithSuggestion(preSuggestion(name, producedBy))
	if len(producedBy) > 0 {
		e.With("produced_by", slices.Clone(producedBy))
	}
	return e
}

func preSuggestion(name string, producedBy []string) string {
	switch len(producedBy) {
	case 0:
		return fmt.Sprintf("Bring about %q, then call again.", name)
	case 1:
		return fmt.Sprintf("Call %s first (its postconditions produce %q), then call again.", producedBy[0], name)
	}
	return fmt.Sprintf("Call one of %s first (their postconditions produce %q), then call again.", strings.Join(producedBy, ", "), name)
}
