package gates

import (
	"fmt"
	"regexp"
	"sync"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
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
	base       *cel.Env
	actions    map[*manifest.Action]celActionEnvs
}

type celActionEnvs struct {
	env  *cel.Env
	bare map[string]bool
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

// celExpr is one compiled boolean expression.
type celExpr struct {
	src string
	prg cel.Program
	// refs are the argument names the expression reads directly (a bare
	// parameter, args.name, args["name"]): when one of them is absent and
	// the evaluation fails, the expression does not apply to this call.
	refs []string
}

// compileCEL compiles a boolean expression in env. bare are the parameter
// names env declares as variables.
func compileCEL(env *cel.Env, bare map[string]bool, src string) (*celExpr, error) {
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, iss.Err()
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("expression must be boolean, is %s", t)
	}
	prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, err
	}
	return &celExpr{src: src, prg: prg, refs: celRefs(ast.NativeRep().Expr(), bare)}, nil
}

func celRefs(root celast.Expr, bare map[string]bool) []string {
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	celast.PostOrderVisit(root, celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.IdentKind:
			if bare[e.AsIdent()] {
				add(e.AsIdent())
			}
		case celast.SelectKind:
			s := e.AsSelect()
			if !s.IsTestOnly() && isArgsIdent(s.Operand()) {
				add(s.FieldName())
			}
		case celast.CallKind:
			c := e.AsCall()
			if c.FunctionName() == "_[_]" && len(c.Args()) == 2 && isArgsIdent(c.Args()[0]) && c.Args()[1].Kind() == celast.LiteralKind {
				if k, ok := c.Args()[1].AsLiteral().Value().(string); ok {
					add(k)
				}
			}
		}
	}))
	return out
}

func isArgsIdent(e celast.Expr) bool { return e.Kind() == celast.IdentKind && e.AsIdent() == celArgs }

// celOutcome is what one evaluation decided.
type celOutcome int

const (
	celHolds celOutcome = iota
	celFails
	// celSkipped: the expression reads an argument the call left out, so it
	// does not apply.
	celSkipped
	// celBroken: the expression could not be evaluated on these arguments
	// (or did not yield a boolean). Gates refuse: never allow on an error.
	celBroken
)

// eval runs the expression over vars.
func (x *celExpr) eval(vars *celVars) (celOutcome, error) {
	out, _, err := x.prg.Eval(vars)
	if err != nil {
		for _, r := range x.refs {
			if _, ok := vars.args[r]; !ok {
				return celSkipped, nil
			}
		}
		return celBroken, err
	}
	switch out {
	case types.True:
		return celHolds, nil
	case types.False:
		return celFails, nil
	}
	return celBroken, fmt.Errorf("expression yielded %s, not a boolean", out.Type())
}

// celVars resolves the variables of one evaluation. principal is built only
// when an expression reads it.
type celVars struct {
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
