package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// suite is a policy test suite, read and checked against its manifest.
type suite struct {
	path         string // as given on the command line
	manifestPath string
	m            *manifest.Manifest
	options      suiteOptions
	// conditions are the suite's outcomes of the manifest's conditions.
	conditions map[string]conditionOutcome
	cases      []testCase
}

// suiteOptions are the enforcer options a suite sets.
type suiteOptions struct {
	allowUnknownParams bool
	allowUnbound       bool
}

// conditionOutcome is what a condition of the manifest gives in a test: a
// fixed outcome (holds), or a CEL expression evaluated by the gate.
type conditionOutcome struct {
	holds bool
	expr  string
	// at is where the suite gives the outcome, for a problem with it.
	at *yaml.Node
}

// testCase is one case: a call, or a sequence of calls sharing the state of
// one enforcer.
type testCase struct {
	name string
	line int
	// conditions are the suite's, with the case's overrides.
	conditions map[string]conditionOutcome
	steps      []testStep
	sequence   bool
}

// testStep is one call of a case and the outcome it expects.
type testStep struct {
	name           string // a sequence step's own name, if any
	principal      middleware.Principal
	tool           string
	args           json.RawMessage
	confirmation   bool
	approvals      []approvalGrant
	idempotencyKey string
	claimedTenant  string
	result         json.RawMessage
	expect         expectation
}

// approvalGrant is an approval token the runner mints for a call.
type approvalGrant struct {
	approver string
	roles    []string
}

// Outcomes a step may expect besides a refusal.
const (
	outcomeAllow    = "allow"
	outcomeReplayed = "replayed"
)

// expectation is a step's expected outcome: allow, replayed, or a refusal
// with its code and, when given, its reason, gate, violation paths and
// details.
type expectation struct {
	outcome    string // outcomeAllow, outcomeReplayed, or "" for a refusal
	code       axerr.Code
	reason     string
	gate       string
	violations []string // nil: not checked
	details    map[string]json.RawMessage
}

// The keys of the suite format, level by level.
var (
	suiteKeys     = []string{"manifest", "options", "conditions", "principals", "cases"}
	optionKeys    = []string{"allow_unknown_params", "allow_unbound_conditions"}
	principalKeys = []string{"sub", "tenant", "roles", "scope", "claims"}
	callKeys      = []string{"principal", "tool", "intent", "arguments", "arguments_json", "confirmation",
		"approvals", "idempotency_key", "claimed_tenant", "result", "expect"}
	caseKeys     = append([]string{"name", "conditions", "sequence"}, callKeys...)
	stepKeys     = append([]string{"name"}, callKeys...)
	approvalKeys = []string{"approver", "roles"}
	expectKeys   = []string{"code", "reason", "gate", "violations", "details"}
)

// slotOf groups the call keys that say the same thing in two ways: a step
// that names an intent replaces the tool its case named.
func slotOf(key string) string {
	switch key {
	case "intent":
		return "tool"
	case "arguments_json":
		return "arguments"
	}
	return key
}

// loadSuite reads a suite. manifestFlag, when set, replaces the manifest
// the suite names. It returns the problems that make the suite unusable,
// all of them, each with its place in the file.
func loadSuite(path, manifestFlag string) (*suite, []string) {
	d := &yamlDoc{file: path}
	s := &suite{path: path, conditions: map[string]conditionOutcome{}}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, []string{err.Error()}
	}
	root, ok := d.parseYAML(data)
	if !ok {
		return nil, d.report()
	}
	top := map[string]field{}
	for _, f := range d.fields(root, "", suiteKeys...) {
		top[f.key] = f
	}

	switch f, ok := top["manifest"]; {
	case manifestFlag != "":
		s.manifestPath = manifestFlag
	case ok:
		if p, ok := d.str(f.value, "manifest"); ok {
			s.manifestPath = p
			if !filepath.IsAbs(p) {
				s.manifestPath = filepath.Join(filepath.Dir(path), p)
			}
		}
	default:
		d.failf(root, "", "the suite names no manifest: add manifest: PATH (relative to the suite) or pass --manifest")
	}
	if s.manifestPath != "" {
		if s.m, err = manifest.LoadFile(s.manifestPath); err != nil {
			d.failf(nil, "manifest", "%v", err)
		}
	}

	if f, ok := top["options"]; ok {
		for _, o := range d.fields(f.value, "options", optionKeys...) {
			v, _ := d.boolean(o.value, "options."+o.key)
			switch o.key {
			case "allow_unknown_params":
				s.options.allowUnknownParams = v
			case "allow_unbound_conditions":
				s.options.allowUnbound = v
			}
		}
	}
	if f, ok := top["conditions"]; ok {
		s.conditions = d.conditions(f.value, "conditions", s.m)
	}
	principals := map[string]middleware.Principal{}
	if f, ok := top["principals"]; ok {
		for _, p := range d.fields(f.value, "principals", anyKey(f.value)...) {
			pr, _ := d.principal(p.value, "principals."+p.key, p.key)
			principals[p.key] = pr
		}
	}
	if s.m != nil {
		d.checkBound(s, top)
	}

	f, ok := top["cases"]
	if !ok {
		d.failf(root, "", "the suite has no cases: add cases: with at least one")
		return nil, d.report()
	}
	items, isList := d.list(f.value, "cases")
	if isList && len(items) == 0 {
		d.failf(f.value, "cases", "the suite has no cases")
	}
	names := map[string]int{}
	for i, item := range items {
		c := d.testCase(item, fmt.Sprintf("cases[%d]", i), s, principals)
		if c.name == "" {
			continue
		}
		if line, dup := names[c.name]; dup {
			d.failf(item, fmt.Sprintf("cases[%d]", i), "the name %q is taken by the case on line %d: each case needs a name of its own", c.name, line)
			continue
		}
		names[c.name] = c.line
		s.cases = append(s.cases, c)
	}
	if len(d.problems) > 0 {
		return nil, d.report()
	}
	return s, nil
}

