package manifest

import "fmt"

// ForUpstream returns the manifest of one upstream of a gateway with
// several: the actions, resources and prompts of m whose Upstream is name,
// in document order, and m's other fields. It shares m's entries, which
// neither may change.
func (m *Manifest) ForUpstream(name string) *Manifest {
	out := &Manifest{Version: m.Version, GeneratedAt: m.GeneratedAt, Conformance: m.Conformance,
		Source: m.Source, Metadata: m.Metadata, Form: m.Form}
	for _, a := range m.Actions {
		if a.Upstream == name {
			out.Actions = append(out.Actions, a)
		}
	}
	for _, r := range m.Resources {
		if r.Action.Upstream == name {
			out.Resources = append(out.Resources, r)
		}
	}
	for _, p := range m.Prompts {
		if p.Action.Upstream == name {
			out.Prompts = append(out.Prompts, p)
		}
	}
	out.index()
	return out
}

// Union returns one manifest holding the entries of every one of ms.
//
// It holds their actions, resources and prompts, in order: the manifest of
// what several upstreams serve together (the pages where people decide on
// any of their calls). It fails when two declare the same intent. A tool
// name two actions share is ambiguous: Tool does not return either.
func Union(ms ...*Manifest) (*Manifest, error) {
	out := &Manifest{Form: FormV1}
	if len(ms) > 0 {
		f := ms[0]
		out.Version, out.GeneratedAt, out.Conformance, out.Source, out.Metadata, out.Form =
			f.Version, f.GeneratedAt, f.Conformance, f.Source, f.Metadata, f.Form
	}
	intents := map[string]bool{}
	tools := map[string]int{}
	for _, m := range ms {
		for _, a := range m.Checked() {
			if intents[a.Intent] {
				return nil, fmt.Errorf("manifest: the intent %q is declared twice", a.Intent)
			}
			intents[a.Intent] = true
		}
		for _, a := range m.Actions {
			tools[a.toolName]++
		}
		out.Actions = append(out.Actions, m.Actions...)
		out.Resources = append(out.Resources, m.Resources...)
		out.Prompts = append(out.Prompts, m.Prompts...)
	}
	out.index()
	for name, n := range tools {
		if n > 1 {
			delete(out.byTool, name)
		}
	}
	return out, nil
}

// index makes the lookups by intent and tool name of a manifest whose
// entries were checked already.
func (m *Manifest) index() {
	m.byIntent = make(map[string]*Action, len(m.Actions))
	m.byTool = make(map[string]*Action, len(m.Actions))
	for _, a := range m.Actions {
		if a.Intent == "" {
			continue
		}
		if _, dup := m.byIntent[a.Intent]; !dup {
			m.byIntent[a.Intent] = a
		}
		if _, dup := m.byTool[a.toolName]; !dup {
			m.byTool[a.toolName] = a
		}
	}
}
