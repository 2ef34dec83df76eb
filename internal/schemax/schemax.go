// Package schemax compiles JSON Schema documents with
// santhosh-tekuri/jsonschema/v5 and flattens its error trees into one entry
// per failing leaf, each with a JSON Pointer to the offending value.
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
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []Leaf{{Message: err.Error()}}
	}
	var out []Leaf
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		out = append(out, leaves(e, schemaDoc, instance)...)
	}
	walk(ve)
	// The validator visits an object's properties in map order; sorting by
	// path (stable, so one value's failures keep their order) makes the
	// report the same on every run.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func leaves(e *jsonschema.ValidationError, schemaDoc, instance any) []Leaf {
	kw := lastToken(e.KeywordLocation)
	switch kw {
	case "required", "additionalProperties":
		frag := e.AbsoluteKeywordLocation
		if i := strings.IndexByte(frag, '#'); i >= 0 {
			frag = frag[i+1:]
		}
		parent := frag[:strings.LastIndexByte(frag, '/')]
		node, _ := jsonx.Resolve(schemaDoc, parent)
		obj, _ := jsonx.Resolve(instance, e.InstanceLocation)
		sch, _ := node.(map[string]any)
		inst, _ := obj.(map[string]any)
		if sch == nil || inst == nil {
			break
		}
		var names, allowed []string
		if kw == "required" {
			req, _ := sch["required"].([]any)
			for _, r := range req {
				if n, _ := r.(string); n != "" {
					if _, ok := inst[n]; !ok {
						names = append(names, n)
					}
				}
			}
		} else {
			props, _ := sch["properties"].(map[string]any)
			for n := range inst {
				if _, ok := props[n]; !ok {
					names = append(names, n)
				}
			}
			for n := range props {
				allowed = append(allowed, n)
			}
			sort.Strings(names)
			sort.Strings(allowed)
		}
		if len(names) == 0 {
			break
		}
		out := make([]Leaf, 0, len(names))
		for _, n := range names {
			msg := fmt.Sprintf("missing properties: '%s'", n)
			if kw == "additionalProperties" {
				msg = fmt.Sprintf("additionalProperties '%s' not allowed", n)
			}
			out = append(out, Leaf{Path: e.InstanceLocation + "/" + jsonx.EscapePointer(n), Message: msg, Keyword: kw, Member: n, Allowed: allowed})
		}
		return out
	}
	return []Leaf{{Path: e.InstanceLocation, Message: e.Message, Keyword: kw}}
}

func lastToken(ptr string) string {
	if i := strings.LastIndexByte(ptr, '/'); i >= 0 {
		return jsonx.UnescapePointer(ptr[i+1:])
	}
	return ptr
}
