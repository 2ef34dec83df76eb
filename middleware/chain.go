package middleware

import (
	"context"
	"time"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
)

// Invoker runs a tool call.
type Invoker interface {
	Invoke(ctx context.Context, call *Call) (Result, error)
}

// InvokerFunc adapts a function to Invoker.
type InvokerFunc func(ctx context.Context, call *Call) (Result, error)

// Invoke calls f.
func (f InvokerFunc) Invoke(ctx context.Context, call *Call) (Result, error) { return f(ctx, call) }

// Interceptor wraps an Invoker: it may refuse the call (return an error
// without calling next), pass it on, or inspect what next returned.
type Interceptor func(ctx context.Context, call *Call, next Invoker) (Result, error)

// Stage is a named Interceptor. The name says which gate decided a refusal
// and labels the gate's timing.
type Stage struct {
	Name        string
	Interceptor Interceptor
	// Applies, when not nil, reports whether the stage has anything to do
	// for calls of an action; BuildFor leaves out a stage that does not, so
	// such a call neither runs it nor, when observed, times it or records
	// an event for it. It may return false only when the stage would pass
	// every call of the action on unchanged, whatever its arguments,
	// principal, credentials or the state of any store, and it must return
	// true for a nil action. Nil means the stage always applies.
	Applies func(a *manifest.Action) bool
}

// AppliesTo reports whether s has anything to do for calls of a.
func (s Stage) AppliesTo(a *manifest.Action) bool {
	return s.Applies == nil || a == nil || s.Applies(a)
}

// Observer hears the outcome of every stage: err is nil when the stage passed
// the call on, the refusal otherwise. d is the stage's own time, from
// entering it to passing the call on (or refusing).
type Observer interface {
	StageDone(ctx context.Context, call *Call, stage string, d time.Duration, err error)
}

// stageTimer is implemented by an Observer that may not want stage times.
//
// When TimesStages returns false (it is asked once, when the chain is
// built), the chain reads no clock for that Observer: StageDone is called
// all the same, with d = 0. A clock read costs tens of nanoseconds on some
// virtual machines, and an observed chain makes one per stage boundary.
type stageTimer interface {
	TimesStages() bool
}

// timesStages reports whether obs wants the stages' times.
func timesStages(obs Observer) bool {
	t, ok := obs.(stageTimer)
	return !ok || t.TimesStages()
}

// Build returns inv wrapped in the stages, the first outermost. A refusal
// that is an *axerr.Error with no Gate gets the refusing stage's name. obs,
// when not nil, hears each stage's outcome and time.
func Build(inv Invoker, obs Observer, stages ...Stage) Invoker {
	return build(nil, inv, obs, stages)
}

// BuildFor is Build for the calls of one action.
//
// It leaves out the stages that do not apply to a (Stage.Applies), so that
// a read action with no confirmation, approval, rate limit or conditions
// does not pass through those gates at all. Give it only calls of a, or
// calls whose action is not resolved yet and which one of its stages (the
// intent gate) resolves to a: the stages left out would have checked any
// other action. The chain is pinned to a: should a stage set call.Action
// to another action, the next stage is not run and the call is refused
// with AXGATE_INTERNAL, attributed to that stage; and a call that leaves
// the last stage with any action but a, or none, is refused the same way
// before inv runs.
func BuildFor(a *manifest.Action, inv Invoker, obs Observer, stages ...Stage) Invoker {
	kept := make([]Stage, 0, len(stages))
	for _, s := range stages {
		if s.AppliesTo(a) {
			kept = append(kept, s)
		}
	}
	return build(a, inv, obs, kept)
}

// build composes the chain; a non-nil action pins it to that action.
func build(a *manifest.Action, inv Invoker, obs Observer, stages []Stage) Invoker {
	next := inv
	timed := obs != nil && timesStages(obs)
	if obs != nil {
		next = &tail{next: next, obs: obs}
	}
	if !chained(inv) {
		// Outside tail, so that a refusal here is still the last stage's.
		next = &committed{next: next}
	}
	if a != nil {
		next = &pinned{action: a, next: next}
	}
	for i := len(stages) - 1; i >= 0; i-- {
		next = &link{stage: stages[i], next: next, obs: obs, timed: timed, action: a}
	}
	return &head{next: next}
}

// head drops the deferred work that a run of the chain registered when the
// chain refuses the call: it was registered for a run that did not
// happen, and must not run beside the work of the next run of the same
// call (a caller that retries with one more credential), where it would
// spend the same token twice. Work registered before the chain was entered
// (by the stages of an outer chain that this one is an interceptor of) is
// kept, for the outer chain's commit stage: an outer stage may go on after
// this chain's refusal.
type head struct{ next Invoker }

func (h *head) Invoke(ctx context.Context, call *Call) (Result, error) {
	kept, runs := len(call.commits), call.commitRuns
	res, err := h.next.Invoke(ctx, call)
	if err != nil {
		if call.commitRuns != runs {
			// The commits ran inside: what was registered before was
			// spent, and what is left is this run's.
			kept = 0
		}
		if len(call.commits) > kept {
			call.commits = call.commits[:kept]
		}
	}
	return res, err
}

