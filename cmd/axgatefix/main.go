// Command axgatefix rewrites Go code written against axgate's API before the
// v1 reshaping (issue 29) to the new names: the gate machinery moved to an
// internal package, the memory stores to gates/memstore, the stage names to
// middleware, one option per setting.
//
//	go run github.com/axgate/axgate/cmd/axgatefix@latest -w ./...
//
// Without -w it prints the files it would change and exits 1 when there are
// any. Names that have no mechanical replacement (the gate constructors,
// the store helpers) are reported as file:line: name: what to do instead,
// and make it exit 1. The mapping is in the CHANGELOG (v1 API).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

func main() {
	write := flag.Bool("w", false, "write the rewritten files")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: axgatefix [-w] [dir|file|dir/...]...")
		flag.PrintDefaults()
	}
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		args = []string{"./..."}
	}
	files, err := goFiles(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "axgatefix:", err)
		os.Exit(2)
	}
	failed := false
	for _, fn := range files {
		src, err := os.ReadFile(fn)
		if err != nil {
			fmt.Fprintln(os.Stderr, "axgatefix:", err)
			os.Exit(2)
		}
		out, notes, err := Rewrite(fn, src)
		if err != nil {
			fmt.Fprintln(os.Stderr, "axgatefix:", err)
			os.Exit(2)
		}
		for _, n := range notes {
			fmt.Println(n)
			failed = true
		}
		if bytes.Equal(out, src) {
			continue
		}
		if *write {
			if err := os.WriteFile(fn, out, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "axgatefix:", err)
				os.Exit(2)
			}
			fmt.Println("rewrote", fn)
			continue
		}
		fmt.Println("would rewrite", fn)
		failed = true
	}
	if failed {
		os.Exit(1)
	}
}

// goFiles expands the arguments (files, directories, dir/... patterns) to Go
// files, skipping testdata, vendor and hidden directories under a pattern.
func goFiles(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		if dir, ok := strings.CutSuffix(a, "/..."); ok {
			err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() {
					if n := d.Name(); p != dir && (n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
						return filepath.SkipDir
					}
					return nil
				}
				if strings.HasSuffix(p, ".go") {
					files = append(files, p)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			continue
		}
		fi, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, a)
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".go") {
				files = append(files, filepath.Join(a, e.Name()))
			}
		}
	}
	sort.Strings(files)
	return files, nil
}

// Rewrite returns src rewritten to the new names, and a note for each use of
// a name that has no mechanical replacement.
func Rewrite(filename string, src []byte) ([]byte, []string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.ParseComments)
	if err != nil {
		return nil, nil, err
	}
	r := &rewriter{fset: fset, file: f, local: map[string]string{}}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		name := defaultName(path)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		r.local[name] = path
	}
	if !r.importsAny() {
		return src, nil, nil
	}
	r.rewrite()
	if !r.changed {
		return src, r.notes, nil
	}
	r.fixImports()
	var buf bytes.Buffer
	if err := format.Node(&buf, fset, f); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), r.notes, nil
}

type rewriter struct {
	fset    *token.FileSet
	file    *ast.File
	local   map[string]string // local import name → path
	changed bool
	notes   []string
}

func (r *rewriter) importsAny() bool {
	for _, p := range r.local {
		if p == modulePath || strings.HasPrefix(p, modulePath+"/") {
			return true
		}
	}
	return false
}

// pathOf returns the import path x names when x is a package identifier.
func (r *rewriter) pathOf(x ast.Expr) (string, bool) {
	id, ok := x.(*ast.Ident)
	if !ok || id.Obj != nil {
		return "", false
	}
	p, ok := r.local[id.Name]
	return p, ok
}

// ref returns a selector for path.name, importing path when needed.
func (r *rewriter) ref(path, name string) ast.Expr {
	for n, p := range r.local {
		if p == path {
			return &ast.SelectorExpr{X: ast.NewIdent(n), Sel: ast.NewIdent(name)}
		}
	}
	n := defaultName(path)
	r.local[n] = path
	return &ast.SelectorExpr{X: ast.NewIdent(n), Sel: ast.NewIdent(name)}
}

func (r *rewriter) note(pos token.Pos, format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf("%s: %s", r.fset.Position(pos), fmt.Sprintf(format, args...)))
}

