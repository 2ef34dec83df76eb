package lint

import (
	"fmt"
	"strings"

	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/parser"
	"github.com/axgate/axgate/manifest"
)

// celArgs is the name of the argument object in constraint expressions.
const celArgs = "args"

// constraints warns about every constraint that reads an optional argument
// outside a has() guard: the enforcer refuses a call that leaves such an
// argument out (constraint_not_evaluable), whatever the rest of the
// expression says.
func (l *linter) constraints(a *manifest.Action) {
	optional := map[string]bool{}
	for _, p := range a.Parameters {
		if !p.Required {
			optional[p.Name] = true
		}
	}
	if len(optional) == 0 {
		return
	}
	for _, c := range a.Constraints {
		names := unguardedOptionalReads(c.Expr, optional)
		if len(names) == 0 {
			continue
		}
		first := "args." + names[0]
		l.add(ruleConstraintOptional, SeverityWarning, c.Pointer,
			fmt.Sprintf("guard each read with has(): (has(%s) && …%s…) where a call without it must fail the constraint, (!has(%s) || …%s…) where it must pass", first, first, first, first),
			"constraint %s reads the optional argument%s %s outside has(): a call without %s is refused (constraint_not_evaluable)",
			c.Name, plural(len(names)), strings.Join(names, ", "), strings.Join(names, " or "))
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// unguardedOptionalReads returns the optional names a CEL expression reads with no guard.
//
// It parses the CEL expression src and returns, in order of first read,
// the names in optional that it reads (args.x, args["x"], or the bare
// parameter x) where no has(args.x) (or "x" in args) guards the read: the
// left side of an && or the condition of a ?: that shows x present, or the
// left side of an || that shows it present when false (!has(args.x) || …).
// It returns nil for an expression that does not parse: compiling it
// reports that.
func unguardedOptionalReads(src string, optional map[string]bool) []string {
	tree, errs := parser.Parse(common.NewTextSource(src))
	if errs != nil && len(errs.GetErrors()) > 0 {
		return nil
	}
	w := &guardWalker{optional: optional, seen: map[string]bool{}}
	w.walk(tree.Expr(), nil, nil)
	return w.out
}

type guardWalker struct {
	optional map[string]bool
	seen     map[string]bool
	out      []string
}

// walk visits e, where the names in guarded are known to be present and
// locals are comprehension variables (which shadow parameters).
func (w *guardWalker) walk(e ast.Expr, guarded, locals map[string]bool) {
	switch e.Kind() {
	case ast.IdentKind:
		if n := e.AsIdent(); !locals[n] {
			w.read(n, guarded)
		}
	case ast.SelectKind:
		s := e.AsSelect()
		if w.isArgs(s.Operand(), locals) {
			if !s.IsTestOnly() {
				w.read(s.FieldName(), guarded)
			}
			return
		}
		w.walk(s.Operand(), guarded, locals)
	case ast.CallKind:
		c := e.AsCall()
		args := c.Args()
		switch fn := c.FunctionName(); {
		case fn == "_&&_" && len(args) == 2:
			w.walk(args[0], guarded, locals)
			w.walk(args[1], union(guarded, w.present(args[0], true, locals)), locals)
			return
		case fn == "_||_" && len(args) == 2:
			w.walk(args[0], guarded, locals)
			w.walk(args[1], union(guarded, w.present(args[0], false, locals)), locals)
			return
		case fn == "_?_:_" && len(args) == 3:
			w.walk(args[0], guarded, locals)
			w.walk(args[1], union(guarded, w.present(args[0], true, locals)), locals)
			w.walk(args[2], union(guarded, w.present(args[0], false, locals)), locals)
			return
		case fn == "_[_]" && len(args) == 2 && w.isArgs(args[0], locals):
			if k, ok := stringLiteral(args[1]); ok {
				w.read(k, guarded)
				return
			}
		case fn == "@in" && len(args) == 2 && w.isArgs(args[1], locals):
			if _, ok := stringLiteral(args[0]); ok {
				return
			}
		}
		if c.IsMemberFunction() {
			w.walk(c.Target(), guarded, locals)
		}
		for _, a := range args {
			w.walk(a, guarded, locals)
		}
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			w.walk(el, guarded, locals)
		}
	case ast.MapKind:
		for _, en := range e.AsMap().Entries() {
			me := en.AsMapEntry()
			w.walk(me.Key(), guarded, locals)
			w.walk(me.Value(), guarded, locals)
		}
	case ast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			w.walk(f.AsStructField().Value(), guarded, locals)
		}
	case ast.ComprehensionKind:
		comp := e.AsComprehension()
		w.walk(comp.IterRange(), guarded, locals)
		w.walk(comp.AccuInit(), guarded, locals)
		inner := union(locals, map[string]bool{comp.IterVar(): true, comp.AccuVar(): true})
		if comp.HasIterVar2() {
			inner[comp.IterVar2()] = true
		}
		w.walk(comp.LoopCondition(), guarded, inner)
		w.walk(comp.LoopStep(), guarded, inner)
		w.walk(comp.Result(), guarded, inner)
	}
}

func (w *guardWalker) read(name string, guarded map[string]bool) {
	if w.optional[name] && !guarded[name] && !w.seen[name] {
		w.seen[name] = true
		w.out = append(w.out, name)
	}
}

func (w *guardWalker) isArgs(e ast.Expr, locals map[string]bool) bool {
	return e.Kind() == ast.IdentKind && e.AsIdent() == celArgs && !locals[celArgs]
}

// present returns the argument names e shows present when it evaluates to
// when: has(args.x) and "x" in args when true, their negation when false,
// through && (true), || (false) and !.
func (w *guardWalker) present(e ast.Expr, when bool, locals map[string]bool) map[string]bool {
	switch e.Kind() {
	case ast.SelectKind:
		s := e.AsSelect()
		if when && s.IsTestOnly() && w.isArgs(s.Operand(), locals) {
			return map[string]bool{s.FieldName(): true}
		}
	case ast.CallKind:
		c := e.AsCall()
		args := c.Args()
		switch c.FunctionName() {
		case "!_":
			if len(args) == 1 {
				return w.present(args[0], !when, locals)
			}
		case "_&&_":
			if when && len(args) == 2 {
				return union(w.present(args[0], true, locals), w.present(args[1], true, locals))
			}
		case "_||_":
			if !when && len(args) == 2 {
				return union(w.present(args[0], false, locals), w.present(args[1], false, locals))
			}
		case "@in":
			if when && len(args) == 2 && w.isArgs(args[1], locals) {
				if k, ok := stringLiteral(args[0]); ok {
					return map[string]bool{k: true}
				}
			}
		}
	}
	return nil
}

func stringLiteral(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().Value().(string)
	return s, ok
}

func union(a, b map[string]bool) map[string]bool {
	if len(b) == 0 {
		return a
	}
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
