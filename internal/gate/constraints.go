package gate

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// Constraints enforces each action's constraints.
//
// They are named boolean CEL expressions over the arguments and the
// principal, such as "check_out > check_in". They are compiled once, by
// NewConstraints.
//
// Constraints fail closed: any evaluation error refuses the call with
// reason constraint_not_evaluable, also one that || or && would absorb
// (CEL's "error || true" is true). An argument the call left out is
// visible only through has(args.x): a constraint that reads it otherwise
// refuses, so an optional parameter is guarded as in
// "!has(args.max) || args.max >= args.min". Each evaluation is bounded by
// CELLimits.CostLimit and stops when the call's context ends; a
// constraint whose estimated worst-case cost, given the parameters'
// declared bounds, exceeds the limit is refused by NewConstraints.
type Constraints struct {
	rules map[*manifest.Action][]constraint
}

type constraint struct {
	manifest.Constraint
	x *celExpr
	// refused and suggestion are the refusal's message (when it is the only
	// constraint failing) and suggestion, written once.
	refused, suggestion string
}

// NewConstraints compiles every constraint of m. A constraint that does not
// compile, is not boolean, or whose estimated worst-case cost exceeds the
// cost limit fails with its JSON Pointer path; all of them are reported at
// once. lim, at most one, bounds evaluation (default: CELLimits{}).
func NewConstraints(m *manifest.Manifest, lim ...CELLimits) (*Constraints, error) {
	g := &Constraints{rules: map[*manifest.Action][]constraint{}}
	base := &celEnvs{limits: celLimitsOf(lim)}
	var errs []error
	for _, a := range m.Actions {
		if len(a.Constraints) == 0 {
			continue
		}
		if _, _, err := base.action(a); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.Pointer, err))
			continue
		}
		cs := make([]constraint, 0, len(a.Constraints))
		for _, c := range a.Constraints {
			x, err := base.compile(a, c.Expr)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: constraint %q: %w", c.Pointer, c.Name, err))
				continue
			}
			cs = append(cs, constraint{Constraint: c, x: x,
				refused:    fmt.Sprintf("constraint %s does not hold: %s", c.Name, c.Expr),
				suggestion: fmt.Sprintf("Change the arguments so that %s holds, then call again.", c.Expr)})
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
	return checkStage(StageConstraints, g.Applies, g.CheckContext)
}

// Applies reports whether a has constraints to evaluate.
func (g *Constraints) Applies(a *manifest.Action) bool {
	_, ok := g.rules[a]
	return ok || a == nil || len(a.Constraints) > 0
}

// Check is CheckContext with a context that never ends.
func (g *Constraints) Check(call *middleware.Call) error {
	return g.CheckContext(context.Background(), call)
}

// CheckContext evaluates every constraint of the call's action, in name order.
//
// It refuses with AXAG_PRECONDITION_FAILED naming the ones that do not
// hold (details failed_constraint, expression, failed_constraints when
// several), or the first that cannot be evaluated (reason
// constraint_not_evaluable). An evaluation stops when ctx ends.
func (g *Constraints) CheckContext(ctx context.Context, call *middleware.Call) error {
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
	var failedBuf [4]constraint
	failed := failedBuf[:0]
	for _, c := range cs {
		switch out, err := c.x.eval(ctx, vars); out {
		case celFails:
			failed = append(failed, c)
		case celBroken:
			return notEvaluable(a, c, err)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	first := failed[0]
	msg := first.refused
	if len(failed) > 1 {
		msg = strconv.Itoa(len(failed)) + " constraints do not hold; first: " + first.Name + ": " + first.Expr
	}
	e := axerr.New(axerr.CodePreconditionFailed, msg).
		WithIntent(a.Intent).
		WithSuggestion(first.suggestion).
		WithReason(reasons.ConstraintFailed).
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

// notEvaluable is the refusal for constraint c, which could not be
// evaluated on the call's arguments: err says why, for logs (the message
// does not show it: it may quote the arguments).
func notEvaluable(a *manifest.Action, c constraint, err error) *axerr.Error {
	msg := fmt.Sprintf("constraint %s could not be evaluated on these arguments", c.Name)
	suggestion := fmt.Sprintf("Send every argument that %s reads, with the declared types, so that it can be checked.", c.Expr)
	if errors.Is(err, ErrCELCostLimit) {
		msg = fmt.Sprintf("constraint %s reached its cost limit on these arguments", c.Name)
		suggestion = "Send smaller arguments."
	}
	return axerr.New(axerr.CodePreconditionFailed, msg).
		WithIntent(a.Intent).
		WithCause(err).
		WithSuggestion(suggestion).
		WithReason(reasons.ConstraintNotEvaluable).
		With("failed_constraint", c.Name).
		With("expression", c.Expr)
}
