// Package schemax compiles JSON Schema documents and flattens their validation errors.
//
// It compiles with santhosh-tekuri/jsonschema/v5 and flattens its error
// trees into one entry per failing leaf, each with a JSON Pointer to the
// offending value.
//
// Two keywords report on an object rather than on the member at fault:
// "required" (which members are missing) and "additionalProperties" (which
// are not allowed). Flatten splits those into one entry per member, with the
// member's own path, by reading the schema document and the instance instead
// of parsing the validator's message text.
package schemax

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/axgate/axgate/internal/jsonx"
)

// Compile compiles a draft-07 schema document held as Go values, with format
// assertion on.
func Compile(url string, doc any) (*jsonschema.Schema, error) {
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return CompileBytes(url, data)
}

// CompileBytes compiles a draft-07 schema document from JSON bytes.
func CompileBytes(url string, data []byte) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft7
	c.AssertFormat = true
	if err := c.AddResource(url, bytes.NewReader(data)); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// Leaf is one validation failure.
type Leaf struct {
	// Path is a JSON Pointer into the instance.
	Path string
	// Message is the validator's message (for the split keywords, the same
	// message narrowed to the one member).
	Message string
	// Keyword is the failing keyword: required, type, minimum, …
	Keyword string
	// Member is, for required and additionalProperties, the member's name.
	Member string
	// Allowed is, for additionalProperties, the names the schema declares
	// there (to suggest a spelling).
	Allowed []string
}

// Flatten returns the leaves of a validation error in the validator's order.
// schemaDoc is the schema as Go values (used to resolve keyword locations);
// instance is the value that was validated. A non-validation error becomes
// one leaf at the root.
func Flatten(err error, schemaDoc any, instance any) []Leaf {
	out, _ := FlattenN(err, schemaDoc, instance, 0)
	return out
}

// FlattenN is Flatten keeping at most max leaves (max < 1: all of them).
//
// It returns the first max in path order, and the number of the others. It
// bounds the work as well as the answer: the leaves past the cap are counted,
// not built (no path, message or list of allowed names is made for them), so
// an instance with 90,000 unknown members costs a walk over its names and a
// heap of max entries, not 90,000 leaves sorted and thrown away.
func FlattenN(err error, schemaDoc any, instance any, max int) ([]Leaf, int) {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []Leaf{{Message: err.Error()}}, 0
	}
	c := collector{max: max, doc: schemaDoc, instance: instance}
	if max >= 1 {
		c.kept = make([]candidate, 0, min(max, 4))
	}
	c.walk(ve)
	return c.leaves(), c.total - len(c.kept)
}

// candidate is a leaf not yet built: the error node it comes from and, for
// the split keywords, the member it names.
type candidate struct {
	e       *jsonschema.ValidationError
	kw      string
	split   bool   // one member of a required or additionalProperties node
	member  string // its name
	escaped string // its name as a JSON Pointer token
	seq     int    // visiting order, so that equal paths keep the validator's order
}

// cmp orders candidates by path, then by visiting order, comparing the
// paths piece by piece so that no path is built for a candidate that is not
// kept.
func (a *candidate) cmp(b *candidate) int {
	if c := comparePaths(a.e.InstanceLocation, a.escaped, a.split, b.e.InstanceLocation, b.escaped, b.split); c != 0 {
		return c
	}
	return a.seq - b.seq
}

// comparePaths compares loc (+ "/" + tok when split) of a and b as strings.
func comparePaths(aloc, atok string, asplit bool, bloc, btok string, bsplit bool) int {
	ap := [3]string{aloc}
	if asplit {
		ap[1], ap[2] = "/", atok
	}
	bp := [3]string{bloc}
	if bsplit {
		bp[1], bp[2] = "/", btok
	}
	i, j := 0, 0
	x, y := ap[0], bp[0]
	for {
		for x == "" && i < 2 {
			i++
			x = ap[i]
		}
		for y == "" && j < 2 {
			j++
			y = bp[j]
		}
		switch {
		case x == "" && y == "":
			return 0
		case x == "":
			return -1
		case y == "":
			return 1
		}
		n := min(len(x), len(y))
		if c := strings.Compare(x[:n], y[:n]); c != 0 {
			return c
		}
		x, y = x[n:], y[n:]
	}
}

// collector keeps the max smallest candidates in a max-heap (the largest
// kept at the root, the one a smaller newcomer replaces) and counts all.
type collector struct {
	max      int
	doc      any
	instance any
	kept     []candidate
	total    int
}

