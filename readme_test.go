package axgate_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestREADMESnippetsAreTested: every ```go block of the READMEs (the root's,
// the adapters' and the examples') appears in some _test.go file of the
// repository (nested modules included), where it compiles and runs. A
// README edit that is not mirrored in its test fails here.
//
// Lines are compared trimmed, with runs of spaces and tabs taken as one
// space and blank lines left out, so that indentation inside a test
// function and gofmt's alignment of comments do not matter. A block is a
// fragment or a whole file: its lines must appear contiguously in one test
// file, except that a block opening with an import declaration (a fragment
// that shows what it imports) has its imports looked for in the same
// file's import block and the rest contiguously.
func TestREADMESnippetsAreTested(t *testing.T) {
	readmes := []string{"README.md"}
	for _, glob := range []string{"adapters/*/README.md", "examples/*/README.md"} {
		more, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		readmes = append(readmes, more...)
	}
	tests := testFiles(t)
	n := 0
	for _, readme := range readmes {
		for _, sn := range goBlocks(t, readme) {
			n++
			imports, body := splitImports(sn.lines)
			if !slices.ContainsFunc(tests, func(f testFile) bool { return f.holds(imports, body) }) {
				t.Errorf("%s:%d: this go block is in no _test.go file (mirror the edit in the test that runs it):\n%s",
					readme, sn.line, strings.Join(sn.lines, "\n"))
			}
		}
	}
	if n == 0 {
		t.Fatal("no go blocks found in the READMEs")
	}
}

type snippet struct {
	line  int // of the opening fence
	lines []string
}

// goBlocks returns the normalized lines of each ```go block of a Markdown
// file.
func goBlocks(t *testing.T, path string) []snippet {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []snippet
	var cur *snippet
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &snippet{line: ln}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			if l := normalize(line); l != "" {
				cur.lines = append(cur.lines, l)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: unterminated go block", path, cur.line)
	}
	return out
}

// normalize trims a line and takes each run of blanks inside it as one
// space.
func normalize(line string) string {
	return strings.Join(strings.Fields(line), " ")
}

// splitImports takes a leading import declaration off a fragment's lines.
func splitImports(lines []string) (imports, body []string) {
	if len(lines) == 0 {
		return nil, lines
	}
	switch {
	case lines[0] == "import (":
		end := slices.Index(lines, ")")
		if end < 0 {
			return nil, lines
		}
		return lines[1:end], lines[end+1:]
	case strings.HasPrefix(lines[0], "import "):
		return []string{strings.TrimPrefix(lines[0], "import ")}, lines[1:]
	}
	return nil, lines
}

type testFile struct {
	path  string
	lines []string
}

// holds reports whether the file imports each of imports and holds body
// contiguously.
func (f testFile) holds(imports, body []string) bool {
	for _, imp := range imports {
		if !slices.Contains(f.lines, imp) && !slices.Contains(f.lines, "import "+imp) {
			return false
		}
	}
	if len(body) == 0 {
		return true
	}
	for i := 0; i+len(body) <= len(f.lines); i++ {
		if slices.Equal(f.lines[i:i+len(body)], body) {
			return true
		}
	}
	return false
}

// testFiles returns the normalized non-blank lines of every _test.go file
// of the repository, nested modules included.
func testFiles(t *testing.T) []testFile {
	t.Helper()
	var out []testFile
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f := testFile{path: path}
		for line := range strings.Lines(string(data)) {
			if l := normalize(line); l != "" {
				f.lines = append(f.lines, l)
			}
		}
		out = append(out, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
