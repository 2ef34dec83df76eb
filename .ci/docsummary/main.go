// Command docsummary checks that long doc comments open with a one-line summary.
//
// A doc comment of more than four lines on an exported declaration (a func, a method of an
// exported type, a type, a var or a const) or on a package clause must have a first line that
// ends a sentence, so that godoc's synopsis and a reader skimming the source get the whole
// summary in one line; the explanation follows after a blank "//" line. Short comments are
// left alone: they are their own summary.
//
// Each argument is a directory, walked recursively, so that one run covers every module of the
// workspace. Test files, main packages (cmd/axgate, the .ci commands), testdata, examples and
// directories whose names begin with "." or "_" are skipped. Offenders are listed as
// "file:line: name: first line"; the exit status is 1 if there is any, 2 if a file cannot be
// read or parsed.
//
//	go run ./.ci/docsummary .
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// maxUnsummarized is the longest doc comment, in lines, whose first line may run on into the
// next.
const maxUnsummarized = 4

func main() {
	roots := os.Args[1:]
	if len(roots) == 0 {
		roots = []string{"."}
	}
	var offenders []string
	for _, root := range roots {
		found, err := walk(root)
		if err != nil {
			fmt.Fprintln(os.Stderr, "docsummary:", err)
			os.Exit(2)
		}
		offenders = append(offenders, found...)
	}
	if len(offenders) == 0 {
		return
	}
	for _, o := range offenders {
		fmt.Println(o)
	}
	fmt.Fprintf(os.Stderr, "docsummary: %d doc comments longer than %d lines do not open with a one-line summary:\n"+
		"make the first line one complete sentence, then a blank // line, then the rest\n",
		len(offenders), maxUnsummarized)
	os.Exit(1)
}

// walk checks every package directory under root.
func walk(root string) ([]string, error) {
	var offenders []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != root {
			name := d.Name()
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				name == "testdata" || name == "examples" || name == "vendor" {
				return filepath.SkipDir
			}
		}
		found, err := checkDir(path)
		offenders = append(offenders, found...)
		return err
	})
	return offenders, err
}

// checkDir checks the non-test Go files of the package in dir, if it is not a main package.
func checkDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if f.Name.Name == "main" {
			return nil, nil
		}
		files = append(files, f)
	}
	var offenders []string
	check := func(name string, doc *ast.CommentGroup) {
		if doc == nil {
			return
		}
		lines := strings.Split(strings.TrimSpace(doc.Text()), "\n")
		if len(lines) <= maxUnsummarized || endsSentence(lines[0]) {
			return
		}
		pos := fset.Position(doc.Pos())
		offenders = append(offenders, fmt.Sprintf("%s:%d: %s: %s", pos.Filename, pos.Line, name, strings.TrimSpace(lines[0])))
	}
	for _, f := range files {
		check("package "+f.Name.Name, f.Doc)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				name := d.Name.Name
				if d.Recv != nil {
					recv := receiverType(d.Recv)
					if !ast.IsExported(recv) {
						continue // in no godoc page
					}
					name = recv + "." + name
				}
				check(name, d.Doc)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					doc, name := (*ast.CommentGroup)(nil), ""
					switch s := s.(type) {
					case *ast.TypeSpec:
						doc, name = s.Doc, s.Name.Name
					case *ast.ValueSpec:
						doc = s.Doc
						for _, n := range s.Names {
							if n.IsExported() {
								name = n.Name
								break
							}
						}
					}
					if !ast.IsExported(name) {
						continue
					}
					if doc == nil && len(d.Specs) == 1 {
						doc = d.Doc
					}
					check(name, doc)
				}
			}
		}
	}
	sort.Strings(offenders)
	return offenders, nil
}

// receiverType returns the name of a method's receiver type, without pointer or type
// parameters.
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
		case *ast.ParenExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// endsSentence reports whether a comment's first line ends a sentence: with a full stop, a
// question or exclamation mark, possibly inside closing quotes or brackets, but not with an
// abbreviation such as "e.g." that goes on into the next line.
func endsSentence(line string) bool {
	line = strings.TrimRight(strings.TrimSpace(line), `)"'”’]`)
	for _, abbr := range []string{"e.g.", "i.e.", "cf.", "vs.", "..."} {
		if strings.HasSuffix(line, abbr) {
			return false
		}
	}
	return strings.HasSuffix(line, ".") || strings.HasSuffix(line, "?") || strings.HasSuffix(line, "!")
}
