package gate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"

	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// The CEL environment of constraints and conditions.
//
// Variables:
//   - args: the argument object, map(string, dyn), exactly as encoding/json
//     decodes it: numbers are doubles, dates and times are strings.
//   - every declared top-level parameter whose name is a CEL identifier, as a
//     dyn variable of its own, so "check_out > check_in" reads like the
//     manifest means it (args.check_out works too).
//   - principal: map(string, dyn) with id, tenant (strings), roles, scopes
//     (lists of strings) and claims (the credential's raw claims).
//   - result (postconditions only): the tool's result after a JSON round
//     trip.
//
// An argument the call left out is visible only through has(args.x):
// reading it otherwise is an error, and any error in an evaluation refuses
// the call (see celWatchErrors).
//
// Numbers compare across int and double ("quantity <= 10" with quantity a
// double), and ISO 8601 dates compare as strings, which orders them
// correctly for one format (YYYY-MM-DD); date-times with offsets compare
// exactly through timestamp(): "timestamp(end) > timestamp(start)".
const (
	celArgs      = "args"
	celPrincipal = "principal"
	celResult    = "result"
)

var celIdent = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)

// celReserved are CEL's reserved words and the environment's own names: a
// parameter with one of these names is reachable only as args.name or
// args["name"].
var celReserved = map[string]bool{
	"true": true, "false": true, "null": true, "in": true, "as": true, "break": true,
	"const": true, "continue": true, "else": true, "for": true, "function": true, "if": true,
	"import": true, "let": true, "loop": true, "package": true, "namespace": true,
	"return": true, "var": true, "void": true, "while": true,
	celArgs: true, celPrincipal: true, celResult: true,
	// Standard functions and types that a variable would shadow.
	"int": true, "uint": true, "double": true, "bool": true, "string": true, "bytes": true,
	"list": true, "map": true, "type": true, "dyn": true, "null_type": true,
	"size": true, "has": true, "timestamp": true, "duration": true, "matches": true,
}

