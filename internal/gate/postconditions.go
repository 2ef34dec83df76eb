package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v5"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/reasons"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// ResultChecker checks a postcondition once the tool has run.
//
// It returns nil when the postcondition holds; errors are treated as by
// Checker (an *axerr.Error reaches the caller as a copy, with the intent
// and, for AXGATE_POSTCONDITION_FAILED, failed_postcondition filled in when
// missing; anything else means "does not hold" and is never shown to the
// caller).
type ResultChecker func(ctx context.Context, call *middleware.Call, res middleware.Result) error

// Postcondition binds a postcondition name of the manifest to a check: a Go
// ResultChecker, or a boolean CEL expression over args, principal, the
// action's parameters and result (the tool's result as encoding/json would
// decode it). Exactly one is set.
type Postcondition struct {
	Check ResultChecker
	Expr  string
}

// Postconditions checks what a tool returned.
//
// It checks the action's output_schema, when it declares one, then its
// postconditions in manifest order. A failure answers
// AXGATE_POSTCONDITION_FAILED (502) instead of the result: the tool ran, but
// the caller must not take the call as a success. Tool errors pass through
// unchanged.
//
// A postcondition expression that cannot be evaluated (any error, also one
// that || or && would absorb, the cost limit, the context ended) does not
// hold: reason postcondition_not_evaluable.
type Postconditions struct {
	rules map[*manifest.Action]*postRule

	// MaxViolations is how many output_schema violations a refusal lists;
	// the others are counted (details.violations_omitted). 0 means
	// axerr.DefaultMaxViolations. Set it before the gate is used.
	MaxViolations int
}

type postRule struct {
	schema    *jsonschema.Schema
	schemaDoc any
	checks    []condition[ResultChecker]
	warnings  []string
	// decode: some check needs the result as JSON values.
	decode bool
}

// NewPostconditions binds every postcondition of m, with the same policy as
// NewPreconditions: unbound ones fail it with an *UnboundError unless
// allowUnbound, which records a warning per call instead. lim, at most one,
// bounds the evaluation of expressions.
func NewPostconditions(m *manifest.Manifest, bound map[string]Postcondition, allowUnbound bool, lim ...CELLimits) (*Postconditions, error) {
	bindings := make(map[string]conditionBinding[ResultChecker], len(bound))
	for name, b := range bound {
		bindings[name] = conditionBinding[ResultChecker]{check: b.Check, hasCheck: b.Check != nil, expr: b.Expr}
	}
	g := &Postconditions{rules: map[*manifest.Action]*postRule{}}
	envs := &celEnvs{withResult: true, limits: celLimitsOf(lim)}
	unbound := map[string][]string{}
	var errs []error
	for _, a := range m.Actions {
		r := &postRule{}
		if s := a.CompiledOutputSchema(); s != nil {
			r.schema, r.decode = s, true
			if err := json.Unmarshal(a.OutputSchema, &r.schemaDoc); err != nil {
				errs = append(errs, fmt.Errorf("%s/output_schema: %w", a.Pointer, err))
			}
		}
		checks, warnings, bindErrs := bindConditions(postconditionKind, a, a.Postconditions, bindings, envs, unbound)
		errs = append(errs, bindErrs...)
		r.checks, r.warnings = checks, warnings
		for _, c := range checks {
			if c.x != nil {
				r.decode = true
			}
		}
		if r.schema != nil || len(r.checks) > 0 || len(r.warnings) > 0 {
			g.rules[a] = r
		}
	}
	if len(unbound) > 0 && !allowUnbound {
		errs = append(errs, &UnboundError{Kind: "postcondition", Names: unbound})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return g, nil
}

// Stage returns the gate as a chain stage. It belongs after the commit stage,
// right around the tool.
func (g *Postconditions) Stage() middleware.Stage {
	return middleware.Stage{Name: StagePostconditions, Applies: g.Applies, Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		res, err := next.Invoke(ctx, call)
		if err != nil {
			return res, err
		}
		if err := g.Check(ctx, call, res); err != nil {
			return middleware.Result{}, err
		}
		return res, nil
	}}
}

// Applies reports whether a declares postconditions or an output schema.
func (g *Postconditions) Applies(a *manifest.Action) bool {
	_, ok := g.rules[a]
	return ok || a == nil || len(a.Postconditions) > 0 || a.CompiledOutputSchema() != nil
}

// Check verifies a result of the call's action and returns the refusal, or
// nil.
func (g *Postconditions) Check(ctx context.Context, call *middleware.Call, res middleware.Result) error {
	a := call.Action
	if a == nil {
		return unresolvedAction(StagePostconditions)
	}
	r, ok := g.rules[a]
	if !ok {
		if len(a.Postconditions) == 0 && a.CompiledOutputSchema() == nil {
			return nil
		}
		return axerr.Newf(axerr.CodeInternal, "the postconditions of %s were not bound: the action is not in the enforced manifest", a.Intent).WithIntent(a.Intent)
	}
	if len(r.warnings) > 0 {
		call.Facts.Warnings = append(call.Facts.Warnings, r.warnings...)
	}
	var value any
	if r.decode {
		// Check what the caller will receive: the result as encoding/json
		// renders it, decoded again (numbers float64), not the Go value.
		raw, err := json.Marshal(res.Value)
		if err == nil {
			err = json.Unmarshal(raw, &value)
		}
		if err != nil {
			return postFailed(a, "the tool's result cannot be rendered as JSON", reasons.ResultNotJSON).WithCause(err)
		}
	}
	if r.schema != nil {
		if err := r.schema.Validate(value); err != nil {
			vs, omitted := violations(err, r.schemaDoc, value, g.MaxViolations, axerr.CodePostconditionFailed)
			e := postFailed(a, "the tool's result does not match its output_schema", reasons.OutputSchema).WithCause(err)
			e.Violations = vs
			if omitted > 0 {
				e.With(axerr.DetailViolationsOmitted, omitted)
			}
			return e
		}
	}
	var vars *celVars
	for i := range r.checks {
		pc := &r.checks[i]
		if pc.x == nil {
			if err := pc.check(ctx, call, res); err != nil {
				return conditionRefusal(postconditionKind, a, pc.name, err, "", func() *axerr.Error {
					return postFailed(a, "postcondition not met: "+pc.name, reasons.PostconditionFailed)
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
			vars.result, vars.hasResult = value, true
			defer vars.release()
		}
		switch out, err := pc.x.eval(ctx, vars); out {
		case celHolds:
		case celFails:
			return postFailed(a, "postcondition not met: "+pc.name, reasons.PostconditionFailed).With("failed_postcondition", pc.name).With("expression", pc.x.src)
		default:
			return postFailed(a, "postcondition "+pc.name+" could not be checked on the tool's result", reasons.PostconditionNotEvaluable).
				WithCause(err).With("failed_postcondition", pc.name).With("expression", pc.x.src)
		}
	}
	return nil
}

func postFailed(a *manifest.Action, msg string, reason axerr.Reason) *axerr.Error {
	e := axerr.New(axerr.CodePostconditionFailed, msg).WithIntent(a.Intent).WithReason(reason)
	if len(a.SideEffects) > 0 {
		// The tool ran: say what it may have done.
		e.With("side_effects", slices.Clone(a.SideEffects))
	}
	return e
}