// probe checks that a condition's expression compiles for every action
// that declares the condition, by building an enforcer with it alone (the
// other conditions left unbound).
func (d *yamlDoc) probe(at string, m *manifest.Manifest, name string, c conditionOutcome) {
	if m == nil {
		return
	}
	e, err := suiteEnforcer(m, suiteOptions{allowUnbound: true}, map[string]conditionOutcome{name: c}, nil)
	if err != nil {
		d.failf(c.at, at, "%s", strings.TrimPrefix(err.Error(), "axgate: "))
		return
	}
	e.Close()
}

// anyKey returns the keys of mapping n, for a mapping whose keys are names
// the suite chooses.
func anyKey(n *yaml.Node) []string {
	n = resolve(n)
	var keys []string
	if n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i < len(n.Content); i += 2 {
			keys = append(keys, resolve(n.Content[i]).Value)
		}
	}
	return keys
}

// conditionNames returns the names of m's preconditions and
// postconditions.
func conditionNames(m *manifest.Manifest) (pre, post map[string]bool) {
	pre, post = map[string]bool{}, map[string]bool{}
	for _, a := range m.Actions {
		for _, n := range a.Preconditions {
			pre[n] = true
		}
		for _, n := range a.Postconditions {
			post[n] = true
		}
	}
	return pre, post
}

// conditions reads a map of condition outcomes: true, false, or a CEL
// expression. m, when loaded, names the conditions there are.
func (d *yamlDoc) conditions(n *yaml.Node, at string, m *manifest.Manifest) map[string]conditionOutcome {
	out := map[string]conditionOutcome{}
	var known []string
	if m != nil {
		pre, post := conditionNames(m)
		known = slices.Sorted(maps.Keys(pre))
		for p := range post {
			if !pre[p] {
				known = append(known, p)
			}
		}
	}
	for _, f := range d.fields(n, at, anyKey(n)...) {
		if m != nil && !slices.Contains(known, f.key) {
			d.failf(f.keyAt, at, "the manifest has no condition %q%s", f.key, hint(f.key, known))
			continue
		}
		v, cat := resolve(f.value), fmt.Sprintf("%s[%q]", at, f.key)
		switch {
		case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool":
			b, _ := d.boolean(v, cat)
			out[f.key] = conditionOutcome{holds: b, at: v}
		case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" && strings.TrimSpace(v.Value) != "":
			out[f.key] = conditionOutcome{expr: v.Value, at: v}
			d.probe(cat, m, f.key, out[f.key])
		default:
			d.failf(v, cat, "want true, false or a CEL expression (a string), not %s", kindOf(v))
		}
	}
	return out
}