// newCELBase returns the environment shared by every action: args and
// principal, and result when withResult.
func newCELBase(withResult bool) (*cel.Env, error) {
	opts := []cel.EnvOption{
		cel.Variable(celArgs, cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable(celPrincipal, cel.MapType(cel.StringType, cel.DynType)),
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
	}
	if withResult {
		opts = append(opts, cel.Variable(celResult, cel.DynType))
	}
	return cel.NewEnv(opts...)
}

// celActionEnv extends base with a's top-level parameters as variables and
// returns their names.
func celActionEnv(base *cel.Env, a *manifest.Action) (*cel.Env, map[string]bool, error) {
	bare := map[string]bool{}
	var vars []cel.EnvOption
	for _, p := range a.Parameters {
		if celIdent.MatchString(p.Name) && !celReserved[p.Name] && !bare[p.Name] {
			bare[p.Name] = true
			vars = append(vars, cel.Variable(p.Name, cel.DynType))
		}
	}
	if len(vars) == 0 {
		return base, bare, nil
	}
	env, err := base.Extend(vars...)
	return env, bare, err
}

// celEnvs builds the environments on first use, so a manifest without
// expressions never pays for them, and each action's environment once.
type celEnvs struct {
	withResult bool
	limits     CELLimits
	base       *cel.Env
	actions    map[*manifest.Action]celActionEnvs
}

type celActionEnvs struct {
	env  *cel.Env
	bare map[string]bool
}

// compile compiles src in a's environment, with the evaluation limits and
// a's parameter bounds for the cost estimate.
func (c *celEnvs) compile(a *manifest.Action, src string) (*celExpr, error) {
	env, bare, err := c.action(a)
	if err != nil {
		return nil, err
	}
	return compileCEL(env, bare, src, c.limits, a)
}

// action returns the environment of a and its bare parameter names.
func (c *celEnvs) action(a *manifest.Action) (*cel.Env, map[string]bool, error) {
	if ae, ok := c.actions[a]; ok {
		return ae.env, ae.bare, nil
	}
	if c.base == nil {
		base, err := newCELBase(c.withResult)
		if err != nil {
			return nil, nil, err
		}
		c.base, c.actions = base, map[*manifest.Action]celActionEnvs{}
	}
	env, bare, err := celActionEnv(c.base, a)
	if err != nil {
		return nil, nil, err
	}
	c.actions[a] = celActionEnvs{env, bare}
	return env, bare, nil
}

// DefaultCELCostLimit is what one evaluation of a CEL expression may spend by default.
//
// The cost is in cel-go's units, the expression a constraint or a condition;
// CELLimits may set another limit. A unit is roughly one elementary
// operation (a comparison, a field access, one iteration step, ten
// characters of a string operation), so 1,000,000 units are about 200,000
// iterations of a simple loop: far more than a relation between a handful of
// arguments needs (tens of units), and the per-expression limit Kubernetes
// sets for its CEL validation rules. It bounds what one hostile call can
// make the gate spend on each expression.
const DefaultCELCostLimit uint64 = 1_000_000

// celInterruptEvery is how many evaluation steps (nodes evaluated, so at
// least every few loop iterations) run between two checks of the call's
// context.
const celInterruptEvery = 100

// CELLimits bound the evaluation of constraint and condition expressions.
type CELLimits struct {
	// CostLimit is the most one evaluation may spend, in cel-go cost
	// units; an evaluation that reaches it stops and the call is refused.
	// An expression whose estimated worst case, given the declared bounds
	// of the parameters, exceeds it is refused when the gate is built.
	// 0 means DefaultCELCostLimit.
	CostLimit uint64
	// MaxArgBytes is the largest argument document the enforcer accepts
	// (middleware.Limits.MaxBytes). The cost estimate bounds a string, an
	// array or an object without a declared maxLength or maxItems by it.
	// 0 means middleware.DefaultMaxArgBytes.
	MaxArgBytes int
}

func (l CELLimits) withDefaults() CELLimits {
	if l.CostLimit == 0 {
		l.CostLimit = DefaultCELCostLimit
	}
	if l.MaxArgBytes <= 0 {
		l.MaxArgBytes = middleware.DefaultMaxArgBytes
	}
	return l
}

// celLimitsOf returns the first of lim with its defaults filled in.
func celLimitsOf(lim []CELLimits) CELLimits {
	if len(lim) == 0 {
		return CELLimits{}.withDefaults()
	}
	return lim[0].withDefaults()
}

// ErrCELCostLimit is the cause of a refusal whose expression reached the
// cost limit.
var ErrCELCostLimit = errors.New("the expression reached its cost limit")

// celExpr is one compiled boolean expression.
type celExpr struct {
	src string
	prg cel.Program
}

// compileCEL compiles a boolean expression in env. bare are the parameter
// names env declares as variables; a, when not nil, is the action whose
// declared parameter bounds the cost estimate uses. An expression whose
// estimated worst-case cost exceeds lim.CostLimit is an error.
func compileCEL(env *cel.Env, bare map[string]bool, src string, lim CELLimits, a *manifest.Action) (*celExpr, error) {
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, iss.Err()
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("expression must be boolean, is %s", t)
	}
	est, err := env.EstimateCost(ast, newCELSizes(a, bare, lim.MaxArgBytes))
	if err != nil {
		return nil, fmt.Errorf("the cost of the expression cannot be estimated: %w", err)
	}
	if est.Max > lim.CostLimit {
		return nil, &CELCostError{Estimate: est.Max, Limit: lim.CostLimit}
	}
	prg, err := env.Program(ast,
		cel.EvalOptions(cel.OptOptimize),
		cel.CostLimit(lim.CostLimit),
		cel.InterruptCheckFrequency(celInterruptEvery),
		cel.CustomDecoratorV2(celWatchErrors))
	if err != nil {
		return nil, err
	}
	return &celExpr{src: src, prg: prg}, nil
}

// CELCostError is the error for an expression whose estimated worst-case
// cost exceeds the limit.
type CELCostError struct {
	// Estimate is the estimated worst case, in cel-go cost units
	// (math.MaxUint64 when nothing bounds it).
	Estimate uint64
	// Limit is the cost limit.
	Limit uint64
}

func (e *CELCostError) Error() string {
	est := fmt.Sprint(e.Estimate)
	if e.Estimate == math.MaxUint64 {
		est = "unbounded"
	}
	return fmt.Sprintf("its estimated worst-case cost (%s) exceeds the cost limit (%d): declare maxLength on the strings and maxItems on the arrays it reads (and on their items), or raise the limit", est, e.Limit)
}

// celOutcome is what one evaluation decided.
type celOutcome int

const (
	celHolds celOutcome = iota
	celFails
	// celBroken: the expression could not be evaluated on these arguments
	// (an error anywhere in the evaluation, also one that || or && would
	// have absorbed, such as reading an argument the call left out; the
	// cost limit; the call's context ended; a result that is not a
	// boolean). Gates refuse: never allow on an error.
	celBroken
)

// eval runs the expression over vars. It stops when ctx ends or the cost
// limit is reached.
func (x *celExpr) eval(ctx context.Context, vars *celVars) (celOutcome, error) {
	vars.err = nil
	out, _, err := x.prg.ContextEval(ctx, vars)
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) {
			switch cancelled.Cause {
			case interpreter.CostLimitExceeded:
				err = fmt.Errorf("%w: %w", ErrCELCostLimit, err)
			case interpreter.ContextCancelled:
				err = fmt.Errorf("%w: %w", err, context.Cause(ctx))
			}
		}
		return celBroken, err
	}
	if vars.err != nil {
		return celBroken, vars.err
	}
	switch out {
	case types.True:
		return celHolds, nil
	case types.False:
		return celFails, nil
	}
	return celBroken, fmt.Errorf("expression yielded %s, not a boolean", out.Type())
}

