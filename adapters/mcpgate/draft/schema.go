package draft

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// maxDepth bounds how deep parameters nest in a draft: a recursive schema
// (a tree whose nodes $ref the node) is cut there.
const maxDepth = 16

// maxRefHops bounds a chain of $ref to $ref.
const maxRefHops = 32

// paramTypes are the types a manifest parameter may have.
var paramTypes = []string{"string", "number", "integer", "boolean", "array", "object"}

// formats are the formats the manifest asserts; others are left out.
var formats = map[string]bool{
	"email": true, "url": true, "uri": true, "date": true, "datetime": true, "date-time": true,
	"time": true, "uuid": true, "ipv4": true, "ipv6": true, "hostname": true,
}

// annotationKeywords describe a schema without constraining it: left out
// without a note.
var annotationKeywords = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "$anchor": true, "$dynamicAnchor": true,
	"$defs": true, "definitions": true, "title": true, "examples": true, "deprecated": true,
	"readOnly": true, "writeOnly": true, "contentEncoding": true, "contentMediaType": true,
	"contentSchema": true,
}

// handledKeywords are read by param (or on purpose by parameters).
var handledKeywords = map[string]bool{
	"type": true, "description": true, "enum": true, "const": true, "minimum": true, "maximum": true,
	"exclusiveMinimum": true, "exclusiveMaximum": true, "minLength": true, "maxLength": true,
	"pattern": true, "format": true, "default": true, "items": true, "maxItems": true,
	"properties": true, "required": true, "additionalProperties": true, "anyOf": true, "oneOf": true,
	"$ref": true,
}

// schemaReader translates the input schema of one tool.
type schemaReader struct {
	d      *drafter
	tool   string
	intent string
	root   any
	depth  int
}

func (s *schemaReader) note(ptr string, v any, why string) { s.d.guess(s.tool, s.intent, ptr, v, why) }

// parameters translates the top-level input schema: nil leaves the
// arguments open (no parameters declared), an empty map allows none.
func (s *schemaReader) parameters(schema any, ptr string) *map[string]*param {
	m, ok := s.resolve(schema, ptr)
	if !ok {
		s.note(ptr, nil, "the input schema is not a JSON Schema object: the gateway passes any arguments object; declare the parameters")
		return nil
	}
	if t, ok := m["type"]; ok && t != "object" {
		s.note(ptr, nil, fmt.Sprintf("the input schema's type is %v, not object: MCP arguments are an object", t))
	}
	props, ok := m["properties"].(map[string]any)
	if !ok {
		if m["additionalProperties"] == false {
			return &map[string]*param{}
		}
		s.note(ptr, nil, "the upstream declares no properties: the gateway passes any arguments object; declare the parameters to have them checked")
		return nil
	}
	s.dropped(m, ptr, "properties", "required", "additionalProperties")
	out := s.properties(props, m, ptr)
	return &out
}