func (r *rewriter) rewrite() {
	// Calls first: they replace whole expressions (and argument lists).
	ast.Inspect(r.file, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			var args []ast.Expr
			for _, a := range x.Args {
				args = append(args, r.expandArg(a)...)
			}
			x.Args = args
			r.rewriteCall(x)
		case *ast.CompositeLit: // []axgate.Option{…}
			var elts []ast.Expr
			for _, e := range x.Elts {
				elts = append(elts, r.expandArg(e)...)
			}
			x.Elts = elts
		}
		return true
	})
	// A pointer to a memory store type becomes the store's interface:
	// *gates.MemoryLimiter → gates.Limiter.
	replaceExprs(r.file, func(x ast.Expr) ast.Expr {
		star, ok := x.(*ast.StarExpr)
		if !ok {
			return x
		}
		sel, ok := star.X.(*ast.SelectorExpr)
		if !ok {
			return x
		}
		path, ok := r.pathOf(sel.X)
		if !ok {
			return x
		}
		to, ok := pointerTypes[path+"."+sel.Sel.Name]
		if !ok {
			return x
		}
		r.changed = true
		return r.ref(split(to))
	})
	// axerr.ReasonX → axerr.Reason("x"): the reasons are wire strings.
	replaceExprs(r.file, func(x ast.Expr) ast.Expr {
		sel, ok := x.(*ast.SelectorExpr)
		if !ok {
			return x
		}
		path, ok := r.pathOf(sel.X)
		if !ok || path != modulePath+"/errors" {
			return x
		}
		v, ok := reasonValues[sel.Sel.Name]
		if !ok {
			return x
		}
		r.changed = true
		return &ast.CallExpr{
			Fun:    &ast.SelectorExpr{X: sel.X, Sel: &ast.Ident{Name: "Reason", NamePos: sel.Sel.NamePos}},
			Lparen: sel.End(),
			Args:   []ast.Expr{&ast.BasicLit{ValuePos: sel.End(), Kind: token.STRING, Value: strconv.Quote(v)}},
			Rparen: sel.End(),
		}
	})
	// Constants whose values are wire strings (token.AlgEdDSA → "EdDSA",
	// token.ReasonExpired → token.Reason("expired")).
	replaceExprs(r.file, func(x ast.Expr) ast.Expr {
		sel, ok := x.(*ast.SelectorExpr)
		if !ok {
			return x
		}
		path, ok := r.pathOf(sel.X)
		if !ok {
			return x
		}
		v, ok := literals[path+"."+sel.Sel.Name]
		if !ok {
			return x
		}
		r.changed = true
		lit := &ast.BasicLit{ValuePos: sel.Pos(), Kind: token.STRING, Value: strconv.Quote(v.value)}
		if v.typ == "" {
			return lit
		}
		lit.ValuePos = sel.End()
		return &ast.CallExpr{
			Fun:    &ast.SelectorExpr{X: sel.X, Sel: &ast.Ident{Name: v.typ, NamePos: sel.Sel.NamePos}},
			Lparen: sel.End(),
			Args:   []ast.Expr{lit},
			Rparen: sel.End(),
		}
	})
	// Then the names, wherever they appear.
	ast.Inspect(r.file, func(n ast.Node) bool {
		x, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		path, ok := r.pathOf(x.X)
		if !ok {
			return true
		}
		key := path + "." + x.Sel.Name
		if to, ok := renames[key]; ok {
			sel := r.ref(split(to)).(*ast.SelectorExpr)
			x.X, x.Sel = sel.X, sel.Sel
			r.changed = true
		} else if hint, ok := removed[key]; ok {
			r.note(x.Pos(), "%s.%s: %s", defaultName(path), x.Sel.Name, hint)
		}
		return true
	})
}

// setPos gives every unset position under n the position pos.
func setPos(n ast.Node, pos token.Pos) {
	posType := reflect.TypeFor[token.Pos]()
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				fv := v.Field(i)
				if !fv.CanSet() {
					continue
				}
				if fv.Type() == posType {
					// Ellipsis set would add "..." to a call.
					if fv.Int() == 0 && v.Type().Field(i).Name != "Ellipsis" {
						fv.SetInt(int64(pos))
					}
					continue
				}
				if _, isObj := fv.Interface().(*ast.Object); isObj {
					continue
				}
				walk(fv)
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(n))
}

