package manifest

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/axgate/axgate/internal/schemax"
)

// schemaJSON is the JSON Schema (draft-07) axgate validates manifests against
// before it reads them. It accepts both published forms and every safety
// field, and nothing else.
//
//go:embed schema/manifest.schema.json
var schemaJSON []byte

var (
	schemaOnce     sync.Once
	manifestSchema *jsonschema.Schema
	schemaDoc      any
	schemaErr      error
)

func compiledSchema() (*jsonschema.Schema, any, error) {
	schemaOnce.Do(func() {
		if schemaErr = json.Unmarshal(schemaJSON, &schemaDoc); schemaErr != nil {
			return
		}
		manifestSchema, schemaErr = schemax.CompileBytes("https://axgate.dev/schema/axag-manifest.json", schemaJSON)
	})
	return manifestSchema, schemaDoc, schemaErr
}

// validateStructure checks doc against the embedded schema and words each
// failure for a manifest author.
func validateStructure(doc any) []Problem {
	sch, sdoc, err := compiledSchema()
	if err != nil {
		// The schema is embedded and tested; this is a build defect.
		return []Problem{{Message: "internal: manifest schema does not compile: " + err.Error(), Keyword: "internal"}}
	}
	verr := sch.Validate(doc)
	if verr == nil {
		return nil
	}
	var out []Problem
	for _, l := range schemax.Flatten(verr, sdoc, doc) {
		p := Problem{Path: l.Path, Message: l.Message, Keyword: l.Keyword}
		switch l.Keyword {
		case "required":
			p.Message = fmt.Sprintf("missing required field %q", l.Member)
		case "pattern":
			if strings.HasSuffix(l.Path, "/upstream_sha256") {
				// The schema's message quotes the regular expression; say
				// what the value is instead.
				p.Message = "upstream_sha256 must be 64 lowercase hexadecimal digits (the SHA-256 of the upstream tool's definition)"
			}
		case "additionalProperties":
			p.Message = fmt.Sprintf("unknown field %q", l.Member)
			if s := closest(l.Member, l.Allowed); s != "" {
				p.Message += fmt.Sprintf(" (did you mean %q?)", s)
			}
		}
		out = append(out, p)
	}
	return dedupe(out)
}

// dedupe drops repeated problems: if/then/else can report one fault twice.
func dedupe(ps []Problem) []Problem {
	seen := make(map[Problem]bool, len(ps))
	out := ps[:0]
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// closest returns the candidate within a small edit distance of s, if any.
func closest(s string, candidates []string) string {
	best, bestD := "", 3
	if len(s) <= 4 {
		bestD = 2
	}
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), c); d > 0 && d < bestD {
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
