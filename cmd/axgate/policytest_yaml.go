package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// yamlDoc reads a YAML document strictly, a node at a time, for the policy
// test suites: every mapping lists the keys it takes, and an unknown key, a
// repeated key or a value of the wrong kind is a problem reported with its
// line and column (and, for a misspelt key, the key it resembles). Problems
// are collected, not returned one by one, so that a broken suite is
// reported whole.
type yamlDoc struct {
	file     string
	problems []yamlProblem
}

// yamlProblem is one problem of a document, at a line and column (0 for
// the document as a whole).
type yamlProblem struct {
	line, col int
	msg       string
}

// failf records a problem at node n; at names the place in the suite
// ("cases[2].expect"). The same problem found twice (a key of a case that
// each step of its sequence reads) is recorded once.
func (d *yamlDoc) failf(n *yaml.Node, at, format string, args ...any) {
	p := yamlProblem{msg: fmt.Sprintf(format, args...)}
	if at != "" {
		p.msg = at + ": " + p.msg
	}
	if n != nil {
		p.line, p.col = n.Line, n.Column
	}
	if !slices.Contains(d.problems, p) {
		d.problems = append(d.problems, p)
	}
}

// report returns the problems in the order of the document, each with its
// place: FILE:LINE:COL: message.
func (d *yamlDoc) report() []string {
	ps := slices.Clone(d.problems)
	slices.SortStableFunc(ps, func(a, b yamlProblem) int {
		if a.line != b.line {
			return a.line - b.line
		}
		return a.col - b.col
	})
	out := make([]string, len(ps))
	for i, p := range ps {
		if p.line > 0 {
			out[i] = fmt.Sprintf("%s:%d:%d: %s", d.file, p.line, p.col, p.msg)
		} else {
			out[i] = d.file + ": " + p.msg
		}
	}
	return out
}

// maxAliasDepth bounds the aliases followed from one node: YAML lets an
// alias name a node that contains it.
const maxAliasDepth = 64

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxAliasDepth; i++ {
		n = n.Alias
	}
	return n
}

// field is one key of a mapping, with its value.
type field struct {
	key   string
	keyAt *yaml.Node
	value *yaml.Node
}

// fields returns the members of mapping n in document order, reporting a
// node that is not a mapping, a repeated key and a key not in allowed.
// Unknown and repeated keys are left out of the result.
func (d *yamlDoc) fields(n *yaml.Node, at string, allowed ...string) []field {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		d.failf(n, at, "want a mapping (key: value lines), not %s", kindOf(n))
		return nil
	}
	var out []field
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
			d.failf(k, at, "a key must be a plain name (merge keys << are not supported)")
			continue
		}
		switch {
		case seen[k.Value]:
			d.failf(k, at, "duplicate key %q", k.Value)
		case !slices.Contains(allowed, k.Value):
			d.failf(k, at, "unknown key %q%s", k.Value, hint(k.Value, allowed))
		default:
			out = append(out, field{key: k.Value, keyAt: k, value: v})
		}
		seen[k.Value] = true
	}
	return out
}

// hint says which of the candidates s was probably meant to be, or lists
// them.
func hint(s string, candidates []string) string {
	if c := closest(s, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	if len(candidates) == 0 || len(candidates) > 12 {
		return ""
	}
	return " (want one of: " + strings.Join(candidates, ", ") + ")"
}

// closest returns the candidate within a small edit distance of s, if any.
func closest(s string, candidates []string) string {
	best, bestD := "", 3
	if len(s) <= 4 {
		bestD = 2
	}
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// kindOf names a node's kind for a problem.
func kindOf(n *yaml.Node) string {
	n = resolve(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!bool":
			return "a boolean"
		case "!!int", "!!float":
			return "a number"
		}
		return fmt.Sprintf("the string %q", n.Value)
	}
	return "an alias"
}

// str returns a string scalar.
func (d *yamlDoc) str(n *yaml.Node, at string) (string, bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.failf(n, at, "want a string, not %s (quote it if it is one)", kindOf(n))
		return "", false
	}
	return n.Value, true
}

// boolean returns a boolean scalar.
func (d *yamlDoc) boolean(n *yaml.Node, at string) (bool, bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		d.failf(n, at, "want true or false, not %s", kindOf(n))
		return false, false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		d.failf(n, at, "%v", err)
		return false, false
	}
	return b, true
}

// strings returns a list of strings; a single string is a list of one.
func (d *yamlDoc) strings(n *yaml.Node, at string) ([]string, bool) {
	n = resolve(n)
	if n != nil && n.Kind == yaml.ScalarNode {
		s, ok := d.str(n, at)
		return []string{s}, ok
	}
	if n == nil || n.Kind != yaml.SequenceNode {
		d.failf(n, at, "want a list of strings, not %s", kindOf(n))
		return nil, false
	}
	out := []string{}
	ok := true
	for i, e := range n.Content {
		s, good := d.str(e, fmt.Sprintf("%s[%d]", at, i))
		ok = ok && good
		out = append(out, s)
	}
	return out, ok
}