// properties translates the members of an object schema m.
func (s *schemaReader) properties(props map[string]any, m map[string]any, ptr string) map[string]*param {
	required := map[string]bool{}
	if rs, ok := m["required"].([]any); ok {
		for _, r := range rs {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make(map[string]*param, len(props))
	for _, n := range names {
		p := s.param(props[n], ptr+"/"+escape(n))
		p.Required = required[n]
		out[n] = p
	}
	missing := []string{}
	for n := range required {
		if _, ok := props[n]; !ok {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	for _, n := range missing {
		s.note(ptr+"/"+escape(n), nil, "required by the upstream but not among its properties: declare it, or no call can be made")
	}
	switch ap := m["additionalProperties"].(type) {
	case bool:
		if ap {
			s.note(ptr, nil, "the upstream accepts undeclared members (additionalProperties true); the gateway refuses them")
		}
	case map[string]any:
		s.note(ptr, nil, "the upstream accepts undeclared members of a schema (additionalProperties); the gateway refuses them")
	}
	return out
}

// param translates the schema of one parameter.
func (s *schemaReader) param(schema any, ptr string) *param {
	m, ok := s.resolve(schema, ptr)
	if !ok {
		m = map[string]any{}
	}
	m = s.alternatives(m, ptr)
	p := &param{Type: s.typeOf(m, ptr)}
	p.Description, _ = m["description"].(string)
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		p.Enum = e
	} else if c, ok := m["const"]; ok {
		p.Enum = []any{c}
	}
	if d, ok := m["default"]; ok {
		if raw, err := json.Marshal(d); err == nil {
			p.Default = raw
		}
	}
	var kept []string
	switch p.Type {
	case "number", "integer":
		kept = s.numeric(p, m, ptr)
	case "string":
		kept = s.text(p, m, ptr)
	case "array":
		kept = s.array(p, m, ptr)
	case "object":
		kept = []string{"properties", "required", "additionalProperties"}
		if props, ok := m["properties"].(map[string]any); ok && len(props) > 0 {
			if s.depth >= maxDepth {
				s.note(ptr+"/properties", nil, fmt.Sprintf("nested deeper than %d (a recursive schema?): the members below are not checked", maxDepth))
			} else {
				s.depth++
				p.Properties = s.properties(props, m, ptr+"/properties")
				s.depth--
			}
		}
	}
	s.dropped(m, ptr, kept...)
	return p
}

// typeOf returns the manifest type of m: its type, the one type of a union
// with null, or one read from its other keywords; "string" when nothing
// says (listed).
func (s *schemaReader) typeOf(m map[string]any, ptr string) string {
	switch t := m["type"].(type) {
	case string:
		if slices.Contains(paramTypes, t) {
			return t
		}
		s.note(ptr+"/type", "string", fmt.Sprintf("type %q is not a parameter type; drafted as a string", t))
		return "string"
	case []any:
		var types []string
		null := false
		for _, e := range t {
			if n, ok := e.(string); ok && slices.Contains(paramTypes, n) {
				types = append(types, n)
			} else if e == "null" {
				null = true
			}
		}
		switch {
		case len(types) == 0:
			s.note(ptr+"/type", "string", fmt.Sprintf("type %v has no parameter type; drafted as a string", t))
			return "string"
		case len(types) > 1:
			s.note(ptr+"/type", types[0], fmt.Sprintf("a parameter has one type, the upstream allows %v: calls with the others are refused", t))
		case null:
			s.note(ptr+"/type", types[0], "the upstream also accepts null: a null argument is refused; leave the argument out instead")
		}
		return types[0]
	}
	if _, ok := m["properties"]; ok {
		return "object"
	}
	if _, ok := m["items"]; ok {
		return "array"
	}
	values, _ := m["enum"].([]any)
	if c, ok := m["const"]; ok {
		values = []any{c}
	}
	if t := jsonType(values); t != "" {
		return t
	}
	s.note(ptr+"/type", "string", "the upstream gives no type: drafted as a string, and calls with other types are refused")
	return "string"
}

// jsonType is the one parameter type of all values, or "".
func jsonType(values []any) string {
	t := ""
	for _, v := range values {
		var vt string
		switch n := v.(type) {
		case string:
			vt = "string"
		case bool:
			vt = "boolean"
		case float64:
			vt = "number"
			if n == math.Trunc(n) {
				vt = "integer"
			}
		default:
			return ""
		}
		switch {
		case t == "" || t == vt:
			t = vt
		case (t == "number" && vt == "integer") || (t == "integer" && vt == "number"):
			t = "number"
		default:
			return ""
		}
	}
	return t
}

// alternatives reads anyOf/oneOf: alternatives of null are dropped (listed),
// one left is merged into m, several leave the first (listed).
func (s *schemaReader) alternatives(m map[string]any, ptr string) map[string]any {
	for _, kw := range []string{"anyOf", "oneOf"} {
		alts, ok := m[kw].([]any)
		if !ok {
			continue
		}
		var keep []map[string]any
		null := false
		for i, a := range alts {
			am, ok := s.resolve(a, ptr+"/"+kw+"/"+strconv.Itoa(i))
			if !ok {
				continue
			}
			if am["type"] == "null" {
				null = true
				continue
			}
			keep = append(keep, am)
		}
		merged := make(map[string]any, len(m))
		for k, v := range m {
			if k != kw {
				merged[k] = v
			}
		}
		if len(keep) > 0 {
			for k, v := range keep[0] {
				if _, own := merged[k]; !own {
					merged[k] = v
				}
			}
		}
		switch {
		case len(keep) > 1:
			s.note(ptr, nil, fmt.Sprintf("%s of %d alternatives: only the first is drafted, calls matching another are refused", kw, len(keep)))
		case null:
			s.note(ptr, nil, "the upstream also accepts null: a null argument is refused; leave the argument out instead")
		}
		m = merged
	}
	return m
}

// numeric copies the bounds of a number or integer; exclusive bounds are
// made inclusive (exactly for integers).
func (s *schemaReader) numeric(p *param, m map[string]any, ptr string) []string {
	p.Minimum = bound(m, "minimum", "exclusiveMinimum", p.Type == "integer", 1)
	p.Maximum = bound(m, "maximum", "exclusiveMaximum", p.Type == "integer", -1)
	if p.Type == "number" {
		for _, kw := range []string{"exclusiveMinimum", "exclusiveMaximum"} {
			if _, ok := m[kw]; ok {
				s.note(ptr+"/"+kw, nil, "the manifest has inclusive bounds only: the bound itself is accepted by the gateway (the upstream still refuses it)")
			}
		}
	}
	if p.Minimum != nil && p.Maximum != nil && *p.Minimum > *p.Maximum {
		s.note(ptr, nil, fmt.Sprintf("minimum %v is above maximum %v: no value fits, bounds left out", *p.Minimum, *p.Maximum))
		p.Minimum, p.Maximum = nil, nil
	}
	return []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
}

// bound reads an inclusive bound from the keyword and its exclusive twin
// (a number in draft 6 and later, a flag on the inclusive bound in draft
// 4), keeping the tighter; step is +1 for a lower bound, -1 for an upper.
func bound(m map[string]any, incl, excl string, integer bool, step float64) *float64 {
	var out *float64
	tighter := func(v float64) {
		if out == nil || (step > 0 && v > *out) || (step < 0 && v < *out) {
			out = &v
		}
	}
	exclusive := func(v float64) {
		if integer {
			if step > 0 {
				v = math.Floor(v) + 1
			} else {
				v = math.Ceil(v) - 1
			}
		}
		tighter(v)
	}
	if v, ok := m[incl].(float64); ok {
		if m[excl] == true {
			exclusive(v)
		} else {
			tighter(v)
		}
	}
	if v, ok := m[excl].(float64); ok {
		exclusive(v)
	}
	return out
}

// text copies the constraints of a string.
func (s *schemaReader) text(p *param, m map[string]any, ptr string) []string {
	p.MinLength = s.count(m, "minLength", ptr)
	p.MaxLength = s.count(m, "maxLength", ptr)
	if p.MinLength != nil && p.MaxLength != nil && *p.MinLength > *p.MaxLength {
		s.note(ptr, nil, fmt.Sprintf("minLength %d is above maxLength %d: no value fits, lengths left out", *p.MinLength, *p.MaxLength))
		p.MinLength, p.MaxLength = nil, nil
	}
	if pat, ok := m["pattern"].(string); ok {
		if _, err := regexp.Compile(pat); err == nil {
			p.Pattern = pat
		} else {
			s.note(ptr+"/pattern", nil, "the pattern is not an RE2 regular expression (Go's regexp): left out, the upstream still checks it")
		}
	}
	if f, ok := m["format"].(string); ok {
		if formats[f] {
			p.Format = f
		} else {
			s.note(ptr+"/format", nil, fmt.Sprintf("format %q is not one the manifest asserts: left out, the upstream may check it", f))
		}
	}
	return []string{"minLength", "maxLength", "pattern", "format"}
}

// array copies the items and maxItems of an array.
func (s *schemaReader) array(p *param, m map[string]any, ptr string) []string {
	p.MaxItems = s.count(m, "maxItems", ptr)
	switch it := m["items"].(type) {
	case map[string]any:
		if len(it) > 0 {
			if s.depth >= maxDepth {
				s.note(ptr+"/items", nil, fmt.Sprintf("nested deeper than %d (a recursive schema?): the items are not checked", maxDepth))
				break
			}
			s.depth++
			p.Items = s.param(it, ptr+"/items")
			s.depth--
		}
	case []any:
		s.note(ptr+"/items", nil, "a tuple of item schemas cannot be expressed: the items are not checked by the gateway")
	}
	return []string{"items", "maxItems"}
}

// count reads a non-negative integer keyword; another value is left out
// (listed).
func (s *schemaReader) count(m map[string]any, kw, ptr string) *int {
	v, ok := m[kw]
	if !ok {
		return nil
	}
	f, ok := v.(float64)
	if !ok || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		s.note(ptr+"/"+kw, nil, fmt.Sprintf("%s %v is not a non-negative integer: left out", kw, v))
		return nil
	}
	n := int(f)
	return &n
}

// dropped lists the constraining keywords of m the draft left out: every
// keyword that is neither an annotation, nor read for every type, nor in
// kept (the keywords of the parameter's type).
func (s *schemaReader) dropped(m map[string]any, ptr string, kept ...string) {
	common := []string{"type", "description", "enum", "const", "default", "anyOf", "oneOf", "$ref"}
	var out []string
	for k := range m {
		if annotationKeywords[k] || strings.HasPrefix(k, "x-") || slices.Contains(common, k) || slices.Contains(kept, k) {
			continue
		}
		out = append(out, k)
	}
	sort.Strings(out)
	for _, k := range out {
		why := "the manifest cannot express it: left out, the upstream still checks it"
		if handledKeywords[k] {
			why = "it does not apply to the parameter's type: left out"
		}
		s.note(ptr+"/"+escape(k), nil, k+": "+why)
	}
}

// resolve returns the object schema v, following local $ref (#/…) to the
// definition, the $ref's sibling keywords kept; false for a boolean schema
// or anything that is not an object.
func (s *schemaReader) resolve(v any, ptr string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	for hops := 0; ; hops++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, true
		}
		rest := make(map[string]any, len(m))
		for k, v := range m {
			if k != "$ref" {
				rest[k] = v
			}
		}
		target, found := any(nil), false
		if hops < maxRefHops && strings.HasPrefix(ref, "#") {
			target, found = pointer(s.root, strings.TrimPrefix(ref, "#"))
		}
		tm, isObj := target.(map[string]any)
		if !found || !isObj {
			s.note(ptr+"/$ref", nil, fmt.Sprintf("$ref %q does not lead to a schema in the tool's input schema (or loops): not followed", ref))
			return rest, true
		}
		for k, v := range tm {
			if _, own := rest[k]; !own {
				rest[k] = v
			}
		}
		m = rest
	}
}

// pointer resolves a JSON Pointer in doc.
func pointer(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// escape makes a member name a JSON Pointer token.
func escape(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}
