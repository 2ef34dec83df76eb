package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/axgate/axgate/internal/jsonx"
)

// maxManifestBytes bounds the size of a manifest document.
const maxManifestBytes = 16 << 20

// maxManifestDepth bounds nesting in a manifest; parameters nest, but not
// this deep in any sane contract.
const maxManifestDepth = 128

// Problem is one thing wrong with a manifest.
type Problem struct {
	// Path is a JSON Pointer into the manifest document.
	Path string `json:"path"`
	// Message says what is wrong, in words a manifest author understands.
	Message string `json:"message"`
	// Keyword is the schema keyword or semantic rule that failed.
	Keyword string `json:"keyword,omitempty"`
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Error is returned for a manifest that fails to load: it lists every problem
// found, each with its path.
type Error struct {
	// Source names the document (a file name), when known.
	Source   string
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("invalid AXAG manifest")
	if e.Source != "" {
		b.WriteString(" ")
		b.WriteString(e.Source)
	}
	fmt.Fprintf(&b, ": %d problem(s)", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Parse reads a manifest from JSON or YAML bytes. YAML is recognized by its
// first non-blank character not being '{'.
func Parse(data []byte) (*Manifest, error) { return parse(data, "", formatAuto) }

// Load reads a manifest (JSON or YAML) from r, at most 16 MiB: a larger
// document is an error.
func Load(r io.Reader) (*Manifest, error) {
	data, err := readLimited(r)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return parse(data, "", formatAuto)
}

// LoadFile reads a manifest from a file; .yaml and .yml are YAML, anything
// else is detected from the content.
func LoadFile(name string) (*Manifest, error) {
	f, err := os.Open(name)
	return loadOpened(f, err, name)
}

// LoadFS reads a manifest from a file in fsys (for example an embed.FS).
func LoadFS(fsys fs.FS, name string) (*Manifest, error) {
	f, err := fsys.Open(name)
	return loadOpened(f, err, name)
}

// loadOpened reads an opened manifest file, whose name also tells its format.
func loadOpened(f io.ReadCloser, err error, name string) (*Manifest, error) {
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	defer f.Close()
	data, err := readLimited(f)
	if err != nil {
		return nil, fmt.Errorf("manifest: %s: %w", name, err)
	}
	return parse(data, name, formatFor(name))
}

type docFormat int

const (
	formatAuto docFormat = iota
	formatJSON
	formatYAML
)

func formatFor(name string) docFormat {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml":
		return formatYAML
	case ".json":
		return formatJSON
	}
	return formatAuto
}

func readLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxManifestBytes)
	}
	return data, nil
}

func parse(data []byte, source string, format docFormat) (*Manifest, error) {
	fail := func(p ...Problem) error { return &Error{Source: source, Problems: p} }
	doc, p := decodeDocument(data, format)
	if p != nil {
		return nil, fail(*p)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, fail(Problem{Message: "a manifest must be a JSON object", Keyword: "type"})
	}
	problems := validateStructure(doc)
	m, semantic := build(doc.(map[string]any))
	problems = append(problems, semantic...)
	if len(problems) > 0 {
		sortProblems(problems)
		return nil, fail(problems...)
	}
	return m, nil
}

// decodeDocument reads a JSON or YAML document strictly (size, depth, UTF-8,
// duplicate keys) into the values encoding/json produces.
func decodeDocument(data []byte, format docFormat) (any, *Problem) {
	if format == formatAuto {
		format = formatYAML
		if t := bytes.TrimLeft(data, " \t\r\n\ufeff"); len(t) > 0 && t[0] == '{' {
			format = formatJSON
		}
	}
	if format == formatYAML {
		var err error
		if data, err = yamlToJSON(data); err != nil {
			return nil, &Problem{Message: err.Error(), Keyword: "yaml"}
		}
	}
	doc, err := jsonx.Decode(data, jsonx.Limits{MaxBytes: maxManifestBytes, MaxDepth: maxManifestDepth})
	if err != nil {
		p := &Problem{Message: "not a well-formed JSON document: " + err.Error(), Keyword: "json"}
		if je, ok := err.(*jsonx.Error); ok {
			p.Path = je.Path
			if je.Kind == jsonx.DuplicateKey {
				p.Message, p.Keyword = "duplicate key", "duplicate"
			}
		}
		return nil, p
	}
	return doc, nil
}

// sortProblems orders problems by path, keeping the order within one path,
// so reports are stable and read top to bottom.
func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool { return pointerLess(ps[i].Path, ps[j].Path) })
}

// pointerLess compares JSON Pointers token by token, numbers numerically.
func pointerLess(a, b string) bool {
	ta, tb := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(ta) && i < len(tb); i++ {
		if ta[i] == tb[i] {
			continue
		}
		var na, nb int
		_, ea := fmt.Sscanf(ta[i], "%d", &na)
		_, eb := fmt.Sscanf(tb[i], "%d", &nb)
		if ea == nil && eb == nil && fmt.Sprint(na) == ta[i] && fmt.Sprint(nb) == tb[i] {
			return na < nb
		}
		return ta[i] < tb[i]
	}
	return len(ta) < len(tb)
}

// yamlToJSON converts a YAML document to JSON. yaml.v3 refuses duplicate
// keys itself; non-string keys are refused here.
func yamlToJSON(data []byte) ([]byte, error) {
	var v any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&v); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("empty YAML document")
		}
		return nil, fmt.Errorf("not a well-formed YAML document: %v", err)
	}
	var extra any
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, fmt.Errorf("a manifest must be a single YAML document")
	}
	v, err := jsonCompatible(v, "")
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func jsonCompatible(v any, at string) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			c, err := jsonCompatible(e, at+"/"+jsonx.EscapePointer(k))
			if err != nil {
				return nil, err
			}
			t[k] = c
		}
		return t, nil
	case map[any]any:
		return nil, fmt.Errorf("%s: mapping keys must be strings", at)
	case []any:
		for i, e := range t {
			c, err := jsonCompatible(e, fmt.Sprintf("%s/%d", at, i))
			if err != nil {
				return nil, err
			}
			t[i] = c
		}
		return t, nil
	case time.Time:
		return t.Format(time.RFC3339Nano), nil
	}
	return v, nil
}