// checkBound reports the manifest's conditions that the suite gives no
// outcome, unless options.allow_unbound_conditions lets them pass unchecked.
func (d *yamlDoc) checkBound(s *suite, top map[string]field) {
	if s.options.allowUnbound {
		return
	}
	pre, post := conditionNames(s.m)
	var unbound []string
	for n := range pre {
		if _, ok := s.conditions[n]; !ok {
			unbound = append(unbound, n)
		}
	}
	for n := range post {
		if _, ok := s.conditions[n]; !ok && !pre[n] {
			unbound = append(unbound, n)
		}
	}
	if len(unbound) == 0 {
		return
	}
	slices.Sort(unbound)
	var at *yaml.Node
	if f, ok := top["conditions"]; ok {
		at = f.keyAt
	}
	quoted := make([]string, len(unbound))
	for i, n := range unbound {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	what := "condition " + quoted[0] + " has"
	if len(quoted) > 1 {
		what = "conditions " + strings.Join(quoted, ", ") + " have"
	}
	d.failf(at, "conditions", "the manifest's %s no outcome in the suite: give each one under conditions: "+
		"(true, false or a CEL expression), or set options.allow_unbound_conditions: true to let them pass unchecked", what)
}

// principal reads a principal: {sub, tenant, roles, scope, claims}, each
// optional ({} is the anonymous caller). name, for a principal of the
// suite's principals:, is its sub unless it says otherwise.
func (d *yamlDoc) principal(n *yaml.Node, at, name string) (middleware.Principal, bool) {
	p := middleware.Principal{ID: name, Claims: map[string]any{}}
	ok := true
	for _, f := range d.fields(n, at, principalKeys...) {
		good := true
		switch f.key {
		case "sub":
			p.ID, good = d.str(f.value, at+".sub")
		case "tenant":
			p.Tenant, good = d.str(f.value, at+".tenant")
		case "roles":
			p.Roles, good = d.strings(f.value, at+".roles")
		case "scope":
			// A string is the claim as a token carries it, space-separated.
			if v := resolve(f.value); v.Kind == yaml.ScalarNode {
				var s string
				s, good = d.str(v, at+".scope")
				p.Scopes = append([]string{}, strings.Fields(s)...)
			} else {
				p.Scopes, good = d.strings(v, at+".scope")
			}
		case "claims":
			raw, g := d.toJSON(f.value, at+".claims")
			good = g && d.claims(f.value, raw, at+".claims", p.Claims)
		}
		ok = ok && good
	}
	if p.ID != "" {
		p.Claims["sub"] = p.ID
	}
	if p.Tenant != "" {
		p.Claims["tenant"] = p.Tenant
	}
	if p.Roles != nil {
		roles := make([]any, len(p.Roles))
		for i, r := range p.Roles {
			roles[i] = r
		}
		p.Claims["roles"] = roles
	}
	if p.Scopes != nil {
		p.Claims["scope"] = strings.Join(p.Scopes, " ")
	}
	return p, ok
}

// claims adds a principal's further claims to into, as a JSON decoder
// gives them (what a bearer token's claims look like to the gates).
func (d *yamlDoc) claims(n *yaml.Node, raw json.RawMessage, at string, into map[string]any) bool {
	var extra map[string]any
	if err := json.Unmarshal(raw, &extra); err != nil || extra == nil {
		d.failf(n, at, "want a mapping of claims")
		return false
	}
	for k, v := range extra {
		if slices.Contains(principalKeys, k) {
			d.failf(n, at, "the claim %q is set by the principal's own key %s:", k, k)
			return false
		}
		into[k] = v
	}
	return true
}

// testCase reads one case.
func (d *yamlDoc) testCase(n *yaml.Node, at string, s *suite, principals map[string]middleware.Principal) testCase {
	c := testCase{line: resolve(n).Line, conditions: maps.Clone(s.conditions)}
	if name := nameOf(n); name != "" {
		at = fmt.Sprintf("%s %q", at, name)
	}
	call := map[string]field{}
	var seq *field
	for _, f := range d.fields(n, at, caseKeys...) {
		switch f.key {
		case "name":
			c.name, _ = d.str(f.value, at+".name")
		case "conditions":
			maps.Copy(c.conditions, d.conditions(f.value, at+".conditions", s.m))
		case "sequence":
			seq = &f
		default:
			d.setSlot(call, f, at)
		}
	}
	if c.name == "" && resolve(n).Kind == yaml.MappingNode {
		d.failf(n, at, "the case has no name: add name: followed by what it shows")
	}
	if seq == nil {
		st := d.step(call, n, at, s, principals)
		c.steps = []testStep{st}
	} else {
		c.sequence = true
		items, _ := d.list(seq.value, at+".sequence")
		if len(items) == 0 && resolve(seq.value).Kind == yaml.SequenceNode {
			d.failf(seq.value, at+".sequence", "the sequence has no steps")
		}
		for i, item := range items {
			sat := fmt.Sprintf("%s.sequence[%d]", at, i)
			merged := maps.Clone(call)
			own := map[string]field{}
			var name string
			for _, f := range d.fields(item, sat, stepKeys...) {
				if f.key == "name" {
					name, _ = d.str(f.value, sat+".name")
					continue
				}
				d.setSlot(own, f, sat)
			}
			maps.Copy(merged, own)
			st := d.step(merged, item, sat, s, principals)
			st.name = name
			c.steps = append(c.steps, st)
		}
	}
	return c
}

// setSlot records a call key in its slot; two keys of one slot in one
// mapping (tool and intent) are a problem.
func (d *yamlDoc) setSlot(slots map[string]field, f field, at string) {
	slot := slotOf(f.key)
	if other, taken := slots[slot]; taken {
		d.failf(f.keyAt, at, "give %s or %s, not both", other.key, f.key)
		return
	}
	slots[slot] = f
}

// nameOf returns the name: of a case, if it has a plain one, to name the
// case in its problems.
func nameOf(n *yaml.Node) string {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := resolve(n.Content[i]), resolve(n.Content[i+1]); k.Value == "name" && v != nil && v.Kind == yaml.ScalarNode {
			return v.Value
		}
	}
	return ""
}