// list returns the items of a sequence.
func (d *yamlDoc) list(n *yaml.Node, at string) ([]*yaml.Node, bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		d.failf(n, at, "want a list (lines starting with -), not %s", kindOf(n))
		return nil, false
	}
	return n.Content, true
}

// jsonNumber is the grammar of a JSON number (RFC 8259 §6).
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// toJSON renders a YAML value as JSON. Numbers keep the digits the suite
// wrote when they are valid JSON (1.50 stays 1.50, a 30-digit integer stays
// exact), so that a case tests the number it shows; dates and times stay
// the strings they were written as. A repeated key is refused: a case about
// duplicate keys writes its arguments as arguments_json.
func (d *yamlDoc) toJSON(n *yaml.Node, at string) (json.RawMessage, bool) {
	var b bytes.Buffer
	ok := d.writeJSON(&b, n, at, 0)
	return b.Bytes(), ok
}

func (d *yamlDoc) writeJSON(b *bytes.Buffer, n *yaml.Node, at string, depth int) bool {
	if depth > maxAliasDepth {
		d.failf(n, at, "nested more than %d levels deep", maxAliasDepth)
		return false
	}
	n = resolve(n)
	if n == nil {
		d.failf(nil, at, "a value is missing")
		return false
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			b.WriteString("null")
			return true
		}
		return d.writeJSON(b, n.Content[0], at, depth)
	case yaml.MappingNode:
		b.WriteByte('{')
		seen := map[string]bool{}
		ok := true
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolve(n.Content[i])
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				d.failf(k, at, "a key must be a plain name (merge keys << are not supported)")
				ok = false
				continue
			}
			if seen[k.Value] {
				d.failf(k, at, "duplicate key %q (write the arguments as arguments_json to test duplicate keys)", k.Value)
				ok = false
				continue
			}
			seen[k.Value] = true
			if i > 0 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(k.Value)
			b.Write(key)
			b.WriteByte(':')
			ok = d.writeJSON(b, n.Content[i+1], at+"."+k.Value, depth+1) && ok
		}
		b.WriteByte('}')
		return ok
	case yaml.SequenceNode:
		b.WriteByte('[')
		ok := true
		for i, e := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			ok = d.writeJSON(b, e, fmt.Sprintf("%s[%d]", at, i), depth+1) && ok
		}
		b.WriteByte(']')
		return ok
	}
	v := n.Value
	switch n.ShortTag() {
	case "!!null":
		b.WriteString("null")
	case "!!bool":
		var t bool
		if err := n.Decode(&t); err != nil {
			d.failf(n, at, "%v", err)
			return false
		}
		b.WriteString(strconv.FormatBool(t))
	case "!!int":
		if jsonNumber.MatchString(v) {
			b.WriteString(v)
			break
		}
		// 0x1F, 0o17, +5, 1_000: YAML's forms, written out in decimal.
		s := strings.ReplaceAll(strings.TrimPrefix(v, "+"), "_", "")
		s = strings.Replace(strings.Replace(s, "0o", "0", 1), "0O", "0", 1)
		i, ok := new(big.Int).SetString(s, 0)
		if !ok {
			d.failf(n, at, "the integer %q cannot be written as JSON", v)
			return false
		}
		b.WriteString(i.String())
	case "!!float":
		if jsonNumber.MatchString(v) {
			b.WriteString(v)
			break
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(v, "_", ""), 64)
		if err != nil || f != f || f > 1e308 || f < -1e308 {
			d.failf(n, at, "the number %q cannot be written as JSON", v)
			return false
		}
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	default: // !!str, !!timestamp, !!binary and tags of the suite's own: the text as written
		if n.ShortTag() == "!!str" && n.Style&(yaml.TaggedStyle|yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 &&
			jsonNumber.MatchString(v) {
			// A plain number the YAML decoder took for a string because
			// no float64 holds it (1e400): the number as written.
			b.WriteString(v)
			break
		}
		s, _ := json.Marshal(v)
		b.Write(s)
	}
	return true
}

// parseYAML reads data as one YAML document.
func (d *yamlDoc) parseYAML(data []byte) (*yaml.Node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		d.failf(nil, "", "not a well-formed YAML document: %v", err)
		return nil, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		d.failf(nil, "", "a suite is one YAML document; this file holds more (remove the ---)")
		return nil, false
	}
	if len(doc.Content) == 0 {
		d.failf(nil, "", "the suite is empty")
		return nil, false
	}
	return doc.Content[0], true
}
