// Command apicount counts the exported API of Go packages: exported
// package-level identifiers (funcs, types, vars, consts) and the exported
// methods of exported types, test files excluded (struct fields and interface
// methods are not counted; neither are methods of unexported types, which are
// on no godoc page). It prints one line per package directory and a total, so
// that a change to the API's size is measured, not guessed.
//
// Without directory arguments it counts the published packages: every package
// of every module in go.work that is not internal and not under examples/,
// bench/ or cmd/ (test helpers such as gates/storetest included). -max sets
// limits, "all=600,gates=40": the command exits 1 when a count is above its
// limit. -names prints the counted names.
//
//	go run ./.ci/apicount                       # the published packages
//	go run ./.ci/apicount -max all=600,gates=40 # the CI check (.ci/apicount.sh)
//	go run ./.ci/apicount -names gates          # what gates exports
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

func main() {
	maxFlag := flag.String("max", "", `limits, "all=600,gates=40": exit 1 above any`)
	names := flag.Bool("names", false, "print the counted names of each package")
	flag.Parse()
	limits, err := parseLimits(*maxFlag)
	if err != nil {
		fail(err)
	}
	dirs := flag.Args()
	if len(dirs) == 0 {
		if dirs, err = published("."); err != nil {
			fail(err)
		}
	}
	total, over := 0, false
	for _, dir := range dirs {
		dir = filepath.Clean(dir)
		ids, with, err := count(dir)
		if err != nil {
			fail(err)
		}
		total += len(ids)
		mark := ""
		if l, ok := limits[dir]; ok {
			mark = fmt.Sprintf(" (max %d)", l)
			if len(ids) > l {
				mark += " OVER"
				over = true
			}
		}
		fmt.Printf("%-28s exported=%-4d with_options=%d%s\n", dir, len(ids), with, mark)
		if *names {
			fmt.Printf("    %s\n", strings.Join(ids, " "))
		}
	}
	mark := ""
	if l, ok := limits["all"]; ok {
		mark = fmt.Sprintf(" (max %d)", l)
		if total > l {
			mark += " OVER"
			over = true
		}
	}
	fmt.Printf("%-28s exported=%d%s\n", "all", total, mark)
	if over {
		fmt.Fprintln(os.Stderr, "apicount: the exported API is above its limit: unexport what no user calls, implements, configures or matches on")
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "apicount:", err)
	os.Exit(2)
}

// parseLimits reads "all=600,gates=40".
func parseLimits(s string) (map[string]int, error) {
	m := map[string]int{}
	if s == "" {
		return m, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("-max: want name=number, got %q", kv)
		}
		m[filepath.Clean(k)] = n
	}
	return m, nil
}

// published lists the directories of the published packages under root: the
// modules named by go.work's use directives, walked for directories with
// non-test Go files, skipping internal, testdata, hidden directories and
// examples/, bench/, cmd/.
func published(root string) ([]string, error) {
	mods, err := workModules(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	modSet := map[string]bool{}
	for _, m := range mods {
		modSet[filepath.Clean(m)] = true
	}
	var dirs []string
	for _, m := range mods {
		m = filepath.Clean(m)
		err := filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			p = filepath.Clean(p)
			base := d.Name()
			if p != m && (modSet[p] || base == "internal" || base == "testdata" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_")) {
				return filepath.SkipDir
			}
			if top, _, _ := strings.Cut(filepath.ToSlash(p), "/"); top == "examples" || top == "bench" || top == "cmd" {
				return filepath.SkipDir
			}
			if hasGo(p) {
				dirs = append(dirs, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(dirs)
	return dirs, nil
}

func hasGo(dir string) bool {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			return true
		}
	}
	return false
}

// workModules reads the use directives of a go.work file.
func workModules(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mods []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "use (":
			in = true
		case in && line == ")":
			in = false
		case in && line != "" && !strings.HasPrefix(line, "//"):
			mods = append(mods, line)
		case strings.HasPrefix(line, "use "):
			mods = append(mods, strings.TrimSpace(strings.TrimPrefix(line, "use ")))
		}
	}
	return mods, sc.Err()
}

// count returns the exported identifiers and methods (as Type.Method) of the
// package in dir, and how many of them are package-level funcs named With*.
func count(dir string) (ids []string, with int, err error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		return nil, 0, err
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
					if !d.Name.IsExported() {
						continue
					}
					if d.Recv != nil {
						recv := receiverType(d.Recv)
						if !ast.IsExported(recv) {
							// A method of an unexported type (a heap's Len,
							// a decorator's Eval) is in no godoc page: it
							// is not part of the API.
							continue
						}
						ids = append(ids, recv+"."+d.Name.Name)
						continue
					}
					ids = append(ids, d.Name.Name)
					if strings.HasPrefix(d.Name.Name, "With") {
						with++
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								ids = append(ids, s.Name.Name)
							}
						case *ast.ValueSpec:
							for _, id := range s.Names {
								if id.IsExported() {
									ids = append(ids, id.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(ids)
	return ids, with, nil
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
