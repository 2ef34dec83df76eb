package gate

import (
	"errors"
	"fmt"

	"github.com/axgate/axgate/internal/lint"

	"cel.dev/cel-go/checker"

	"github.com/axgate/axgate/manifest"
)

// celPrincipalBound bounds, for the cost estimate only, the size of a list
// or string read from principal or result: they come from the verified
// credential and the tool, not from the caller's arguments. The runtime
// cost limit holds whatever their real size.
const celPrincipalBound = 1024

// celSizes gives cel-go's cost estimator the worst-case sizes of what an
// expression reads: for an argument, its declared maxLength (strings) or
// maxItems (arrays), down through items and properties; where nothing is
// declared, what the argument size limit leaves room for.
type celSizes struct {
	params   map[string]*manifest.Parameter
	bare     map[string]bool
	maxBytes uint64
}

var _ checker.CostEstimator = (*celSizes)(nil)

func newCELSizes(a *manifest.Action, bare map[string]bool, maxBytes int) *celSizes {
	s := &celSizes{params: map[string]*manifest.Parameter{}, bare: bare, maxBytes: uint64(maxBytes)}
	if a != nil {
		for _, p := range a.Parameters {
			s.params[p.Name] = p
		}
	}
	return s
}

// EstimateSize implements checker.CostEstimator.
func (s *celSizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	path := n.Path()
	if len(path) == 0 {
		return nil
	}
	var p *manifest.Parameter
	var rest []string
	switch {
	case path[0] == celArgs:
		if len(path) == 1 {
			// The argument object: at least "k":0, per member.
			return s.upTo(s.maxBytes / 6)
		}
		p, rest = s.params[path[1]], path[2:]
	case path[0] == celPrincipal || path[0] == celResult:
		return s.upTo(celPrincipalBound)
	case s.bare[path[0]]:
		p, rest = s.params[path[0]], path[1:]
	default:
		return nil
	}
	for _, step := range rest {
		if p == nil {
			break
		}
		switch step {
		case "@items":
			p = p.Items
		case "@keys", "@values":
			p = nil
		default:
			var next *manifest.Parameter
			for _, q := range p.Properties {
				if q.Name == step {
					next = q
				}
			}
			p = next
		}
	}
	if p != nil {
		switch {
		case p.Type == "string" && p.MaxLength != nil:
			return s.upTo(uint64(max(*p.MaxLength, 0)))
		case p.Type == "array" && p.MaxItems != nil:
			return s.upTo(uint64(max(*p.MaxItems, 0)))
		}
	}
	// Undeclared: no longer than the document holding it. A string has at
	// most maxBytes characters, an array at most maxBytes/2 items ("0,"
	// each), an object at most maxBytes/6 members.
	if p != nil && p.Type == "array" {
		return s.upTo(s.maxBytes / 2)
	}
	return s.upTo(s.maxBytes)
}

func (s *celSizes) upTo(n uint64) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: n}
}

// EstimateCallCost implements checker.CostEstimator: the standard costs.
func (s *celSizes) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}

// LintConstraints finds, for axgate lint, the constraints of m that New would refuse.
//
// It compiles every constraint of m as NewConstraints would, with lim,
// and returns a "AXGATE-CEL-002" (constraint cost) error for each that does not
// compile or whose estimated worst-case cost exceeds the cost limit: what
// New would refuse, found by axgate lint
// (lint.LintOptions.Expressions).
func LintConstraints(m *manifest.Manifest, lim CELLimits) []lint.Finding {
	envs := &celEnvs{limits: lim.withDefaults()}
	var out []lint.Finding
	for _, a := range m.Actions {
		for _, c := range a.Constraints {
			_, err := envs.compile(a, c.Expr)
			if err == nil {
				continue
			}
			fix := "fix the expression: it must be a boolean CEL expression over args, principal and the action's parameters"
			var ce *CELCostError
			if errors.As(err, &ce) {
				fix = "declare maxLength on the strings and maxItems on the arrays the constraint reads (and on their items), or simplify it"
			}
			out = append(out, lint.Finding{
				Rule: "AXGATE-CEL-002", Severity: lint.SeverityError, Path: c.Pointer,
				Message: fmt.Sprintf("constraint %s: %v", c.Name, err), Fix: fix,
			})
		}
	}
	return out
}
