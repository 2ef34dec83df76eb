package gate

import (
	"slices"
	"strconv"
	"strings"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/jsonx"
	"github.com/axgate/axgate/internal/reasons"
)

// KeywordAmbiguousKey marks an argument key that is a declared name only under case folding.
//
// It is the keyword of a violation for an argument key that is not a
// declared name but equal to one under Unicode simple case folding (LIMIT
// beside a declared limit). A tool that binds its arguments to a struct with
// encoding/json, which matches keys case-insensitively, reads such a key as
// the declared one, which the gates never checked under that name: the
// schema took it for an unknown argument (allowed with WithUnknownParams),
// the access gate for no tenant or user argument at all.
const KeywordAmbiguousKey = "ambiguous_keys"

// foldedNames is a set of declared names with their case folding
// (jsonx.FoldKey, the decoder's own).
type foldedNames struct {
	exact map[string]struct{}
	// fold maps the folding of each name to a name (two declared names
	// may fold alike; either is a fine answer, exact keys are never looked
	// up).
	fold map[string]string
}

func newFoldedNames(names ...[]string) *foldedNames {
	f := &foldedNames{exact: map[string]struct{}{}, fold: map[string]string{}}
	for _, ns := range names {
		for _, n := range ns {
			f.exact[n] = struct{}{}
			f.fold[jsonx.FoldKey(n)] = n
		}
	}
	return f
}

// strays returns the keys of obj that are not one of the names but fold onto
// one, sorted, with the name each folds onto. Keys of lower-case ASCII, the
// usual arguments, cost a map lookup or two and allocate nothing.
func (f *foldedNames) strays(obj map[string]any) (keys, names []string) {
	for k := range obj {
		if _, ok := f.exact[k]; ok {
			continue
		}
		name, ok := f.lookup(k)
		if !ok {
			continue
		}
		i, _ := slices.BinarySearch(keys, k)
		keys, names = slices.Insert(keys, i, k), slices.Insert(names, i, name)
	}
	return keys, names
}

// lookup returns the name k folds onto. A key that folding changes is
// compared with strings.EqualFold (simple folding too, the same relation)
// against a small set of names, which allocates nothing; against a large
// one its folding is looked up.
func (f *foldedNames) lookup(k string) (string, bool) {
	if len(f.exact) <= 16 && foldChanges(k) {
		for name := range f.exact {
			if strings.EqualFold(k, name) {
				return name, true
			}
		}
		return "", false
	}
	name, ok := f.fold[jsonx.FoldKey(k)]
	return name, ok
}

// foldChanges reports whether jsonx.FoldKey may return something else than
// k (and allocate): k has an ASCII capital or a non-ASCII byte.
func foldChanges(k string) bool {
	for i := 0; i < len(k); i++ {
		if b := k[i]; b >= 0x80 || b >= 'A' && b <= 'Z' {
			return true
		}
	}
	return false
}

// foldNode is what the parameter gate checks for case-folded keys at one
// place of an action's argument document: the declared properties of an
// object schema that accepts undeclared members (one that refuses them
// refuses the stray key anyway, as unknown), and the nodes below it.
type foldNode struct {
	names *foldedNames
	// props are the declared properties with a node below them, in name
	// order, so that violations come in a stable order.
	props []foldProp
	items *foldNode
}

type foldProp struct {
	name string
	node *foldNode
}

// newFoldNode returns the node of a parameter schema document, or nil when
// nothing at or below it can hold a stray key.
func newFoldNode(schema map[string]any) *foldNode {
	if schema == nil {
		return nil
	}
	n := &foldNode{}
	if props, ok := schema["properties"].(map[string]any); ok {
		if open, isBool := schema["additionalProperties"].(bool); !isBool || open {
			names := make([]string, 0, len(props))
			for name := range props {
				names = append(names, name)
			}
			n.names = newFoldedNames(names)
		}
		for name, p := range props {
			if sub := newFoldNode(asSchema(p)); sub != nil {
				n.props = append(n.props, foldProp{name: name, node: sub})
			}
		}
		slices.SortFunc(n.props, func(a, b foldProp) int { return strings.Compare(a.name, b.name) })
	}
	n.items = newFoldNode(asSchema(schema["items"]))
	if n.names == nil && n.props == nil && n.items == nil {
		return nil
	}
	return n
}

func asSchema(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// check appends to vs a violation for each stray key in v, at most max of
// them, and returns them with the count of the others. An object's own stray
// keys come first, in key order, then those below its declared members, in
// name order, then those of array items, in item order.
func (n *foldNode) check(v any, path string, vs []axerr.Violation, max, omitted int) ([]axerr.Violation, int) {
	switch t := v.(type) {
	case map[string]any:
		if n.names != nil {
			keys, names := n.names.strays(t)
			for i, k := range keys {
				if len(vs) >= max {
					omitted++
					continue
				}
				vs = append(vs, foldViolation(path+"/"+jsonx.EscapePointer(k), names[i]))
			}
		}
		for _, p := range n.props {
			if sub, ok := t[p.name]; ok {
				vs, omitted = p.node.check(sub, path+"/"+jsonx.EscapePointer(p.name), vs, max, omitted)
			}
		}
	case []any:
		if n.items != nil {
			for i, e := range t {
				vs, omitted = n.items.check(e, path+"/"+strconv.Itoa(i), vs, max, omitted)
			}
		}
	}
	return vs, omitted
}

// foldViolation is the violation of a stray key at path. The key is not
// repeated in the message (it is in the path, and a caller chooses its
// length); the declared name comes from the manifest.
func foldViolation(path, name string) axerr.Violation {
	return axerr.Violation{
		Path:    path,
		Message: "key differs from the declared " + strconv.Quote(name) + " only in letter case; a decoder that matches keys case-insensitively reads it as " + strconv.Quote(name),
		Keyword: KeywordAmbiguousKey,
		Code:    axerr.CodeInvalidArguments,
	}
}

// ambiguousKeyError is the refusal of arguments with stray keys.
func ambiguousKeyError(intent string, vs []axerr.Violation, omitted int) *axerr.Error {
	return axerr.AggregateOmitted(intent, vs, omitted).
		WithReason(reasons.AmbiguousKeys).
		WithSuggestion("Spell each argument exactly as the tool's inputSchema declares it: a key may not differ from a declared name only in letter case.")
}