// celSelf is the name under which a celVars resolves to itself: it is not
// a CEL identifier, so no expression can read it. celWatch finds the
// evaluation's activation through it from any scope of the evaluation.
const celSelf = "\x00axgate"

// celWatchErrors wraps every node of a program (constants aside, which
// cannot fail) so that an error value a node yields is recorded on the
// evaluation's celVars, even when an enclosing || or && — which CEL makes
// commutative, so that "error || true" is true — or a comprehension
// absorbs it. This is what makes an absent argument visible only through
// has(): "args.x" on a call without x yields an error (no such key), and
// the evaluation refuses, whatever the rest of the expression says.
func celWatchErrors(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	switch n := i.(type) {
	case *celWatch, *celWatchAttr, interpreter.InterpretableConst:
		return i, nil
	case interpreter.InterpretableAttribute:
		// The planner qualifies attributes further (args.a.b): the wrapper
		// must stay one.
		return &celWatchAttr{n}, nil
	}
	return &celWatch{i}, nil
}

type celWatch struct{ interpreter.InterpretableV2 }

func (w *celWatch) Exec(f *interpreter.ExecutionFrame) ref.Val {
	celInterrupt(f)
	return celNote(f, w.InterpretableV2.Exec(f))
}

func (w *celWatch) Eval(a interpreter.Activation) ref.Val {
	return interpreter.EvalActivation(a, w.Exec)
}

type celWatchAttr struct {
	interpreter.InterpretableAttribute
}

func (w *celWatchAttr) Exec(f *interpreter.ExecutionFrame) ref.Val {
	celInterrupt(f)
	return celNote(f, w.InterpretableAttribute.Exec(f))
}

func (w *celWatchAttr) Eval(a interpreter.Activation) ref.Val {
	return interpreter.EvalActivation(a, w.Exec)
}

// celInterrupt stops the evaluation when the call's context has ended
// (checked every celInterruptEvery nodes). cel-go's own check sits in its
// comprehension nodes, which the decorators it applies after celWatchErrors
// no longer recognize once wrapped; this check runs in every wrapped node,
// so in every iteration of a loop. The panic is how cel-go itself cancels an
// evaluation: Eval recovers it and returns the error.
func celInterrupt(f *interpreter.ExecutionFrame) {
	if f.CheckInterrupt() {
		panic(interpreter.EvalCancelledError{Cause: interpreter.ContextCancelled, Message: "operation interrupted: the call's context ended"})
	}
}

// celNote records v on the evaluation's celVars when it is an error, and
// returns it.
func celNote(f *interpreter.ExecutionFrame, v ref.Val) ref.Val {
	if e, ok := v.(*types.Err); ok {
		if self, found := f.ResolveName(celSelf); found {
			if vars, ok := self.(*celVars); ok && vars.err == nil {
				vars.err = e
			}
		}
	}
	return v
}

// celVars resolves the variables of one evaluation. principal is built only
// when an expression reads it.
type celVars struct {
	// err is the first error a node of the current evaluation yielded.
	err       error
	args      map[string]any
	call      *middleware.Call
	principal map[string]any
	result    any
	hasResult bool
}

var _ interpreter.Activation = (*celVars)(nil)

// celVarsPool recycles activations: cel-go keeps none past Eval, and an
// activation handed to it as an interface would otherwise cost an
// allocation per call.
var celVarsPool = sync.Pool{New: func() any { return new(celVars) }}

func getCELVars(args map[string]any, call *middleware.Call) *celVars {
	v := celVarsPool.Get().(*celVars)
	v.args, v.call = args, call
	return v
}

// release clears v, so the pool holds no call's data, and returns it.
func (v *celVars) release() {
	*v = celVars{}
	celVarsPool.Put(v)
}

// ResolveName implements interpreter.Activation.
func (v *celVars) ResolveName(name string) (any, bool) {
	switch name {
	case celSelf:
		return v, true
	case celArgs:
		return v.args, true
	case celPrincipal:
		if v.principal == nil {
			v.principal = principalValue(&v.call.Principal)
		}
		return v.principal, true
	case celResult:
		if v.hasResult {
			return v.result, true
		}
		return nil, false
	}
	val, ok := v.args[name]
	return val, ok
}

// Parent implements interpreter.Activation.
func (v *celVars) Parent() interpreter.Activation { return nil }

func principalValue(p *middleware.Principal) map[string]any {
	claims := p.Claims
	if claims == nil {
		claims = map[string]any{}
	}
	return map[string]any{
		"id":     p.ID,
		"tenant": p.Tenant,
		"roles":  celStringList(p.Roles),
		"scopes": celStringList(p.Scopes),
		"claims": claims,
	}
}

func celStringList(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
