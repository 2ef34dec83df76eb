// Command apicount counts the exported API of Go packages: exported
// package-level identifiers (funcs, types, vars, consts) and the exported
// methods of exported types, test files excluded. It prints one line per package directory,
// plus the number of exported root options (funcs named With*), so that a
// change to the API's size is measured, not guessed.
//
//	go run ./.ci/apicount . gates middleware
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strings"
)

func main() {
	dirs := os.Args[1:]
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	for _, dir := range dirs {
		total, with, err := count(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "apicount:", err)
			os.Exit(2)
		}
		fmt.Printf("%-24s exported=%d with_options=%d\n", dir, total, with)
	}
}

// count returns the exported identifiers and methods of the package in dir,
// and how many of them are package-level funcs named With*.
func count(dir string) (total, with int, err error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		return 0, 0, err
	}
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if strings.HasSuffix(n, "_test") || n == "main" && len(pkgs) > 1 {
			continue
		}
		for _, f := range pkgs[n].Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() || d.Recv != nil && !ast.IsExported(receiverType(d.Recv)) {
						// A method of an unexported type (a heap's Len,
						// a decorator's Eval) is in no godoc page: it
						// is not part of the API.
						continue
					}
					total++
					if d.Recv == nil && strings.HasPrefix(d.Name.Name, "With") {
						with++
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								total++
							}
						case *ast.ValueSpec:
							for _, id := range s.Names {
								if id.IsExported() {
									total++
								}
							}
						}
					}
				}
			}
		}
	}
	return total, with, nil
}

// receiverType is the name of a method's receiver type, without pointer or
// type parameters.
func receiverType(recv *ast.FieldList) string {
	if recv == nil || len(recv.List) == 0 {
		return ""
	}
	t := recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
