package manifest

import (
	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/axgate/axgate/internal/schemax"
)

// ParamsSchema returns the JSON Schema (draft-07) of an action's arguments.
//
// It follows AXAG's tool mapping: min→minimum, max→maximum, format hints to
// JSON Schema formats, nested objects and arrays, defaults as annotations.
// Objects with declared properties refuse undeclared members unless
// allowUnknown is set, so a misspelled argument is refused, not ignored. It
// returns nil for an action that declares no parameters.
func ParamsSchema(a *Action, allowUnknown bool) map[string]any {
	if !a.ParametersDeclared {
		return nil
	}
	s := objectSchema(a.Parameters, allowUnknown, true)
	s["$schema"] = "http://json-schema.org/draft-07/schema#"
	return s
}

func objectSchema(params []*Parameter, allowUnknown, declared bool) map[string]any {
	s := map[string]any{"type": "object"}
	if !declared {
		return s
	}
	props := make(map[string]any, len(params))
	var req []any
	for _, p := range params {
		props[p.Name] = paramSchema(p, allowUnknown)
		if p.Required {
			req = append(req, p.Name)
		}
	}
	s["properties"] = props
	if len(req) > 0 {
		s["required"] = req
	}
	if !allowUnknown {
		s["additionalProperties"] = false
	}
	return s
}

func paramSchema(p *Parameter, allowUnknown bool) map[string]any {
	var s map[string]any
	if p.Type == "object" {
		s = objectSchema(p.Properties, allowUnknown, len(p.Properties) > 0)
	} else {
		s = map[string]any{}
		if p.Type != "" {
			s["type"] = p.Type
		}
	}
	if p.Description != "" {
		s["description"] = p.Description
	}
	if p.Enum != nil {
		s["enum"] = p.Enum
	}
	if p.Minimum != nil {
		s["minimum"] = *p.Minimum
	}
	if p.Maximum != nil {
		s["maximum"] = *p.Maximum
	}
	if p.MinLength != nil {
		s["minLength"] = *p.MinLength
	}
	if p.MaxLength != nil {
		s["maxLength"] = *p.MaxLength
	}
	if p.Pattern != "" {
		s["pattern"] = p.Pattern
	}
	if p.Format != "" {
		s["format"] = p.Format
	}
	if p.HasDefault {
		s["default"] = p.Default
	}
	if p.MaxItems != nil {
		s["maxItems"] = *p.MaxItems
	}
	if p.Items != nil {
		s["items"] = paramSchema(p.Items, allowUnknown)
	}
	return s
}

// CompileParams compiles an action's parameter schema; allowUnknown accepts
// undeclared arguments. It returns the schema document with the compiled
// schema, or nils for an action that declares no parameters.
func CompileParams(a *Action, allowUnknown bool) (map[string]any, *jsonschema.Schema, error) {
	doc := ParamsSchema(a, allowUnknown)
	if doc == nil {
		return nil, nil, nil
	}
	s, err := compileParams(a, doc)
	return doc, s, err
}

func compileParams(a *Action, doc map[string]any) (*jsonschema.Schema, error) {
	return schemax.Compile("mem://axgate/params/"+a.toolName+".json", doc)
}

func compileOutputSchema(a *Action) (*jsonschema.Schema, error) {
	return schemax.CompileBytes("mem://axgate/output/"+a.toolName+".json", a.OutputSchema)
}