// replaceExprs replaces, everywhere under root, each expression e by f(e)
// (children first).
func replaceExprs(root ast.Node, f func(ast.Expr) ast.Expr) {
	exprType := reflect.TypeFor[ast.Expr]()
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				fv := v.Field(i)
				if !fv.CanSet() {
					continue
				}
				if _, isObj := fv.Interface().(*ast.Object); isObj {
					continue // scopes point back up the tree
				}
				if _, isScope := fv.Interface().(*ast.Scope); isScope {
					continue
				}
				walk(fv)
				if fv.Type() == exprType && !fv.IsNil() {
					fv.Set(reflect.ValueOf(f(fv.Interface().(ast.Expr))))
				}
			}
		case reflect.Slice:
			for i := range v.Len() {
				ev := v.Index(i)
				walk(ev)
				if ev.Type() == exprType && !ev.IsNil() {
					ev.Set(reflect.ValueOf(f(ev.Interface().(ast.Expr))))
				}
			}
		}
	}
	walk(reflect.ValueOf(root))
}

// expandArg rewrites one argument of a call (or element of a composite
// literal), possibly into several:
// axgate.WithCondition(name, check) → WithPrecondition and WithPostcondition.
func (r *rewriter) expandArg(a ast.Expr) []ast.Expr {
	call, ok := a.(*ast.CallExpr)
	if !ok || !r.is(call.Fun, modulePath, "WithCondition") || len(call.Args) != 2 || call.Ellipsis.IsValid() {
		return []ast.Expr{a}
	}
	r.changed = true
	name, check := call.Args[0], call.Args[1]
	pre := &ast.CallExpr{Fun: r.ref(modulePath, "WithPrecondition"), Args: []ast.Expr{name, check}}
	post := &ast.CallExpr{Fun: r.ref(modulePath, "WithPostcondition"), Args: []ast.Expr{name, r.resultCheck(check)}}
	// New nodes take the old call's place, so the printer keeps the lines
	// around them as they were.
	setPos(pre, call.Pos())
	setPos(post, call.End())
	return []ast.Expr{pre, post}
}

// resultCheck is func(ctx context.Context, call *middleware.Call, _ middleware.Result) error { return check(ctx, call) }.
func (r *rewriter) resultCheck(check ast.Expr) ast.Expr {
	ctxType := r.ref("context", "Context")
	param := func(name string, typ ast.Expr) *ast.Field {
		return &ast.Field{Names: []*ast.Ident{ast.NewIdent(name)}, Type: typ}
	}
	return &ast.FuncLit{
		Type: &ast.FuncType{
			Params: &ast.FieldList{List: []*ast.Field{
				param("ctx", ctxType),
				param("call", &ast.StarExpr{X: r.ref(modulePath+"/middleware", "Call")}),
				param("_", r.ref(modulePath+"/middleware", "Result")),
			}},
			Results: &ast.FieldList{List: []*ast.Field{{Type: ast.NewIdent("error")}}},
		},
		Body: &ast.BlockStmt{List: []ast.Stmt{&ast.ReturnStmt{Results: []ast.Expr{
			&ast.CallExpr{Fun: check, Args: []ast.Expr{ast.NewIdent("ctx"), ast.NewIdent("call")}},
		}}}},
	}
}

