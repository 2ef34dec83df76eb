package gates

import (
	"context"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v5"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/schemax"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// StageParams is the name of the parameter stage.
const StageParams = "params"

// Params checks arguments against each action's compiled parameter schema and
// reports every violation at once.
type Params struct {
	schemas map[*manifest.Action]paramSchema
}

type paramSchema struct {
	doc    map[string]any
	schema *jsonschema.Schema
}

// NewParams prepares the parameter gate for every action of m. With
// allowUnknown, undeclared arguments are accepted (the schemas are compiled
// again without additionalProperties: false).
func NewParams(m *manifest.Manifest, allowUnknown bool) (*Params, error) {
	p := &Params{schemas: make(map[*manifest.Action]paramSchema, len(m.Actions))}
	for _, a := range m.Actions {
		ps := paramSchema{doc: a.InputSchema(), schema: a.ParamSchema()}
		if allowUnknown && a.ParametersDeclared {
			doc, s, err := manifest.CompileParams(a, true)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", a.Pointer, err)
			}
			ps = paramSchema{doc: doc, schema: s}
		}
		p.schemas[a] = ps
	}
	return p, nil
}

// Stage returns the gate as a chain stage.
func (p *Params) Stage() middleware.Stage {
	return checkStage(StageParams, nil, func(_ context.Context, call *middleware.Call) error { return p.Check(call) })
}

// Check validates the call's arguments: nil, or an *errors.Error listing every
// violation (its code is the first violation's).
func (p *Params) Check(call *middleware.Call) error {
	args, err := call.Args()
	if err != nil {
		return err
	}
	vs, err := p.Violations(call.Action, args)
	if err != nil || len(vs) == 0 {
		return err
	}
	e := axerr.Aggregate(call.Intent(), vs)
	e.Suggestion = suggestion(vs[0])
	return e
}

// Violations validates a decoded argument document against the action's
// schema and returns the validator's failures in its natural order, one per
// leaf, each with its AXAG code. An action without declared parameters
// accepts anything; an action that is not from the manifest the gate was
// built for is refused (the gate has no schema to vouch for it).
func (p *Params) Violations(a *manifest.Action, value any) ([]axerr.Violation, error) {
	ps, ok := p.schemas[a]
	if !ok {
		name := "<nil>"
		if a != nil {
			name = a.Intent
		}
		return nil, axerr.Newf(axerr.CodeInternal, "the parameter gate has no schema for action %q: it is not from the enforced manifest", name)
	}
	if ps.schema == nil {
		return nil, nil
	}
	err := ps.schema.Validate(value)
	if err == nil {
		return nil, nil
	}
	leaves := schemax.Flatten(err, ps.doc, value)
	vs := make([]axerr.Violation, len(leaves))
	for i, l := range leaves {
		vs[i] = axerr.Violation{Path: l.Path, Message: l.Message, Keyword: l.Keyword, Code: axerr.CodeForKeyword(l.Keyword)}
	}
	return vs, nil
}

func suggestion(v axerr.Violation) string {
	switch v.Code {
	case axerr.CodeMissingParam:
		return fmt.Sprintf("Add %s to the arguments.", v.Path)
	case axerr.CodeUnknownParam:
		return fmt.Sprintf("Remove %s; the tool does not declare it (check the spelling against the tool's inputSchema).", v.Path)
	}
	return fmt.Sprintf("Fix %s as the message says; the tool's inputSchema has the rules.", v.Path)
}

// Schema returns the schema document the gate enforces for a, or nil.
func (p *Params) Schema(a *manifest.Action) map[string]any { return p.schemas[a].doc }
