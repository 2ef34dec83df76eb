package schemax

import (
	"fmt"
	"math"
	"math/big"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Fast is an allocation-free acceptance check compiled from a v5 schema.
//
// It answers one question, "does the v5 schema certainly accept this
// value?", for the keywords a manifest's parameter model compiles to (type,
// properties, required, additionalProperties, enum, minimum, maximum,
// minLength, maxLength, pattern, format, maxItems, items). Accepts returning
// true means the v5 schema's Validate returns nil for the value; false means
// "not certain". Valid calls, the common case, so skip v5's per-call
// allocations. On a refusal, Validate names the violations exactly as v5's
// Validate would (the same leaves: keyword, instance location, message,
// schema location) wherever it can be certain of them, and says so; the
// caller runs v5 everywhere else. TestFastViolationsMatchV5 and
// FuzzFastViolationsMatchV5 hold it to v5's leaves.
type Fast struct{ root *fastNode }

type fastNode struct {
	types    uint8 // bit set of fastType*; 0: any type
	props    map[string]*fastNode
	required []string
	closed   bool // additionalProperties: false

	enum      []any  // string, bool or nil items only (others: uncovered)
	enumError string // v5's message for a value not in enum

	loc        string          // the schema's location, as v5's leaves name it
	abs        [kwCount]string // loc + "/" + each keyword
	typeNames  []string        // the type keyword, for v5's type message
	formatName string

	min, max           float64
	hasMin, hasMax     bool
	minExact, maxExact bool // the bound is exactly that float64

	minLen, maxLen int // -1: none
	pattern        *regexp.Regexp
	format         func(any) bool

	maxItems int // -1: none
	items    *fastNode
}

const (
	fastNull uint8 = 1 << iota
	fastBool
	fastNumber
	fastInteger
	fastString
	fastArray
	fastObject
)

var fastTypes = map[string]uint8{
	"null": fastNull, "boolean": fastBool, "number": fastNumber, "integer": fastInteger,
	"string": fastString, "array": fastArray, "object": fastObject,
}

// CompileFast compiles the fast path of s, or returns nil when s uses a
// keyword the fast path does not cover (the caller then always runs v5).
func CompileFast(s *jsonschema.Schema) *Fast {
	if s == nil {
		return nil
	}
	n := fastCompile(s, 0)
	if n == nil {
		return nil
	}
	return &Fast{root: n}
}

func fastCompile(s *jsonschema.Schema, depth int) *fastNode {
	if depth > 64 || !fastCovered(s) {
		return nil
	}
	n := &fastNode{minLen: s.MinLength, maxLen: s.MaxLength, maxItems: s.MaxItems, pattern: s.Pattern,
		loc: s.Location, typeNames: s.Types, formatName: s.Format}
	for kw, l := range fastKeywordLocs {
		n.abs[kw] = joinPtr(s.Location, l[1:])
	}
	for _, t := range s.Types {
		bit, ok := fastTypes[t]
		if !ok {
			return nil
		}
		n.types |= bit
	}
	for _, e := range s.Enum {
		switch e.(type) {
		case string, bool, nil:
		default:
			return nil
		}
	}
	n.enum = s.Enum
	n.enumError = enumError(s.Enum)
	if s.Format != "" {
		f, ok := jsonschema.Formats[s.Format]
		if !ok {
			return nil
		}
		n.format = f
	}
	if s.Minimum != nil {
		n.min, n.minExact = ratFloat(s.Minimum)
		n.hasMin = true
	}
	if s.Maximum != nil {
		n.max, n.maxExact = ratFloat(s.Maximum)
		n.hasMax = true
	}
	switch ap := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		n.closed = !ap
	default:
		return nil
	}
	n.required = s.Required
	if len(s.Properties) > 0 {
		n.props = make(map[string]*fastNode, len(s.Properties))
		for name, ps := range s.Properties {
			c := fastCompile(ps, depth+1)
			if c == nil {
				return nil
			}
			n.props[name] = c
		}
	}
	switch it := s.Items.(type) {
	case nil:
	case *jsonschema.Schema:
		if n.items = fastCompile(it, depth+1); n.items == nil {
			return nil
		}
	default:
		return nil
	}
	return n
}