// rewriteCall rewrites one call in place.
func (r *rewriter) rewriteCall(call *ast.CallExpr) {
	switch {
	case r.is(call.Fun, modulePath, "WithIdempotencyStore") && len(call.Args) == 1:
		// axgate.WithIdempotencyStore(s) → axgate.WithIdempotency(gates.IdempotencyOptions{Store: s})
		r.changed = true
		pos := call.Pos()
		call.Fun = r.ref(modulePath, "WithIdempotency")
		lit := &ast.CompositeLit{
			Type: r.ref(modulePath+"/gates", "IdempotencyOptions"),
			Elts: []ast.Expr{&ast.KeyValueExpr{Key: ast.NewIdent("Store"), Value: call.Args[0]}},
		}
		setPos(call.Fun, pos)
		setPos(lit, call.Args[0].Pos())
		call.Args = []ast.Expr{lit}
	case r.is(call.Fun, "errors", "Is") && len(call.Args) == 2 &&
		(r.is(call.Args[1], modulePath+"/gates", "ErrApprovalQuota") || r.is(call.Args[1], modulePath+"/gates", "ErrIdempotencyQuota")):
		// errors.Is(err, gates.ErrApprovalQuota) → errors.As(err, new(*gates.QuotaError))
		r.changed = true
		call.Fun.(*ast.SelectorExpr).Sel = ast.NewIdent("As")
		call.Args[1] = &ast.CallExpr{Fun: ast.NewIdent("new"), Args: []ast.Expr{&ast.StarExpr{X: r.ref(modulePath+"/gates", "QuotaError")}}}
	}
}

// is reports whether x is the selector path.name.
func (r *rewriter) is(x ast.Expr, path, name string) bool {
	sel, ok := x.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	p, ok := r.pathOf(sel.X)
	return ok && p == path
}

// fixImports adds the imports the rewrite refers to and drops those no
// longer used.
func (r *rewriter) fixImports() {
	used := map[string]bool{}
	ast.Inspect(r.file, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Obj == nil {
				used[id.Name] = true
			}
		}
		return true
	})
	have := map[string]bool{}
	var specs []ast.Spec
	for _, d := range r.file.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.IMPORT {
			continue
		}
		kept := g.Specs[:0]
		for _, s := range g.Specs {
			imp := s.(*ast.ImportSpec)
			path, _ := strconv.Unquote(imp.Path.Value)
			name := defaultName(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if name != "_" && name != "." && !used[name] && strings.HasPrefix(path, modulePath) {
				continue // only our own imports can have become unused
			}
			have[path] = true
			kept = append(kept, s)
		}
		g.Specs = kept
		specs = g.Specs
	}
	var add []string
	for n, p := range r.local {
		if used[n] && !have[p] {
			add = append(add, n+" "+p)
		}
	}
	sort.Strings(add)
	var g *ast.GenDecl
	for _, d := range r.file.Decls {
		if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.IMPORT {
			g = gd
			break
		}
	}
	if g == nil && len(add) > 0 {
		g = &ast.GenDecl{Tok: token.IMPORT, Lparen: 1}
		r.file.Decls = append([]ast.Decl{g}, r.file.Decls...)
	}
	for _, a := range add {
		n, p, _ := strings.Cut(a, " ")
		spec := &ast.ImportSpec{Path: &ast.BasicLit{Kind: token.STRING, Value: strconv.Quote(p)}}
		if n != lastElem(p) {
			spec.Name = ast.NewIdent(n)
		}
		g.Specs = append(g.Specs, spec)
		if !g.Lparen.IsValid() {
			g.Lparen = g.Pos()
		}
	}
	_ = specs
	// Drop empty import declarations.
	decls := r.file.Decls[:0]
	for _, d := range r.file.Decls {
		if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.IMPORT && len(gd.Specs) == 0 {
			continue
		}
		decls = append(decls, d)
	}
	r.file.Decls = decls
	r.file.Imports = nil
	for _, d := range r.file.Decls {
		if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.IMPORT {
			for _, s := range gd.Specs {
				r.file.Imports = append(r.file.Imports, s.(*ast.ImportSpec))
			}
		}
	}
}

// defaultName is the name a file refers to an import by when it gives none;
// axgate's errors package is axerr by convention (it would shadow the
// standard errors package).
func defaultName(path string) string {
	if path == modulePath+"/errors" {
		return "axerr"
	}
	return lastElem(path)
}

func lastElem(path string) string {
	e := path[strings.LastIndex(path, "/")+1:]
	if strings.HasPrefix(e, "v") {
		if _, err := strconv.Atoi(e[1:]); err == nil && strings.Count(path, "/") > 0 {
			p := path[:strings.LastIndex(path, "/")]
			return p[strings.LastIndex(p, "/")+1:]
		}
	}
	return e
}

func split(s string) (path, name string) {
	i := strings.LastIndex(s, ".")
	return s[:i], s[i+1:]
}
