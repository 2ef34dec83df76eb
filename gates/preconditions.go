package gates

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// StagePreconditions is the name of the precondition stage.
const StagePreconditions = "preconditions"

// Checker checks a precondition of a call. It returns nil when the
// precondition holds. An *errors.Error is passed to the caller as it is (a
// checker whose own store failed returns StoreUnavailable); any other error
// means the precondition does not hold, and its text stays in the refusal's
// cause, for logs, never shown to the caller. Use PreconditionFailed to give
// the caller a message of your own.
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

// UnboundError is returned when an enforcer would be built with
// preconditions or postconditions that nothing checks.
type UnboundError struct {
	// Kind is "precondition" or "postcondition".
	Kind string
	// Names lists the unbound names, sorted, each with the JSON Pointers of
	// the actions that declare it.
	Names map[string][]string
}

func (e *UnboundError) Error() string {
	names := make([]string, 0, len(e.Names))
	for n := range e.Names {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%d %ss are not bound to a check (bind each with a checker or an expression, or allow unbound conditions on purpose):", len(names), e.Kind)
	for _, n := range names {
		fmt.Fprintf(&b, " %q (%s);", n, strings.Join(e.Names[n], ", "))
	}
	return strings.TrimSuffix(b.String(), ";")
}

// Preconditions checks each action's preconditions, in manifest order; the
// first that does not hold refuses the call with AXAG_PRECONDITION_FAILED.
//
// A precondition expression that cannot be evaluated (an argument it reads
// is absent, a type does not fit) counts as not holding: unlike a constraint,
// which relates the values that are there, a precondition is something that
// must be shown to hold.
type Preconditions struct {
	rules map[*manifest.Action]*preRule
}

type preRule struct {
	checks []preCheck
	// warnings are recorded on every call when unbound preconditions are
	// allowed.
	warnings []string
}

type preCheck struct {
	name       string
	check      Checker
	x          *celExpr
	producedBy []string
}

// NewPreconditions binds every precondition of m. Unless allowUnbound, a
// precondition with no binding fails it with an *UnboundError listing them
// all (fail closed); with allowUnbound each call of an action with an
// unbound precondition records a warning in call.Facts.Warnings. An
// expression that does not compile fails it with the action's path.
func NewPreconditions(m *manifest.Manifest, bound map[string]Precondition, allowUnbound bool) (*Preconditions, error) {
	producers := Producers(m)
	g := &Preconditions{rules: map[*manifest.Action]*preRule{}}
	envs := &celEnvs{}
	unbound := map[string][]string{}
	var errs []error
	for _, a := range m.Actions {
		if len(a.Preconditions) == 0 {
			continue
		}
		r := &preRule{}
		for i, name := range a.Preconditions {
			b, ok := bound[name]
			if b.Check != nil && b.Expr != "" {
				errs = append(errs, fmt.Errorf("precondition %q is bound to both a checker and an expression", name))
				continue
			}
			if !ok || (b.Check == nil && b.Expr == "") {
				unbound[name] = append(unbound[name], fmt.Sprintf("%s/preconditions/%d", a.Pointer, i))
				r.warnings = append(r.warnings, fmt.Sprintf("precondition %q of %s is not checked: nothing is bound to it", name, a.Intent))
				continue
			}
			pc := preCheck{name: name, check: b.Check, producedBy: producers[name]}
			if b.Check == nil {
				env, bare, err := envs.action(a)
				if err == nil {
					pc.x, err = compileCEL(env, bare, b.Expr)
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("%s/preconditions/%d: precondition %q: %w", a.Pointer, i, name, err))
					continue
				}
			}
			r.checks = append(r.checks, pc)
		}
		g.rules[a] = r
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
	return middleware.Stage{Name: StagePreconditions, Interceptor: func(ctx context.Context, call *middleware.Call, next middleware.Invoker) (middleware.Result, error) {
		if err := g.Check(ctx, call); err != nil {
			return middleware.Result{}, err
		}
		return next.Invoke(ctx, call)
	}}
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
		if pc.check != nil {
			if err := pc.check(ctx, call); err != nil {
				return pc.refusal(a, err)
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
		switch out, err := pc.x.eval(vars); out {
		case celHolds:
		case celFails:
			return pc.refusal(a, nil)
		default:
			e := pc.refusal(a, err)
			e.Details["reason"] = ReasonPreconditionNotEvaluable
			return e
		}
	}
	return nil
}

// refusal turns a checker's error into the caller's refusal.
func (pc *preCheck) refusal(a *manifest.Action, err error) *axerr.Error {
	if ae, ok := axerr.As(err); ok {
		if ae.Intent == "" {
			ae.Intent = a.Intent
		}
		if ae.Code == axerr.CodePreconditionFailed {
			if _, set := ae.Details["failed_precondition"]; !set {
				ae.With("failed_precondition", pc.name)
			}
			if ae.Suggestion == "" {
				ae.Suggestion = preSuggestion(pc.name, pc.producedBy)
			}
		}
		return ae
	}
	e := PreconditionFailed(a.Intent, pc.name, "").WithCause(err)
	e.Suggestion = preSuggestion(pc.name, pc.producedBy)
	if len(pc.producedBy) > 0 {
		e.With("produced_by", slices.Clone(pc.producedBy))
	}
	return e
}

// PreconditionFailed is the refusal for a precondition that does not hold:
// AXAG_PRECONDITION_FAILED with details failed_precondition. message, when
// not empty, replaces the default "precondition not met: name". A Checker
// may return it to tell the caller more; the gate adds the suggestion.
func PreconditionFailed(intent, name, message string) *axerr.Error {
	if message == "" {
		message = "precondition not met: " + name
	}
	return axerr.New(axerr.CodePreconditionFailed, message).
		WithIntent(intent).
		With("reason", ReasonPreconditionFailed).
		With("failed_precondition", name)
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