// step reads the call of a case or of a sequence step from its keys (a
// step's keys over its case's). n is the case or step, for the place of a
// missing key.
func (d *yamlDoc) step(keys map[string]field, n *yaml.Node, at string, s *suite, principals map[string]middleware.Principal) testStep {
	st := testStep{args: json.RawMessage("{}")}
	need := func(slot, what string) (field, bool) {
		f, ok := keys[slot]
		if !ok {
			d.failf(n, at, "%s", what)
		}
		return f, ok
	}
	if f, ok := need("expect", "the call expects nothing: add expect: allow, replayed, or an AXAG code"); ok {
		st.expect = d.expectation(f.value, at+".expect", s.m)
	}
	if f, ok := need("principal", "the call has no principal: add principal: NAME (of principals:) or {sub, tenant, roles, scope} ({} calls anonymously)"); ok {
		st.principal = d.principalRef(f.value, at+".principal", principals)
	}
	var action *manifest.Action
	if f, ok := need("tool", "the call names no tool: add tool: NAME or intent: INTENT"); ok {
		action = d.tool(f, at, s.m, &st)
	}
	if f, ok := keys["arguments"]; ok {
		if f.key == "arguments_json" {
			if raw, ok := d.str(f.value, at+".arguments_json"); ok {
				st.args = json.RawMessage(raw)
			}
		} else if raw, ok := d.toJSON(f.value, at+".arguments"); ok {
			st.args = raw
		}
	}
	if f, ok := keys["result"]; ok {
		st.result, _ = d.toJSON(f.value, at+".result")
	}
	if f, ok := keys["idempotency_key"]; ok {
		st.idempotencyKey, _ = d.str(f.value, at+".idempotency_key")
	}
	if f, ok := keys["claimed_tenant"]; ok {
		st.claimedTenant, _ = d.str(f.value, at+".claimed_tenant")
	}
	if f, ok := keys["confirmation"]; ok {
		st.confirmation, _ = d.boolean(f.value, at+".confirmation")
		if st.confirmation && action == nil && s.m != nil {
			d.failf(f.keyAt, at, "a confirmation token is minted for an action of the manifest; this call names none")
		}
	}
	if f, ok := keys["approvals"]; ok {
		items, _ := d.list(f.value, at+".approvals")
		for i, item := range items {
			st.approvals = append(st.approvals, d.approval(item, fmt.Sprintf("%s.approvals[%d]", at, i), principals))
		}
		if len(items) > 0 && action == nil && s.m != nil {
			d.failf(f.keyAt, at, "approval tokens are minted for an action of the manifest; this call names none")
		}
	}
	return st
}

