package axgate

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// Enforcer enforces one manifest. It is safe for concurrent use.
type Enforcer struct {
	m      *manifest.Manifest
	cfg    config
	params *gate.Params

	// stages is the whole standard chain, outermost first; pre is its
	// pre-execution prefix, which Check runs.
	stages []middleware.Stage
	pre    []middleware.Stage
	// run are the stages Wrap builds chains of: stages, or in shadow mode
	// (WithShadow) stages with their gates wrapped; nil means stages.
	run   []middleware.Stage
	obs   middleware.Observer
	check middleware.Invoker
	// telemetry observes the chain; nil when nothing does.
	telemetry *middleware.Telemetry
	// tokens is what the token gates need after New: IssueConfirmation's
	// signer, the approval gate behind Approvals.
	tokens *tokenRuntime
	// checked are the actions the gates check (manifest.Manifest.Checked:
	// the tools', then the resources' and prompts'); index is the
	// position of each in checked.
	checked []*manifest.Action
	index   map[*manifest.Action]int

	// closers are run by Close (background key refresh and the like).
	closers []func() error
}

// New returns an Enforcer for m with the standard chain. It fails when the
// configuration cannot enforce the manifest (for example an unbound
// precondition), listing why: an enforcer that would let a gate pass open is
// never built.
func New(m *manifest.Manifest, opts ...Option) (*Enforcer, error) {
	if m == nil {
		return nil, errors.New("axgate: nil manifest")
	}
	e := &Enforcer{m: m, cfg: defaultConfig(), checked: m.Checked()}
	e.index = make(map[*manifest.Action]int, len(e.checked))
	for i, a := range e.checked {
		e.index[a] = i
	}
	for _, o := range opts {
		o(&e.cfg)
	}
	var err error
	if e.params, err = gate.NewParams(m, e.cfg.allowUnknownParams); err != nil {
		return nil, fmt.Errorf("axgate: %w", err)
	}
	e.params.MaxViolations = e.cfg.maxViolations
	if err := e.assemble(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// assemble builds the standard chain in its standard order, around the
// tool.
func (e *Enforcer) assemble() error {
	var errs []error
	add := func(ss []middleware.Stage, err error) []middleware.Stage {
		if err != nil {
			errs = append(errs, err)
		}
		return ss
	}
	outer := add(e.observeStages())
	pre := []middleware.Stage{gate.Intent(e.m, e.cfg.limits)}
	pre = append(pre, add(e.accessStages())...)
	pre = append(pre, e.params.Stage())
	pre = append(pre, add(e.conditionStages())...)
	pre = append(pre, add(e.rateStages())...)
	pre = append(pre, add(e.tokenStages())...)
	pre = append(pre, add(e.idempotencyStages())...)
	post := []middleware.Stage{gate.Commit()}
	post = append(post, add(e.postStages())...)
	if len(errs) > 0 {
		return fmt.Errorf("axgate: %w", errors.Join(errs...))
	}
	if e.cfg.editPre != nil {
		pre = alwaysApplyEdited(pre, e.cfg.editPre(slices.Clone(pre)))
	}
	e.pre = append(append([]middleware.Stage{}, outer...), pre...)
	e.stages = append(append(append([]middleware.Stage{}, outer...), pre...), post...)
	e.obs = e.observer()
	e.check = e.perAction(middleware.InvokerFunc(checked), e.pre)
	shadow, err := e.shadowActions()
	if err != nil {
		return fmt.Errorf("axgate: %w", err)
	}
	if shadow != nil {
		// Only the chains Wrap builds: Check reports what enforcement
		// would decide.
		e.run = e.shadowStages(e.stages, shadow)
	}
	return nil
}

// perAction returns inv wrapped in stages, built for each action on its
// first call with only the stages that apply to it. With telemetry it also
// builds the quiet chains (observeStages: no span, no metrics, no
// Observer) that take the calls made while the telemetry records nothing.
func (e *Enforcer) perAction(inv middleware.Invoker, stages []middleware.Stage) *actionChains {
	c := e.chainsOf(inv, e.obs, stages)
	if e.telemetry != nil {
		c.quiet = e.chainsOf(inv, nil, e.quietStages(stages))
	}
	return c
}

func (e *Enforcer) chainsOf(inv middleware.Invoker, obs middleware.Observer, stages []middleware.Stage) *actionChains {
	return &actionChains{
		e:      e,
		chains: make([]actionChain, len(e.checked)),
		build: func(a *manifest.Action) middleware.Invoker {
			return middleware.BuildFor(a, inv, obs, stages...)
		},
		full: middleware.Build(inv, obs, stages...),
	}
}

// actionOf returns the manifest action a call is for and its position in
// the manifest, as the intent gate will resolve it; false when that cannot be
// told before the intent gate runs (a tool the manifest does not declare,
// an action the transport took from another manifest).
func (e *Enforcer) actionOf(call *middleware.Call) (*manifest.Action, int, bool) {
	a := call.Action
	if a == nil {
		a = e.m.Tool(call.Tool)
	}
	i, ok := e.index[a]
	return a, i, ok
}

// actionChains runs each call through the chain of its own action: the
// stages that apply to it (middleware.BuildFor), so that a call passes only
// the gates with something to check and, when observed, its span records
// only theirs. A call whose action cannot be told before the intent gate
// takes the whole chain, whose intent gate refuses it.
type actionChains struct {
	e      *Enforcer
	chains []actionChain
	build  func(a *manifest.Action) middleware.Invoker
	full   middleware.Invoker
	// wrapped marks the chains Wrap returns around a tool.
	wrapped bool
	// quiet, when not nil, are the same chains without tracing and metrics,
	// for the calls made while the telemetry records nothing
	// (middleware.Telemetry.Recording).
	quiet *actionChains
}

// actionChain is one action's chain, built on its first call. Two first
// calls at once may both build it (the same chain; one is kept); a build
// that panics leaves it unbuilt for the next call to try again.
type actionChain struct {
	inv atomic.Pointer[middleware.Invoker]
}

func (c *actionChains) Invoke(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
	if c.quiet != nil && !c.e.telemetry.Recording() {
		return c.quiet.Invoke(ctx, call)
	}
	a, i, ok := c.e.actionOf(call)
	if !ok {
		return c.full.Invoke(ctx, call)
	}
	ch := &c.chains[i]
	inv := ch.inv.Load()
	if inv == nil {
		built := c.build(a)
		ch.inv.CompareAndSwap(nil, &built)
		inv = ch.inv.Load()
	}
	return (*inv).Invoke(ctx, call)
}

// alwaysApplyEdited returns edited with Applies cleared on every stage whose
// Interceptor is none of std's: a stage the user wrote or wrapped (keeping
// a standard stage's Name and Applies) must see every call, since its code
// may check what the standard gate's Applies knows nothing of. Functions
// are told apart by their code pointers: a user's closure is never one of
// the standard gates' code.
func alwaysApplyEdited(std, edited []middleware.Stage) []middleware.Stage {
	standard := make(map[uintptr]bool, len(std))
	for _, s := range std {
		standard[reflect.ValueOf(s.Interceptor).Pointer()] = true
	}
	for i := range edited {
		if edited[i].Applies != nil && !standard[reflect.ValueOf(edited[i].Interceptor).Pointer()] {
			edited[i].Applies = nil
		}
	}
	return edited
}

func checked(context.Context, *middleware.Call) (middleware.Result, error) {
	return middleware.Result{}, nil
}

// Manifest returns the enforced manifest.
func (e *Enforcer) Manifest() *manifest.Manifest { return e.m }

// Stages returns the names of the standard chain's stages, outermost first.
func (e *Enforcer) Stages() []string {
	out := make([]string, len(e.stages))
	for i, s := range e.stages {
		out[i] = s.Name
	}
	return out
}

// StagesFor returns the names of the stages a call of tool passes, outermost
// first: those of Stages that apply to its action. It is false when the
// manifest declares no such tool (such a call takes the whole chain, whose
// intent gate refuses it).
func (e *Enforcer) StagesFor(tool string) ([]string, bool) {
	a := e.m.Tool(tool)
	if a == nil {
		return nil, false
	}
	var out []string
	for _, s := range e.stages {
		if s.AppliesTo(a) {
			out = append(out, s.Name)
		}
	}
	return out, true
}

// Wrap returns tool wrapped in the whole chain.
//
// Each call passes the stages that apply to its action (a stage's Applies).
// A tool error that is not an *axerr.Error becomes AXGATE_TOOL_FAILED with
// a safe message; the original stays reachable with errors.Unwrap for logs,
// never for the caller.
//
// Give it the bare tool: a tool Wrap already returned (Wrapped) is refused
// by an invoker that refuses every call with AXGATE_INTERNAL (the adapters'
// constructors return ErrWrapped instead). docs/chain.md says why.
func (e *Enforcer) Wrap(tool middleware.Invoker) middleware.Invoker {
	if Wrapped(tool) {
		return rewrapped{}
	}
	stages := e.stages
	if e.run != nil {
		stages = e.run
	}
	c := e.perAction(toolBoundary{tool}, stages)
	c.wrapped = true
	return c
}

// ErrWrapped is the error the adapters' constructors return, wrapped with
// the tool's name, for a tool that an enforcer has already wrapped (the
// result of Enforcer.Wrap): they take the bare tool and wrap it themselves.
var ErrWrapped = errors.New("axgate: tool already wrapped by an enforcer")

// Wrapped reports whether inv is a tool an enforcer has wrapped (what
// Enforcer.Wrap returned). Wrapping it again is refused: see Wrap.
func Wrapped(inv middleware.Invoker) bool {
	c, ok := inv.(*actionChains)
	return ok && c.wrapped
}

// rewrapped is what Wrap returns for a tool already wrapped: every call is
// refused, none reaches the gates twice.
type rewrapped struct{}

func (rewrapped) Invoke(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	return middleware.Result{}, axerr.New(axerr.CodeInternal, "the tool is wrapped twice by an enforcer; it was refused").
		WithIntent(call.Intent()).WithCause(ErrWrapped)
}

// Check runs the pre-execution gates of the call's action (those with
// something to check for it, as Wrap does) without invoking the tool and
// without recording anything (tokens are not spent, rate limits not
// charged). It returns nil when the call would be allowed to run now.
func (e *Enforcer) Check(ctx context.Context, call *middleware.Call) error {
	call.SetCheckOnly(true)
	defer call.SetCheckOnly(false)
	_, err := e.check.Invoke(ctx, call)
	return err
}

// Close stops background work (key refresh) started by options.
func (e *Enforcer) Close() error {
	var errs []error
	for _, c := range e.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

type toolBoundary struct{ next middleware.Invoker }

func (t toolBoundary) Invoke(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
	call.MarkExecuted()
	res, err := t.next.Invoke(ctx, call)
	if err == nil {
		return res, nil
	}
	if ae, ok := axerr.As(err); ok {
		if ae.Gate == "" {
			ae = ae.Clone() // the tool's error may be shared
			ae.Gate = middleware.StageTool
		}
		return res, ae
	}
	te := axerr.New(axerr.CodeToolFailed, "the tool failed to complete the call").WithIntent(call.Intent()).WithCause(err)
	te.Gate = middleware.StageTool
	if errors.Is(err, context.DeadlineExceeded) {
		te.Message = "the tool did not finish in time"
	}
	return middleware.Result{}, te
}

// Tools returns the definitions of every tool, in manifest order, with the
// input schemas the parameter gate enforces.
func (e *Enforcer) Tools() []manifest.Tool {
	out := e.m.Tools()
	for i, a := range e.m.Actions {
		if doc := e.params.Schema(a); doc != nil {
			out[i].InputSchema = doc
		}
	}
	return out
}

// Tool returns one tool definition, and whether it exists.
func (e *Enforcer) Tool(name string) (manifest.Tool, bool) {
	a := e.m.Tool(name)
	if a == nil {
		return manifest.Tool{}, false
	}
	t := a.Tool()
	if doc := e.params.Schema(a); doc != nil {
		t.InputSchema = doc
	}
	return t, true
}

// CheckHandlers matches the handler names an adapter is about to bind against the manifest.
//
// It returns nil when every tool has a handler and every handler a tool, and
// otherwise an error naming both kinds of mismatch, so that a server never
// starts with a tool unguarded or a handler no gate knows.
func (e *Enforcer) CheckHandlers(names []string) error {
	have := make(map[string]bool, len(names))
	var unknown []string
	for _, n := range names {
		have[n] = true
		if e.m.Tool(n) == nil {
			unknown = append(unknown, n)
		}
	}
	var missing []string
	for _, a := range e.m.Actions {
		if !have[a.ToolName()] {
			missing = append(missing, a.ToolName())
		}
	}
	if len(missing)+len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "no handler for "+strings.Join(missing, ", "))
	}
	if len(unknown) > 0 {
		parts = append(parts, "handlers for tools the manifest does not declare: "+strings.Join(unknown, ", "))
	}
	return errors.New(strings.Join(parts, "; "))
}