func (c *collector) walk(e *jsonschema.ValidationError) {
	if len(e.Causes) > 0 {
		for _, x := range e.Causes {
			c.walk(x)
		}
		return
	}
	kw := lastToken(e.KeywordLocation)
	if kw == "required" || kw == "additionalProperties" {
		if sch, inst := c.split(e); sch != nil {
			n := c.total
			if kw == "required" {
				req, _ := sch["required"].([]any)
				for _, r := range req {
					if name, _ := r.(string); name != "" {
						if _, ok := inst[name]; !ok {
							c.add(candidate{e: e, kw: kw, split: true, member: name, escaped: jsonx.EscapePointer(name)})
						}
					}
				}
			} else {
				props, _ := sch["properties"].(map[string]any)
				for name := range inst {
					if _, ok := props[name]; !ok {
						c.add(candidate{e: e, kw: kw, split: true, member: name, escaped: jsonx.EscapePointer(name)})
					}
				}
			}
			if c.total > n {
				return
			}
		}
	}
	c.add(candidate{e: e, kw: kw})
}

// split resolves the schema object and the instance object a required or
// additionalProperties node reports on, or nil.
func (c *collector) split(e *jsonschema.ValidationError) (sch, inst map[string]any) {
	frag := e.AbsoluteKeywordLocation
	if i := strings.IndexByte(frag, '#'); i >= 0 {
		frag = frag[i+1:]
	}
	slash := strings.LastIndexByte(frag, '/')
	if slash < 0 {
		return nil, nil
	}
	node, _ := jsonx.Resolve(c.doc, frag[:slash])
	obj, _ := jsonx.Resolve(c.instance, e.InstanceLocation)
	sch, _ = node.(map[string]any)
	inst, _ = obj.(map[string]any)
	if sch == nil || inst == nil {
		return nil, nil
	}
	return sch, inst
}

func (c *collector) add(x candidate) {
	x.seq = c.total
	c.total++
	if c.max < 1 || len(c.kept) < c.max {
		c.kept = append(c.kept, x)
		if c.max >= 1 {
			c.up(len(c.kept) - 1)
		}
		return
	}
	if x.cmp(&c.kept[0]) < 0 {
		c.kept[0] = x
		c.down(0)
	}
}

// up and down keep c.kept a max-heap under cmp.
func (c *collector) up(i int) {
	h := c.kept
	for i > 0 {
		p := (i - 1) / 2
		if h[i].cmp(&h[p]) <= 0 {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (c *collector) down(i int) {
	h := c.kept
	for {
		l, big := 2*i+1, i
		if l < len(h) && h[l].cmp(&h[big]) > 0 {
			big = l
		}
		if r := l + 1; r < len(h) && h[r].cmp(&h[big]) > 0 {
			big = r
		}
		if big == i {
			return
		}
		h[i], h[big] = h[big], h[i]
		i = big
	}
}

// leaves builds the kept candidates, in path order. The validator visits an
// object's properties in map order; sorting by path (ties in visiting
// order) makes the report the same on every run.
func (c *collector) leaves() []Leaf {
	slices.SortFunc(c.kept, func(a, b candidate) int { return a.cmp(&b) })
	out := make([]Leaf, len(c.kept))
	var allowed map[*jsonschema.ValidationError][]string
	for i, x := range c.kept {
		if !x.split {
			out[i] = Leaf{Path: x.e.InstanceLocation, Message: x.e.Message, Keyword: x.kw}
			continue
		}
		l := Leaf{Path: x.e.InstanceLocation + "/" + x.escaped, Keyword: x.kw, Member: x.member}
		if x.kw == "required" {
			l.Message = fmt.Sprintf("missing properties: '%s'", x.member)
		} else {
			l.Message = fmt.Sprintf("additionalProperties '%s' not allowed", x.member)
			names, ok := allowed[x.e]
			if !ok {
				sch, _ := c.split(x.e)
				props, _ := sch["properties"].(map[string]any)
				for n := range props {
					names = append(names, n)
				}
				sort.Strings(names)
				if allowed == nil {
					allowed = make(map[*jsonschema.ValidationError][]string)
				}
				allowed[x.e] = names
			}
			l.Allowed = names
		}
		out[i] = l
	}
	return out
}

func lastToken(ptr string) string {
	if i := strings.LastIndexByte(ptr, '/'); i >= 0 {
		return jsonx.UnescapePointer(ptr[i+1:])
	}
	return ptr
}
