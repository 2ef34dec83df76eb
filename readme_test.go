package axgate_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMESnippetsAreTested: every ```go block of the READMEs (the root's,
// the adapters' and the examples') and of docs/ appears in some _test.go file of the
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
	for _, glob := range []string{"docs/*.md", "adapters/*/README.md", "examples/*/README.md"} {
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
		t.Fatal("no go blocks found in the READMEs and docs/")
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

// TestDocsLinksResolve: every relative link of README.md, docs/*.md and
// the adapters', examples' and benchmarks' READMEs names a file of the repository, and every #anchor a heading of the file
// it points into (GitHub's anchors: lower case, punctuation dropped, spaces
// as hyphens), so that moving a section cannot leave a link behind.
func TestDocsLinksResolve(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("docs/ holds no .md file")
	}
	for _, glob := range []string{"adapters/README.md", "adapters/*/README.md", "examples/*/README.md", "bench/README.md"} {
		more, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, more...)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := markdownAnchors(t, path)
		anchors[path] = a
		return a
	}
	for _, doc := range append([]string{"README.md"}, docs...) {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(withoutFences(string(data)), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s: %v", doc, target, err)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
				t.Errorf("%s: link %s: %s has no heading with anchor #%s", doc, target, path, anchor)
			}
		}
	}
}

// inlineCode matches a code span, where a "](…)" is no link.
var inlineCode = regexp.MustCompile("`[^`]*`")

// withoutFences drops the fenced code blocks of a Markdown text.
func withoutFences(text string) string {
	var b strings.Builder
	in := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line)
		}
	}
	return b.String()
}

// markdownAnchors returns the anchors GitHub gives the headings of a
// Markdown file.
func markdownAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N}_ -]`)
	for line := range strings.Lines(withoutFences(string(data))) {
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		title = strings.ToLower(strings.TrimSpace(strings.ReplaceAll(title, "`", "")))
		out[strings.ReplaceAll(drop.ReplaceAllString(title, ""), " ", "-")] = true
	}
	return out
}