// fastCovered reports whether s uses only the keywords the fast path checks
// (annotations aside).
func fastCovered(s *jsonschema.Schema) bool {
	return s.Always == nil && s.Ref == nil && s.RecursiveRef == nil && s.DynamicRef == nil &&
		len(s.Constant) == 0 && s.Not == nil && len(s.AllOf) == 0 && len(s.AnyOf) == 0 &&
		len(s.OneOf) == 0 && s.If == nil && s.MinProperties == -1 && s.MaxProperties == -1 &&
		s.PropertyNames == nil && len(s.PatternProperties) == 0 && len(s.Dependencies) == 0 &&
		len(s.DependentRequired) == 0 && len(s.DependentSchemas) == 0 &&
		s.UnevaluatedProperties == nil && s.MinItems == -1 && !s.UniqueItems &&
		s.AdditionalItems == nil && len(s.PrefixItems) == 0 && s.Items2020 == nil &&
		s.Contains == nil && s.UnevaluatedItems == nil && s.ContentEncoding == "" &&
		s.ContentMediaType == "" && s.ContentSchema == nil && s.ExclusiveMinimum == nil &&
		s.ExclusiveMaximum == nil && s.MultipleOf == nil && len(s.Extensions) == 0
}

// ratFloat is r as the nearest float64, and whether that is r exactly.
func ratFloat(r *big.Rat) (float64, bool) {
	f, exact := r.Float64()
	return f, exact && !math.IsInf(f, 0)
}

// Accepts reports whether the v5 schema certainly accepts v, a value as
// encoding/json decodes into an any. False means "run v5".
func (f *Fast) Accepts(v any) bool { return f != nil && f.root.accepts(v) }

func (n *fastNode) accepts(v any) bool {
	switch x := v.(type) {
	case nil:
		if n.types != 0 && n.types&fastNull == 0 {
			return false
		}
	case bool:
		if n.types != 0 && n.types&fastBool == 0 {
			return false
		}
	case float64:
		if !n.number(x) {
			return false
		}
	case string:
		if !n.str(x) {
			return false
		}
	case []any:
		if n.types != 0 && n.types&fastArray == 0 {
			return false
		}
		if n.maxItems >= 0 && len(x) > n.maxItems {
			return false
		}
		if n.items != nil {
			for _, it := range x {
				if !n.items.accepts(it) {
					return false
				}
			}
		}
	case map[string]any:
		if n.types != 0 && n.types&fastObject == 0 {
			return false
		}
		for _, r := range n.required {
			if _, ok := x[r]; !ok {
				return false
			}
		}
		if n.props != nil || n.closed {
			for k, mv := range x {
				p, ok := n.props[k]
				if !ok {
					if n.closed {
						return false
					}
					continue
				}
				if !p.accepts(mv) {
					return false
				}
			}
		}
	default:
		return false // a Go type v5 would panic on or that decoding never makes
	}
	if len(n.enum) > 0 && !n.inEnum(v) {
		return false
	}
	if n.format != nil && !n.format(v) {
		return false
	}
	return true
}

func (n *fastNode) inEnum(v any) bool {
	switch v.(type) {
	case string, bool, nil:
	default:
		return false
	}
	for _, e := range n.enum {
		if e == v {
			return true
		}
	}
	return false
}

// number checks a float64 the way v5 does (which compares exact decimals
// with big.Rat): a float comparison agrees with it except where the value
// equals a bound that no float64 holds exactly, which is left to v5.
func (n *fastNode) number(x float64) bool {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return false
	}
	if n.types != 0 && n.types&fastNumber == 0 {
		// Only "integer" can match a number now: a whole float64 small
		// enough that its decimal form has no fraction.
		if n.types&fastInteger == 0 || x != math.Trunc(x) || math.Abs(x) >= 1<<53 {
			return false
		}
	}
	if n.hasMin && !(x > n.min || (x == n.min && n.minExact)) {
		return false
	}
	if n.hasMax && !(x < n.max || (x == n.max && n.maxExact)) {
		return false
	}
	return true
}

