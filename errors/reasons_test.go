package errors_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	axerr "github.com/axgate/axgate/errors"
)

// reasonConstants returns the Reason constants axgate declares
// (internal/reasons), name → value, read with go/ast so that a constant added
// without a docs/errors.md row is found without anyone listing it by hand.
func reasonConstants(t *testing.T) map[string]string {
	return constants(t, "../internal/reasons/*.go", "Reason")
}

// constants returns the constants of the named type (of this package)
// declared in the files of glob, name → value.
func constants(t *testing.T, glob, typ string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				switch x := vs.Type.(type) {
				case *ast.Ident: // in this package
					if x.Name != typ {
						continue
					}
				case *ast.SelectorExpr: // axerr.Reason elsewhere
					if x.Sel.Name != typ {
						continue
					}
				default:
					continue
				}
				for i, n := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s: the value of %s is not a string literal", f, n.Name)
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[n.Name] = v
				}
			}
		}
	}
	return out
}

// readmeTable returns the rows of the table in docs/errors.md
// whose header row starts with the cell header, keyed by their first cell
// without backticks.
func readmeTable(t *testing.T, header string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(b)
	rows := map[string][]string{}
	in := false
	for line := range strings.Lines(sec) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			in = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case cells[0] == header:
			in = true
		case in && !strings.HasPrefix(cells[0], "---"):
			rows[strings.Trim(cells[0], "`")] = cells
		}
	}
	if len(rows) == 0 {
		t.Fatalf("docs/errors.md has no table headed %q", header)
	}
	return rows
}

// TestReasonsInErrorsDoc: every details.reason an Error can carry from this
// catalogue has a row in docs/errors.md's reason table, with the code it comes
// with; and the table lists no reason the code does not have.
func TestReasonsInErrorsDoc(t *testing.T) {
	consts := reasonConstants(t)
	if len(consts) == 0 {
		t.Fatal("no Reason constants found")
	}
	rows := readmeTable(t, "reason")
	seen := map[string]string{}
	for name, v := range consts {
		if other, dup := seen[v]; dup {
			t.Errorf("%s and %s share the value %q", name, other, v)
		}
		seen[v] = name
		row, ok := rows[v]
		if !ok {
			t.Errorf("%s (%q) is not in docs/errors.md's reason table", name, v)
			continue
		}
		if len(row) != 4 {
			t.Errorf("docs/errors.md row of %q has %d cells; want reason, code, meaning, what to do", v, len(row))
			continue
		}
		if !slices.Contains(axerr.Codes(), axerr.Code(strings.Trim(row[1], "`"))) {
			t.Errorf("docs/errors.md row of %q names %s, not a code", v, row[1])
		}
	}
	for v := range rows {
		if _, ok := seen[v]; !ok {
			t.Errorf("docs/errors.md's reason table lists %q, which is no Reason constant", v)
		}
	}
}

// TestWithReason: the wire value is the constant's string, stored as a
// string so that details compare and encode alike whichever way they were
// set.
func TestWithReason(t *testing.T) {
	e := axerr.New(axerr.CodeRateLimited, "m").WithReason(axerr.Reason("cooldown"))
	if v, ok := e.Details["reason"].(string); !ok || v != "cooldown" {
		t.Errorf("details.reason = %#v; want the string \"cooldown\"", e.Details["reason"])
	}
}

// TestCodesListsEveryCode: Codes is the catalogue the transports match an
// upstream refusal against (axgate serve) and docs/errors.md's table follows, so
// a Code constant missing from it (AXGATE_ALREADY_DECIDED was) is a refusal
// nobody recognizes.
func TestCodesListsEveryCode(t *testing.T) {
	for name, v := range constants(t, "*.go", "Code") {
		if !slices.Contains(axerr.Codes(), axerr.Code(v)) {
			t.Errorf("%s (%s) is not in Codes()", name, v)
		}
	}
}

// TestCodesInErrorsDoc: docs/errors.md's code table lists every code of Codes(),
// with the type and HTTP status of the code table, and no other code.
func TestCodesInErrorsDoc(t *testing.T) {
	rows := readmeTable(t, "code")
	for _, c := range axerr.Codes() {
		row, ok := rows[string(c)]
		if !ok {
			t.Errorf("%s is not in docs/errors.md's code table", c)
			continue
		}
		if len(row) != 4 {
			t.Errorf("docs/errors.md row of %s has %d cells; want code, type, HTTP, agent may retry", c, len(row))
			continue
		}
		if row[1] != string(c.Type()) || row[2] != strconv.Itoa(c.HTTPStatus()) {
			t.Errorf("docs/errors.md row of %s says %s %s; the code table says %s %d", c, row[1], row[2], c.Type(), c.HTTPStatus())
		}
		if retry := strings.HasPrefix(row[3], "yes"); retry != c.Retryable() {
			t.Errorf("docs/errors.md row of %s says retry %q; Retryable() = %v", c, row[3], c.Retryable())
		}
	}
	for v := range rows {
		if !slices.Contains(axerr.Codes(), axerr.Code(v)) {
			t.Errorf("docs/errors.md's code table lists %q, which is not in Codes()", v)
		}
	}
}
