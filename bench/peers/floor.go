package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/axgate/axgate/manifest"
)

// floorEngine is the hand-written check: encoding/json into an any, the
// manifest's parameter schemas compiled with jsonschema v5, if-statements for
// roles, tenant and the constraint, golang-jwt into a fixed claims struct and
// JCS + SHA-256 for the token's binding. It has no limits on size or depth,
// no duplicate-key or UTF-8 checks, no replay store and no error envelope:
// the least a correct check does.
type floorEngine struct {
	schemas map[string]*jsonschema.Schema
	roles   map[string][]string
	tok     *tokenCheck
}

func newFloor(pub ed25519.PublicKey) (*floorEngine, error) {
	m, err := manifest.LoadFile(filepath.Join("testdata", "docs.json"))
	if err != nil {
		return nil, err
	}
	f := &floorEngine{schemas: map[string]*jsonschema.Schema{}, roles: map[string][]string{}, tok: newTokenCheck(pub)}
	for _, a := range m.Actions {
		// The schema compiled from the JSON text, as a hand-written check
		// would have it.
		doc, err := json.Marshal(manifest.ParamsSchema(a, false))
		if err != nil {
			return nil, err
		}
		c := jsonschema.NewCompiler()
		c.Draft = jsonschema.Draft7
		c.AssertFormat = true
		url := "mem://floor/" + a.ToolName() + ".json"
		if err := c.AddResource(url, bytes.NewReader(doc)); err != nil {
			return nil, err
		}
		if f.schemas[a.ToolName()], err = c.Compile(url); err != nil {
			return nil, err
		}
		f.roles[a.ToolName()] = a.RequiredRoles
	}
	return f, nil
}

func (f *floorEngine) name() string { return "floor" }

func (f *floorEngine) decide(r *request) (decision, error) {
	sch, ok := f.schemas[r.Tool]
	if !ok {
		return decision{}, nil
	}
	var v any
	if err := json.Unmarshal(r.Args, &v); err != nil {
		return decision{}, nil
	}
	args, ok := v.(map[string]any)
	if !ok {
		return decision{}, nil
	}
	if !slices.ContainsFunc(r.Who.Roles, func(role string) bool { return slices.Contains(f.roles[r.Tool], role) }) {
		return decision{}, nil
	}
	if t, ok := args["tenant_id"]; ok && t != r.Who.Tenant {
		return decision{}, nil
	}
	if err := sch.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return decision{}, err
		}
		return decision{Violations: len(leaves(ve, nil))}, nil
	}
	switch r.Tool {
	case "doc_update":
		if args["to_page"].(float64) < args["from_page"].(float64) {
			return decision{}, nil
		}
	case "doc_delete":
		c, digest, ok := f.tok.verify(r.Token, r.Args)
		if !ok || c.ArgsSHA256 != digest || c.Intent != r.Intent || c.Subject != r.Who.ID || c.Tenant != r.Who.Tenant {
			return decision{}, nil
		}
	}
	return decision{Allow: true}, nil
}

// leaves lists the failing leaves of a validation error (path and message,
// what a caller is told).
func leaves(e *jsonschema.ValidationError, out []string) []string {
	if len(e.Causes) == 0 {
		return append(out, fmt.Sprintf("%s: %s", e.InstanceLocation, e.Message))
	}
	for _, c := range e.Causes {
		out = leaves(c, out)
	}
	return out
}
