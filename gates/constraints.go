package gates

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// StageConstraints is the name of the relational-constraint stage.
const StageConstraints = "constraints"

// Reasons a constraint or condition refusal gives in details.reason.
const (
	ReasonConstraintFailed         = "constraint_failed"
	ReasonConstraintNotEvaluable   = "constraint_not_evaluable"
	ReasonPreconditionFailed       = "precondition_failed"
	ReasonPreconditionNotEvaluable = "precondition_not_evaluable"
)

// Constraints enforces each action's constraints: named boolean CEL
// expressions over the arguments and the principal, such as
// "check_out > check_in". They are compiled once, by NewConstraints.
//
// An expression that reads an argument the call left out (an optional
// parameter) and therefore cannot be evaluated does not apply to the call: a
// constraint relates values that are there. Any other evaluation error, or
// a result that is not a boolean, refuses the call (fail closed).
type Constraints struct {
	rules map[*manifest.Action][]constraint
}

type constraint struct {
	manifest.Constraint
	x *celExpr
}

// NewConstraints compiles every constraint of m. A constraint that does not
// compile, or is not boolean, fails with its JSON Pointer path; all of them
// are reported at once.
func NewConstraints(m *manifest.Manifest) (*Constraints, error) {
	g := &Constraints{rules: map[*manifest.Action][]constraint{}}
	base := &celEnvs{}
	var errs []error
	for _, a := range m.Actions {
		if len(a.Constraints) == 0 {
			continue
		}
		env, bare, err := base.action(a)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.Pointer, err))
			continue
		}
		cs := make([]constraint, 0, len(a.Constraints))
		for _, c := range a.Constraints {
			x, err := compileCEL(env, bare, c.Expr)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: constraint %q: %w", c.Pointer, c.Name, err))
				continue
			}
			cs = append(cs, constraint{Constraint: c, x: x})
		}
		g.rules[a] = cs
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return g, nil
}

// Stage returns the gate as a chain stage.
func (g *Constraints) Stage() middleware.Stage {
	return checkStage(StageConstraints, g.Applies, func(_ context.Context, call *middleware.Call) error { return g.Check(call) })
}

// Applies reports whether a has constraints to evaluate.
func (g *Constraints) Applies(a *manifest.Action) bool {
	_, ok := g.rules[a]
	return ok || a == nil || len(a.Constraints) > 0
}

// Check evaluates every constraint of the call's action, in name order, and
// refuses with AXAG_PRECONDITION_FAILED naming the ones that do not hold
// (details failed_constraint, expression, failed_constraints when several).
func (g *Constraints) Check(call *middleware.Call) error {
	a := call.Action
	if a == nil {
		return unresolvedAction(StageConstraints)
	}
	cs, ok := g.rules[a]
	if !ok {
		if len(a.Constraints) == 0 {
			return nil
		}
		return axerr.Newf(axerr.CodeInternal, "the constraints of %s were not compiled: the action is not in the enforced manifest", a.Intent).WithIntent(a.Intent)
	}
	args, err := call.Args()
	if err != nil {
		return err
	}
	vars := getCELVars(args, call)
	defer vars.release()
	var failed []constraint
	for _, c := range cs {
		switch out, err := c.x.eval(vars); out {
		case celFails:
			failed = append(failed, c)
		case celBroken:
			return axerr.Newf(axerr.CodePreconditionFailed, "constraint %s could not be evaluated on these arguments: %v", c.Name, err).
				WithIntent(a.Intent).
				WithCause(err).
				WithSuggestion(fmt.Sprintf("Send arguments of the declared types so that %s can be checked.", c.Expr)).
				With("reason", ReasonConstraintNotEvaluable).
				With("failed_constraint", c.Name).
				With("expression", c.Expr)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	first := failed[0]
	msg := fmt.Sprintf("constraint %s does not hold: %s", first.Name, first.Expr)
	if len(failed) > 1 {
		msg = strconv.Itoa(len(failed)) + " constraints do not hold; first: " + first.Name + ": " + first.Expr
	}
	e := axerr.New(axerr.CodePreconditionFailed, msg).
		WithIntent(a.Intent).
		WithSuggestion(fmt.Sprintf("Change the arguments so that %s holds, then call again.", first.Expr)).
		With("reason", ReasonConstraintFailed).
		With("failed_constraint", first.Name).
		With("expression", first.Expr)
	if len(failed) > 1 {
		names := make([]string, len(failed))
		for i, c := range failed {
			names[i] = c.Name
		}
		e.With("failed_constraints", names)
	}
	return e
}
