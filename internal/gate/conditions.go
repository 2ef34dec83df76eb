package gate

import (
	"fmt"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
)

// conditionKind is what differs between preconditions and postconditions
// where the two gates bind their conditions and refuse a call alike.
type conditionKind struct {
	// word names the kind in messages: "precondition" or "postcondition".
	word string
	// code is the code the gate refuses with.
	code axerr.Code
	// nameKey is the details key naming the condition that does not hold.
	nameKey string
}

var (
	preconditionKind  = conditionKind{word: "precondition", code: axerr.CodePreconditionFailed, nameKey: "failed_precondition"}
	postconditionKind = conditionKind{word: "postcondition", code: axerr.CodePostconditionFailed, nameKey: "failed_postcondition"}
)

// conditionBinding is a Precondition or a Postcondition as bindConditions
// sees it. F is the Go check's type: Checker or ResultChecker.
type conditionBinding[F any] struct {
	check    F
	hasCheck bool
	expr     string
}

// condition is one bound condition of an action: its Go check, or its
// compiled expression when x is not nil.
type condition[F any] struct {
	name  string
	check F
	x     *celExpr
}

// bindConditions binds each of names, the conditions of kind that action a
// declares, to its entry in bound: a Go check, or a CEL expression compiled
// in a's environment from envs. A name bound to nothing is added to unbound
// with its JSON Pointer and gets a warning for every call; a name bound to
// both, or to an expression that does not compile, is an error naming its
// place in the manifest.
func bindConditions[F any](kind conditionKind, a *manifest.Action, names []string, bound map[string]conditionBinding[F], envs *celEnvs, unbound map[string][]string) (checks []condition[F], warnings []string, errs []error) {
	for i, name := range names {
		b := bound[name]
		switch {
		case b.hasCheck && b.expr != "":
			errs = append(errs, fmt.Errorf("%s/%ss/%d: %s %q is bound to both a checker and an expression", a.Pointer, kind.word, i, kind.word, name))
			continue
		case !b.hasCheck && b.expr == "":
			unbound[name] = append(unbound[name], fmt.Sprintf("%s/%ss/%d", a.Pointer, kind.word, i))
			warnings = append(warnings, fmt.Sprintf("%s %q of %s is not checked: nothing is bound to it", kind.word, name, a.Intent))
			continue
		}
		c := condition[F]{name: name, check: b.check}
		if !b.hasCheck {
			var err error
			if c.x, err = envs.compile(a, b.expr); err != nil {
				errs = append(errs, fmt.Errorf("%s/%ss/%d: %s %q: %w", a.Pointer, kind.word, i, kind.word, name, err))
				continue
			}
		}
		checks = append(checks, c)
	}
	return checks, warnings, errs
}

// conditionRefusal turns the error a Go check of condition name returned
// into the caller's refusal.
//
// An *axerr.Error is the check's own answer. The caller gets a copy — a
// check may well return a package-level error that every call shares, which
// must not be changed — with a's intent when it names none and, when its
// code is the gate's own, the condition's name and suggestion when it lacks
// them. Any other error means the condition does not hold: notMet builds the
// gate's refusal, and err stays its cause, for logs, never shown to the
// caller.
func conditionRefusal(kind conditionKind, a *manifest.Action, name string, err error, suggestion string, notMet func() *axerr.Error) *axerr.Error {
	e, ok := axerr.As(err)
	if ok {
		e = e.Clone()
		if e.Intent == "" {
			e.Intent = a.Intent
		}
		if e.Code != kind.code {
			return e
		}
	} else {
		e = notMet().WithCause(err)
	}
	if _, set := e.Details[kind.nameKey]; !set {
		e.With(kind.nameKey, name)
	}
	if e.Suggestion == "" {
		e.Suggestion = suggestion
	}
	return e
}