// tool resolves the call's tool (tool: NAME) or intent (intent: INTENT)
// and returns its action; an unknown tool is a problem unless the call
// expects AXAG_INTENT_NOT_FOUND.
func (d *yamlDoc) tool(f field, at string, m *manifest.Manifest, st *testStep) *manifest.Action {
	name, ok := d.str(f.value, at+"."+f.key)
	if !ok || m == nil {
		return nil
	}
	if f.key == "intent" {
		var intents []string
		for _, a := range m.Actions {
			if a.Intent == name {
				st.tool = a.ToolName()
				return a
			}
			intents = append(intents, a.Intent)
		}
		d.failf(f.value, at+".intent", "the manifest has no intent %q%s", name, hint(name, intents))
		return nil
	}
	st.tool = name
	if a := m.Tool(name); a != nil {
		return a
	}
	if st.expect.code != axerr.CodeIntentNotFound {
		var tools []string
		for _, a := range m.Actions {
			tools = append(tools, a.ToolName())
		}
		d.failf(f.value, at+".tool", "the manifest has no tool %q%s (a case about an unknown tool expects %s)",
			name, hint(name, tools), axerr.CodeIntentNotFound)
	}
	return nil
}

// principalRef reads a case's principal: the name of one of the suite's
// principals, or one written in place.
func (d *yamlDoc) principalRef(n *yaml.Node, at string, principals map[string]middleware.Principal) middleware.Principal {
	if v := resolve(n); v != nil && v.Kind == yaml.ScalarNode {
		name, ok := d.str(v, at)
		if !ok {
			return middleware.Principal{}
		}
		p, found := principals[name]
		if !found {
			d.failf(v, at, "no principal %q in principals:%s", name, hint(name, slices.Sorted(maps.Keys(principals))))
		}
		return p
	}
	p, _ := d.principal(n, at, "")
	return p
}

// approval reads one approval: {approver, roles}. An approver that names
// one of the suite's principals is that principal (sub and roles; roles:
// replaces its roles); any other approver needs roles:.
func (d *yamlDoc) approval(n *yaml.Node, at string, principals map[string]middleware.Principal) approvalGrant {
	var (
		g        approvalGrant
		hasRoles bool
	)
	var approverAt *yaml.Node
	for _, f := range d.fields(n, at, approvalKeys...) {
		switch f.key {
		case "approver":
			g.approver, _ = d.str(f.value, at+".approver")
			approverAt = f.value
		case "roles":
			g.roles, _ = d.strings(f.value, at+".roles")
			hasRoles = true
		}
	}
	if approverAt == nil {
		if resolve(n).Kind == yaml.MappingNode {
			d.failf(n, at, "the approval names no approver: add approver: NAME")
		}
		return g
	}
	if p, ok := principals[g.approver]; ok {
		g.approver = p.ID
		if !hasRoles {
			g.roles = p.Roles
		}
	} else if !hasRoles {
		d.failf(approverAt, at, "the approver %q is none of principals:; give the approver's roles: too", g.approver)
	}
	return g
}

// expectation reads expect: allow, replayed, a code, or {code, reason,
// gate, violations, details}.
func (d *yamlDoc) expectation(n *yaml.Node, at string, m *manifest.Manifest) expectation {
	var x expectation
	if v := resolve(n); v != nil && v.Kind == yaml.ScalarNode {
		s, ok := d.str(v, at)
		switch {
		case !ok:
		case s == outcomeAllow || s == outcomeReplayed:
			x.outcome = s
		default:
			x.code = d.code(v, at, s)
		}
		return x
	}
	hasCode := false
	for _, f := range d.fields(n, at, expectKeys...) {
		fat := at + "." + f.key
		switch f.key {
		case "code":
			if s, ok := d.str(f.value, fat); ok {
				x.code = d.code(f.value, fat, s)
			}
			hasCode = true
		case "reason":
			x.reason, _ = d.str(f.value, fat)
		case "gate":
			x.gate, _ = d.str(f.value, fat)
		case "violations":
			x.violations, _ = d.strings(f.value, fat)
		case "details":
			x.details = map[string]json.RawMessage{}
			for _, df := range d.fields(f.value, fat, anyKey(f.value)...) {
				if raw, ok := d.toJSON(df.value, fat+"."+df.key); ok {
					x.details[df.key] = raw
				}
			}
		}
	}
	if !hasCode && resolve(n).Kind == yaml.MappingNode {
		d.failf(n, at, "a refusal is expected by its code: add code: (or write expect: allow)")
	}
	return x
}

// code checks an AXAG code.
func (d *yamlDoc) code(n *yaml.Node, at, s string) axerr.Code {
	codes := axerr.Codes()
	if slices.Contains(codes, axerr.Code(s)) {
		return axerr.Code(s)
	}
	names := make([]string, len(codes))
	for i, c := range codes {
		names[i] = string(c)
	}
	h := hint(s, names)
	if h == "" {
		h = " (docs/errors.md lists the codes)"
	}
	d.failf(n, at, "%q is not allow, replayed or an AXAG code%s", s, h)
	return ""
}