// chained reports whether inv is the rest of a chain rather than the tool:
// another chain (whose own end is the tool boundary), or the continuation
// of an outer chain that a chain built inside one interceptor of it (an
// interceptor that calls Build with its next) hands the call back to, whose later stages (the commit stage among them)
// have yet to run.
func chained(inv Invoker) bool {
	switch inv.(type) {
	case *head, *link, *pinned, *committed, *tail:
		return true
	}
	return false
}

// committed is the tool boundary: it refuses a call whose deferred work
// (Call.OnCommit: spending its tokens, charging its rate limit) never ran,
// because the chain has no commit stage or a stage after it registered
// more. The tool must never run with a token that a gate accepted and
// nobody spent, which could then be presented again. A check-only call is
// let through: gates defer nothing for it, and what it reaches is a check,
// not the tool. The refusal has no Gate: the last stage gets it, as with
// pinned.
type committed struct{ next Invoker }

func (c *committed) Invoke(ctx context.Context, call *Call) (Result, error) {
	if len(call.commits) > 0 && !call.checkOnly {
		return Result{}, axerr.Newf(axerr.CodeInternal, "the call reached the tool with %d deferred commits not run (the chain has no commit stage after its gates); it was refused", len(call.commits)).
			WithIntent(call.Intent())
	}
	return c.next.Invoke(ctx, call)
}

// actionChanged refuses a call whose action is no longer the one its chain
// was built for. It has no Gate: the stage that passed the call on gets it.
func actionChanged(want, got *manifest.Action) error {
	if got == nil {
		return axerr.Newf(axerr.CodeInternal, "the call left a chain built for %q with no action; it was refused", want.Intent).
			WithIntent(want.Intent)
	}
	return axerr.Newf(axerr.CodeInternal, "the call's action changed from %q to %q inside a chain built for the first; it was refused", want.Intent, got.Intent).
		WithIntent(got.Intent)
}

// pinned checks, after the last stage of a chain built for one action, that
// the call is of that action: by then its intent gate has resolved it, so
// no action at all means a stage cleared it.
type pinned struct {
	action *manifest.Action
	next   Invoker
}

func (p *pinned) Invoke(ctx context.Context, call *Call) (Result, error) {
	if call.Action != p.action {
		return Result{}, actionChanged(p.action, call.Action)
	}
	return p.next.Invoke(ctx, call)
}

type link struct {
	stage Stage
	next  Invoker
	obs   Observer
	// timed is set when obs wants the stages' times (stageTimer).
	timed bool
	// action, when not nil, is the action the chain was built for.
	action *manifest.Action
}

func (l *link) Invoke(ctx context.Context, call *Call) (Result, error) {
	if l.action != nil && call.Action != nil && call.Action != l.action {
		// Before the previous stage's time is closed: the refusal is its.
		return Result{}, actionChanged(l.action, call.Action)
	}
	if l.obs != nil {
		// One clock read both ends the previous stage and starts this one;
		// none when neither is timed.
		var now time.Time
		if l.timed || !call.pendingStart.IsZero() {
			now = time.Now()
		}
		closePending(ctx, call, l.obs, now)
		call.pending, call.pendingStage = true, l.stage.Name
		if l.timed {
			call.pendingStart = now
		}
	}
	res, err := l.stage.Interceptor(ctx, call, l.next)
	if err != nil {
		if e, ok := axerr.As(err); ok && e.Gate == "" && l.stage.Name != "" {
			// Annotate a copy: the error may be shared (a package-level
			// refusal a checker returns).
			e = e.Clone()
			e.Gate = l.stage.Name
			err = e
		}
		if l.obs != nil && call.pending && call.pendingStage == l.stage.Name {
			// The stage refused before passing the call on.
			var d time.Duration
			if !call.pendingStart.IsZero() {
				d = time.Since(call.pendingStart)
			}
			l.obs.StageDone(ctx, call, l.stage.Name, d, err)
			call.clearPending()
		}
	}
	return res, err
}

// tail closes the last stage's timing before the wrapped invoker runs.
type tail struct {
	next Invoker
	obs  Observer
}

func (t *tail) Invoke(ctx context.Context, call *Call) (Result, error) {
	var now time.Time
	if !call.pendingStart.IsZero() {
		now = time.Now()
	}
	closePending(ctx, call, t.obs, now)
	return t.next.Invoke(ctx, call)
}

// closePending tells obs that the pending stage passed the call on at now
// (zero when it was not timed: d is then 0).
func closePending(ctx context.Context, call *Call, obs Observer, now time.Time) {
	if !call.pending {
		return
	}
	var d time.Duration
	if !call.pendingStart.IsZero() && !now.IsZero() {
		d = now.Sub(call.pendingStart)
	}
	obs.StageDone(ctx, call, call.pendingStage, d, nil)
	call.clearPending()
}
