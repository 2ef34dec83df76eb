package gate

import (
	"context"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v5"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/schemax"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// Params checks arguments against each action's compiled parameter schema and
// reports the violations at once: the first MaxViolations in path order, and
// the count of the others.
type Params struct {
	schemas map[*manifest.Action]paramSchema

	// MaxViolations is how many violations a refusal lists; the others are
	// counted (details.violations_omitted). 0 means
	// axerr.DefaultMaxViolations. Set it before the gate is used.
	MaxViolations int
}

type paramSchema struct {
	doc    map[string]any
	schema *jsonschema.Schema
	// fast accepts, without allocating, what schema certainly accepts;
	// nil when the schema uses a keyword it does not cover.
	fast *schemax.Fast
	// folds finds keys that differ from a declared name only in letter
	// case where the schema accepts undeclared members; nil when nowhere.
	folds *foldNode
}

// NewParams prepares the parameter gate for every action of m. With
// allowUnknown, undeclared arguments are accepted (the schemas are compiled
// again without additionalProperties: false).
func NewParams(m *manifest.Manifest, allowUnknown bool) (*Params, error) {
	checked := m.Checked() // the resources' and prompts' actions declare no parameters
	p := &Params{schemas: make(map[*manifest.Action]paramSchema, len(checked))}
	for _, a := range checked {
		ps := paramSchema{doc: a.InputSchema(), schema: a.ParamSchema()}
		if allowUnknown && a.ParametersDeclared {
			doc, s, err := manifest.CompileParams(a, true)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", a.Pointer, err)
			}
			ps = paramSchema{doc: doc, schema: s}
		}
		ps.folds = newFoldNode(ps.doc)
		ps.fast = schemax.CompileFast(ps.schema)
		p.schemas[a] = ps
	}
	return p, nil
}

// Stage returns the gate as a chain stage.
func (p *Params) Stage() middleware.Stage {
	return checkStage(StageParams, nil, func(_ context.Context, call *middleware.Call) error { return p.Check(call) })
}

// Check validates the call's arguments: nil, or an *axerr.Error listing every
// violation (its code is the first violation's).
func (p *Params) Check(call *middleware.Call) error {
	args, err := call.Args()
	if err != nil {
		return err
	}
	vs, omitted, err := p.Violations(call.Action, args)
	if err != nil || len(vs) == 0 {
		return err
	}
	if vs[0].Keyword == KeywordAmbiguousKey {
		return ambiguousKeyError(call.Intent(), vs, omitted)
	}
	e := axerr.AggregateOmitted(call.Intent(), vs, omitted)
	e.Suggestion = suggestion(vs[0])
	return e
}

// Violations validates a decoded argument document against the action's schema.
//
// It returns the validator's failures, one per leaf, each with its AXAG
// code, in path order: at most MaxViolations of them, and how many more
// there are. Those past the cap are counted, not built. A key that is not a
// declared name but differs from one only in letter case, where the schema
// accepts undeclared members, is a violation with keyword
// KeywordAmbiguousKey; when there are such keys they are the only violations
// reported (what the schema would say of the rest depends on which spelling
// a decoder picks). An action without declared parameters accepts anything;
// an action that is not from the manifest the gate was built for is refused
// (the gate has no schema to vouch for it).
func (p *Params) Violations(a *manifest.Action, value any) (vs []axerr.Violation, omitted int, err error) {
	ps, ok := p.schemas[a]
	if !ok {
		name := "<nil>"
		if a != nil {
			name = a.Intent
		}
		return nil, 0, axerr.Newf(axerr.CodeInternal, "the parameter gate has no schema for action %q: it is not from the enforced manifest", name)
	}
	if ps.schema == nil {
		return nil, 0, nil
	}
	if ps.folds != nil {
		max := p.MaxViolations
		if max < 1 {
			max = axerr.DefaultMaxViolations
		}
		if vs, omitted = ps.folds.check(value, "", nil, max, 0); len(vs) > 0 {
			return vs, omitted, nil
		}
	}
	if ps.fast.Accepts(value) {
		return nil, 0, nil // v5 accepts it too
	}
	// A refusal is v5's verdict: the fast path names it where it can do so
	// exactly as v5 would (the same leaves; TestFastViolationsMatchV5), and
	// v5 itself runs everywhere else.
	if verr, certain := ps.fast.Validate(value); certain && verr != nil {
		vs, omitted = violations(verr, ps.doc, value, p.MaxViolations, "")
		return vs, omitted, nil
	}
	if err := ps.schema.Validate(value); err != nil {
		vs, omitted = violations(err, ps.doc, value, p.MaxViolations, "")
	}
	return vs, omitted, nil
}

// violations flattens a validation error into at most max violations
// (0: axerr.DefaultMaxViolations) and the count of the rest. code, when
// set, replaces each keyword's own code.
func violations(err error, doc, value any, max int, code axerr.Code) ([]axerr.Violation, int) {
	if max < 1 {
		max = axerr.DefaultMaxViolations
	}
	leaves, omitted := schemax.FlattenN(err, doc, value, max)
	vs := make([]axerr.Violation, len(leaves))
	for i, l := range leaves {
		c := code
		if c == "" {
			c = CodeForKeyword(l.Keyword)
		}
		vs[i] = axerr.Violation{Path: l.Path, Message: l.Message, Keyword: l.Keyword, Code: c}
	}
	return vs, omitted
}

func suggestion(v axerr.Violation) string {
	// Concatenation, not fmt: a refusal's hot path (the same text as %s).
	switch v.Code {
	case axerr.CodeMissingParam:
		return "Add " + v.Path + " to the arguments."
	case axerr.CodeUnknownParam:
		return "Remove " + v.Path + "; the tool does not declare it (check the spelling against the tool's inputSchema)."
	}
	return "Fix " + v.Path + " as the message says; the tool's inputSchema has the rules."
}

// Schema returns the schema document the gate enforces for a, or nil.
func (p *Params) Schema(a *manifest.Action) map[string]any { return p.schemas[a].doc }