func (n *fastNode) str(x string) bool {
	if n.types != 0 && n.types&fastString == 0 {
		return false
	}
	if n.minLen >= 0 || n.maxLen >= 0 {
		l := utf8.RuneCountInString(x)
		if (n.minLen >= 0 && l < n.minLen) || (n.maxLen >= 0 && l > n.maxLen) {
			return false
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(x) {
		return false
	}
	return true
}

// Validate is the v5 verdict on v where the fast path can name it exactly.
//
// certain false means "run v5" (a value the fast path cannot judge the way
// v5 does: a bound no float64 holds, a whole number too large to tell an
// integer by, a Go type decoding never makes). With certain true, err is
// nil when v5 accepts v, or else an error whose leaves are the ones v5's
// Validate reports, in v5's order within each instance location: the same
// keyword, instance location, message and schema location, so FlattenN
// makes the same violations of it. Inner nodes are not reproduced (FlattenN
// reads only the leaves).
func (f *Fast) Validate(v any) (err *jsonschema.ValidationError, certain bool) {
	if f == nil {
		return nil, false
	}
	var leaves []*jsonschema.ValidationError
	if !f.root.violations(v, "", &leaves) {
		return nil, false
	}
	if len(leaves) == 0 {
		return nil, true
	}
	return &jsonschema.ValidationError{AbsoluteKeywordLocation: f.root.loc, Causes: leaves}, true
}

// violations appends v5's leaves for v at instance location vloc; false
// when it cannot be certain.
func (n *fastNode) violations(v any, vloc string, out *[]*jsonschema.ValidationError) bool {
	fail := func(kw fastKeyword, msg string) {
		*out = append(*out, &jsonschema.ValidationError{
			KeywordLocation:         fastKeywordLocs[kw],
			AbsoluteKeywordLocation: n.abs[kw],
			InstanceLocation:        vloc,
			Message:                 msg,
		})
	}
	if n.types != 0 {
		var t string
		ok := false
		switch x := v.(type) {
		case nil:
			t, ok = "null", n.types&fastNull != 0
		case bool:
			t, ok = "boolean", n.types&fastBool != 0
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return false
			}
			t, ok = "number", n.types&fastNumber != 0
			if !ok && n.types&fastInteger != 0 && x == math.Trunc(x) {
				if math.Abs(x) >= 1<<53 {
					return false // v5 prints and parses it; leave it to v5
				}
				ok = true
			}
		case string:
			t, ok = "string", n.types&fastString != 0
		case []any:
			t, ok = "array", n.types&fastArray != 0
		case map[string]any:
			t, ok = "object", n.types&fastObject != 0
		default:
			return false
		}
		if !ok {
			fail(kwType, fmt.Sprintf("expected %s, but got %s", strings.Join(n.typeNames, " or "), t))
			return true
		}
	}
	if len(n.enum) > 0 {
		switch v.(type) {
		case string, bool, nil:
			if !n.inEnum(v) {
				fail(kwEnum, n.enumError)
			}
		case float64, []any, map[string]any:
			fail(kwEnum, n.enumError) // equals() never matches a string, bool or null
		default:
			return false
		}
	}
	if n.format != nil && !n.format(v) {
		var val any = v
		if s, ok := v.(string); ok {
			val = quote(s)
		}
		fail(kwFormat, fmt.Sprintf("%v is not valid %s", val, quote(n.formatName)))
	}
	switch x := v.(type) {
	case map[string]any:
		if len(n.required) > 0 {
			var missing []string
			for _, r := range n.required {
				if _, ok := x[r]; !ok {
					missing = append(missing, quote(r))
				}
			}
			if len(missing) > 0 {
				fail(kwRequired, "missing properties: "+strings.Join(missing, ", "))
			}
		}
		var extra []string
		for k, mv := range x {
			p, ok := n.props[k]
			if !ok {
				if n.closed {
					extra = append(extra, quote(k))
				}
				continue
			}
			if p.accepts(mv) {
				continue
			}
			loc := vloc + "/" + escape(k)
			if !p.violations(mv, loc, out) {
				return false
			}
		}
		if len(extra) > 0 {
			fail(kwAdditionalProperties, "additionalProperties "+strings.Join(extra, ", ")+" not allowed")
		}
	case []any:
		if n.maxItems >= 0 && len(x) > n.maxItems {
			fail(kwMaxItems, fmt.Sprintf("maximum %d items required, but found %d items", n.maxItems, len(x)))
		}
		if n.items != nil {
			for i, it := range x {
				if n.items.accepts(it) {
					continue
				}
				if !n.items.violations(it, vloc+"/"+strconv.Itoa(i), out) {
					return false
				}
			}
		}
	case string:
		if n.minLen >= 0 || n.maxLen >= 0 {
			l := utf8.RuneCountInString(x)
			if n.minLen >= 0 && l < n.minLen {
				fail(kwMinLength, "length must be >= "+strconv.Itoa(n.minLen)+", but got "+strconv.Itoa(l))
			}
			if n.maxLen >= 0 && l > n.maxLen {
				fail(kwMaxLength, "length must be <= "+strconv.Itoa(n.maxLen)+", but got "+strconv.Itoa(l))
			}
		}
		if n.pattern != nil && !n.pattern.MatchString(x) {
			fail(kwPattern, "does not match pattern "+quote(n.pattern.String()))
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
		if n.hasMin {
			if x == n.min && !n.minExact {
				return false
			}
			if x < n.min {
				fail(kwMinimum, "must be >= "+formatFloat(n.min)+" but found "+formatFloat(x))
			}
		}
		if n.hasMax {
			if x == n.max && !n.maxExact {
				return false
			}
			if x > n.max {
				fail(kwMaximum, "must be <= "+formatFloat(n.max)+" but found "+formatFloat(x))
			}
		}
	case nil, bool:
	default:
		return false
	}
	return true
}

// fastKeyword names a keyword the fast path reports on.
type fastKeyword uint8

const (
	kwType fastKeyword = iota
	kwEnum
	kwFormat
	kwRequired
	kwAdditionalProperties
	kwMaxItems
	kwMinLength
	kwMaxLength
	kwPattern
	kwMinimum
	kwMaximum
	kwCount
)

// fastKeywordLocs is each keyword as the last token of a keyword location.
var fastKeywordLocs = [kwCount]string{
	kwType: "/type", kwEnum: "/enum", kwFormat: "/format", kwRequired: "/required",
	kwAdditionalProperties: "/additionalProperties", kwMaxItems: "/maxItems",
	kwMinLength: "/minLength", kwMaxLength: "/maxLength", kwPattern: "/pattern",
	kwMinimum: "/minimum", kwMaximum: "/maximum",
}

// formatFloat is fmt's %v of a float64 (v5 prints bounds and numbers so).
func formatFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e6 && (f != 0 || !math.Signbit(f)) {
		return strconv.Itoa(int(f)) // what %v prints for these, without the shortest-digits search
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// enumError is v5's message for a value outside enum, whose items are all
// strings, booleans or null (compiler.go builds it so).
func enumError(enum []any) string {
	if len(enum) == 1 {
		return fmt.Sprintf("value must be %#v", enum[0])
	}
	strEnum := make([]string, len(enum))
	for i, item := range enum {
		strEnum[i] = fmt.Sprintf("%#v", item)
	}
	return fmt.Sprintf("value must be one of %s", strings.Join(strEnum, ", "))
}

// joinPtr, quote and escape are v5's own (unexported) helpers for its
// locations and messages, written again so that the leaves read the same.
func joinPtr(ptr1, ptr2 string) string {
	if ptr1 == "" {
		return ptr2
	}
	if ptr2 == "" {
		return ptr1
	}
	return ptr1 + "/" + ptr2
}

func quote(s string) string {
	s = strconv.Quote(s)
	s = strings.ReplaceAll(s, `\"`, `"`)
	s = strings.ReplaceAll(s, `'`, `\'`)
	return "'" + s[1:len(s)-1] + "'"
}

func escape(token string) string {
	token = strings.ReplaceAll(token, "~", "~0")
	token = strings.ReplaceAll(token, "/", "~1")
	return url.PathEscape(token)
}
