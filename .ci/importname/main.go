// Command importname keeps one import name for axgate's errors package:
// axerr, in every Go file and doc comment of the repository and in the Go
// blocks of its Markdown files.
//
//	go run ./.ci/importname .     # check: list offenders, exit 1 if any
//	go run ./.ci/importname -w .  # rewrite them
//
// A Go file that imports github.com/axgate/axgate/errors under another name
// (or none) gets it as axerr, with its uses renamed; a comment that names one
// of the package's own identifiers as errors.X (*errors.Error, errors.Code…),
// which the standard library's errors package does not have, names it
// axerr.X; a Markdown import line of the package without the name gets it.
// Every module of the repository is walked (testdata, hidden and vendor
// directories skipped).
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
	"regexp"
	"strconv"
	"strings"
)

const (
	path = "github.com/axgate/axgate/errors"
	name = "axerr"
)

// stdNames are the exported names of the standard library's errors package:
// errors.X in a comment with X among them may mean that package.
var stdNames = map[string]bool{"New": true, "Is": true, "As": true, "Unwrap": true, "Join": true, "ErrUnsupported": true}

var (
	commentRef = regexp.MustCompile(`\berrors\.([A-Z]\w*)`)
	mdImport   = regexp.MustCompile(`(?m)^(\s*(?:import\s+)?)"github\.com/axgate/axgate/errors"`)
)

func main() {
	write := flag.Bool("w", false, "rewrite the offending files")
	flag.Parse()
	roots := flag.Args()
	if len(roots) == 0 {
		roots = []string{"."}
	}
	offenders := 0
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if n := d.Name(); p != root && (n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
					return filepath.SkipDir
				}
				return nil
			}
			var fix func(string, []byte) ([]byte, []string, error)
			switch {
			case strings.HasSuffix(p, ".go"):
				fix = fixGo
			case strings.HasSuffix(p, ".md"):
				fix = fixMarkdown
			default:
				return nil
			}
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out, what, err := fix(p, src)
			if err != nil {
				return err
			}
			if len(what) == 0 {
				return nil
			}
			offenders++
			for _, w := range what {
				if !strings.HasPrefix(w, p+":") {
					w = p + ": " + w
				}
				fmt.Println(w)
			}
			if *write {
				return os.WriteFile(p, out, 0o644)
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "importname:", err)
			os.Exit(2)
		}
	}
	if offenders > 0 && !*write {
		fmt.Fprintf(os.Stderr, "importname: %d files do not import %s as %s: go run ./.ci/importname -w .\n", offenders, path, name)
		os.Exit(1)
	}
}

// fixGo returns src with the import named axerr, its uses renamed and the
// comments' errors.X references to the package renamed, and what changed.
func fixGo(filename string, src []byte) ([]byte, []string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.ParseComments)
	if err != nil {
		return nil, nil, err
	}
	var what []string
	// The errors package's own files name its identifiers bare; their
	// comments' errors.X means the standard library.
	own := f.Name.Name == "errors" && !strings.HasSuffix(filename, "_test.go")
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p != path {
			continue
		}
		old := "errors"
		if imp.Name != nil {
			old = imp.Name.Name
		}
		if old == name || old == "_" || old == "." {
			break
		}
		if obj := f.Scope.Lookup(name); obj != nil {
			return nil, nil, fmt.Errorf("%s: %s is declared in the file; rename it first", filename, name)
		}
		what = append(what, fmt.Sprintf("imports %s as %s", path, old))
		imp.Name = ast.NewIdent(name)
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == old && id.Obj == nil {
					id.Name = name
				}
			}
			return true
		})
	}
	if !own {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				fixed := commentRef.ReplaceAllStringFunc(c.Text, func(m string) string {
					if stdNames[m[len("errors."):]] {
						return m
					}
					return name + m[len("errors"):]
				})
				if fixed != c.Text {
					what = append(what, fmt.Sprintf("%s: comment names errors.X for %s.X", fset.Position(c.Pos()), name))
					c.Text = fixed
				}
			}
		}
	}
	if len(what) == 0 {
		return src, nil, nil
	}
	var buf bytes.Buffer
	if err := format.Node(&buf, fset, f); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), what, nil
}

// fixMarkdown names the package's import axerr in Go code of a Markdown file.
func fixMarkdown(_ string, src []byte) ([]byte, []string, error) {
	var what []string
	out := mdImport.ReplaceAllFunc(src, func(m []byte) []byte {
		what = append(what, "a Go snippet imports "+path+" without the name "+name)
		sub := mdImport.FindSubmatch(m)
		return append(append(append([]byte{}, sub[1]...), name+" "...), m[len(sub[1]):]...)
	})
	return out, what, nil
}
