package manifest

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/axgate/axgate/internal/jsonx"
)

// Severity says whether a finding fails the manifest.
type Severity string

// Severities. An error fails the manifest (status FAIL, grade F); a warning
// does not.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Finding is one thing Lint found: which rule, where (a JSON Pointer into the
// document), what is wrong and how to fix it.
type Finding struct {
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	// Path is a JSON Pointer into the manifest document; "" is the document.
	Path    string `json:"path"`
	Message string `json:"message"`
	// Fix suggests a change that resolves the finding.
	Fix string `json:"fix"`
}

func (f Finding) String() string {
	return fmt.Sprintf("%s %s %s: %s", f.Severity, f.Rule, f.Path, f.Message)
}

// Level is an AXAG conformance level.
type Level string

// The conformance levels, in increasing order of what they require.
const (
	LevelBasic        Level = "basic"
	LevelIntermediate Level = "intermediate"
	LevelFull         Level = "full"
)

// ParseLevel reads basic, intermediate or full.
func ParseLevel(s string) (Level, error) {
	switch l := Level(s); l {
	case LevelBasic, LevelIntermediate, LevelFull:
		return l, nil
	}
	return "", fmt.Errorf("unknown conformance level %q (want basic, intermediate or full)", s)
}

func (l Level) rank() int {
	switch l {
	case LevelIntermediate:
		return 1
	case LevelFull:
		return 2
	}
	return 0
}

// Rule describes one lint rule.
type Rule struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Title    string   `json:"title"`
}

// Rule identifiers. The AXAG-LINT ids are those of the AXAG annotation linter
// (axag-lint), applied to what a manifest declares; the AXGATE ids cover what
// that linter does not check in a manifest.
const (
	RuleParse              = "AXGATE-PARSE"
	RuleSchema             = "AXGATE-SCHEMA"
	RuleSemantic           = "AXGATE-SEMANTIC"
	RuleActionType         = "AXAG-LINT-004"
	RuleRiskLevel          = "AXAG-LINT-005"
	RuleRiskConfirmation   = "AXAG-LINT-006"
	RuleMutationIdempotent = "AXAG-LINT-007"
	RuleParamOverlap       = "AXAG-LINT-008"
	RuleScopeMissing       = "AXAG-LINT-011"
	RuleApprovalRoles      = "AXAG-LINT-012"
	RuleLevelField         = "AXGATE-LEVEL-001"
	RuleLevelUndeclared    = "AXGATE-LEVEL-002"
	RulePrecondUnproduced  = "AXGATE-PRECOND-001"
	RulePrecondCycle       = "AXGATE-PRECOND-002"
	RuleConstraintOptional = "AXGATE-CEL-001"
	RuleConstraintCost     = "AXGATE-CEL-002"
)

// Rules lists every rule Lint applies, in the order of docs/cli.md's table.
var Rules = []Rule{
	{RuleParse, SeverityError, "the document is not well-formed JSON or YAML, or repeats a key"},
	{RuleSchema, SeverityError, "the document does not match the manifest schema (missing or unknown field, wrong type, bad pattern)"},
	{RuleSemantic, SeverityError, "a field is inconsistent or malformed beyond the schema (duplicate intent, rate_limit syntax, min above max, …)"},
	{RuleActionType, SeverityError, "invalid action_type value"},
	{RuleRiskLevel, SeverityError, "invalid risk_level value"},
	{RuleRiskConfirmation, SeverityWarning, "high or critical risk without confirmation_required"},
	{RuleMutationIdempotent, SeverityWarning, "write or delete action without an idempotent declaration"},
	{RuleParamOverlap, SeverityError, "parameter in both the required and the optional list"},
	{RuleScopeMissing, SeverityWarning, "role-based or tenant-sensitive action without scope"},
	{RuleApprovalRoles, SeverityError, "approval_required without approval_roles"},
	{RuleLevelField, SeverityError, "a field the conformance level requires is missing"},
	{RuleLevelUndeclared, SeverityWarning, "the manifest does not declare its conformance level"},
	{RulePrecondUnproduced, SeverityWarning, "a precondition no action's postconditions produce: the host must check it"},
	{RulePrecondCycle, SeverityError, "actions' preconditions and postconditions depend on each other in a cycle"},
	{RuleConstraintOptional, SeverityWarning, "a constraint reads an optional argument outside has(): calls without it are refused"},
	{RuleConstraintCost, SeverityError, "a constraint does not compile, or its estimated worst-case cost exceeds the cost limit (with LintOptions.Expressions)"},
}

// LintOptions configure Lint.
type LintOptions struct {
	// Level is the conformance level to check. Empty means the level the
	// manifest declares, or basic when it declares none.
	Level Level
	// Source names the document (a file name); a .yaml or .yml name is read
	// as YAML, anything else is detected from the content.
	Source string
	// Expressions, when set, checks the constraints of a manifest that
	// loads in the enforcer's CEL environment, which this package does not
	// have: axgate lint compiles each one and reports, as
	// RuleConstraintCost errors, those that do not compile or whose
	// estimated worst-case cost exceeds the cost limit (New refuses them).
	// axgate lint sets it.
	Expressions func(m *Manifest) []Finding
}

// ActionStatus is one action as Lint saw it.
type ActionStatus struct {
	// Intent is the action's intent, or its pointer when it has none.
	Intent string `json:"intent"`
	// Pointer is the action's JSON Pointer in the document.
	Pointer string `json:"pointer"`
	// Failing is true when an error finding lies inside the action.
	Failing bool `json:"failing"`
}

// LintResult is what Lint found in one manifest.
type LintResult struct {
	// Source names the document.
	Source string
	// Level is the conformance level that was checked.
	Level Level
	// DeclaredLevel is the level the manifest declares, if any.
	DeclaredLevel Level
	// Findings are sorted by path, errors before warnings at one path.
	Findings []Finding
	// Manifest is the loaded manifest, or nil when it does not load.
	Manifest *Manifest
	// Actions in document order.
	Actions []ActionStatus
	// Quality is the deterministic quality score.
	Quality Quality

	doc       any
	sourceURL string
	tool      string
}

// Errors returns the findings of severity error.
func (r *LintResult) Errors() []Finding { return r.bySeverity(SeverityError) }

// Warnings returns the findings of severity warning.
func (r *LintResult) Warnings() []Finding { return r.bySeverity(SeverityWarning) }

func (r *LintResult) bySeverity(s Severity) []Finding {
	out := []Finding{}
	for _, f := range r.Findings {
		if f.Severity == s {
			out = append(out, f)
		}
	}
	return out
}

// Passed reports whether no finding is an error.
func (r *LintResult) Passed() bool { return len(r.Errors()) == 0 }

// LintFile lints a manifest file. The error is for a file that cannot be
// read; everything wrong with its content is a finding.
func LintFile(name string, opts LintOptions) (*LintResult, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readLimited(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if opts.Source == "" {
		opts.Source = name
	}
	return Lint(data, opts), nil
}

// Lint checks a manifest document deterministically.
//
// It checks structure and semantics (every problem Parse reports), the AXAG
// lint rules as they apply to a manifest, the fields the conformance level
// requires, and the graph of preconditions and postconditions. It never
// fails: whatever is wrong with the document is a finding. Rules lists the
// rule ids.
func Lint(data []byte, opts LintOptions) *LintResult {
	r := &LintResult{Source: opts.Source}
	format := formatFor(opts.Source)
	m, err := parse(data, opts.Source, format)
	var problems []Problem
	if err != nil {
		if me, ok := err.(*Error); ok {
			problems = me.Problems
		} else {
			problems = []Problem{{Message: err.Error(), Keyword: "json"}}
		}
	}
	r.doc, _ = decodeDocument(data, format)
	root, _ := r.doc.(map[string]any)
	if m == nil && root != nil {
		m = bestEffort(root)
	}
	if err == nil {
		r.Manifest = m
	}
	if root != nil {
		if s, ok := root["conformance"].(string); ok {
			if l, err := ParseLevel(s); err == nil {
				r.DeclaredLevel = l
			}
		}
		if src, ok := root["source"].(map[string]any); ok {
			r.sourceURL, r.tool = str(src, "url"), str(src, "tool")
		}
	}
	r.Level = opts.Level
	if r.Level == "" {
		r.Level = r.DeclaredLevel
	}
	if r.Level == "" {
		r.Level = LevelBasic
	}

	l := &linter{doc: r.doc, seen: map[string]bool{}}
	for _, p := range problems {
		l.addProblem(p)
	}
	if m != nil && root != nil {
		l.manifestLevel(root, r)
		if opts.Expressions != nil && err == nil {
			// Before the warnings: one finding per path, and a constraint
			// New refuses is an error first.
			for _, f := range opts.Expressions(m) {
				l.add(f.Rule, f.Severity, f.Path, f.Fix, "%s", f.Message)
			}
		}
		for _, a := range m.Actions {
			raw, _ := jsonx.Resolve(r.doc, a.Pointer)
			am, _ := raw.(map[string]any)
			if am == nil {
				continue
			}
			// Level first: where the level requires a field, its error
			// stands for the lint rule's warning at the same path.
			l.level(a, am, r.Level, m.Form)
			l.safety(a, am)
			l.constraints(a)
		}
		l.preconditions(m)
		r.Quality = score(m)
	}
	sortFindings(l.findings)
	r.Findings = l.findings
	r.Actions = actionStatuses(r.doc, r.Findings)
	return r
}

// bestEffort builds the model of a document that failed to load, so that the
// lint rules and the score still say something useful about it. A panic here
// would be a defect in the builder on malformed input; lint then reports
// what the loader found and nothing more.
func bestEffort(root map[string]any) (m *Manifest) {
	defer func() {
		if recover() != nil {
			m = nil
		}
	}()
	m, _ = build(root)
	return m
}

type linter struct {
	doc      any
	findings []Finding
	// seen holds rule+path of every finding, so that one fault found by the
	// loader and by a rule is reported once.
	seen map[string]bool
}

func (l *linter) add(rule string, sev Severity, path, fix, format string, args ...any) {
	// A rule's finding repeats what any finding already at its path says
	// (the loader's "expected boolean" at /actions/0/idempotent makes
	// "does not say whether it is idempotent" noise), and one rule reports
	// one path once.
	if l.seen[path] || l.seen[rule+"\x00"+path] {
		return
	}
	l.seen[rule+"\x00"+path] = true
	l.seen[path] = true
	l.findings = append(l.findings, Finding{Rule: rule, Severity: sev, Path: path, Message: fmt.Sprintf(format, args...), Fix: fix})
}

// addLoaded records a loader problem; several may share a path.
func (l *linter) addLoaded(rule, path, fix, msg string) {
	l.seen[path] = true
	l.findings = append(l.findings, Finding{Rule: rule, Severity: SeverityError, Path: path, Message: msg, Fix: fix})
}

var (
	actionTypes = "read, write, delete or navigate"
	riskLevels  = "none, low, medium, high or critical"
)

// addProblem turns a loader problem into a finding with a rule and a fix.
func (l *linter) addProblem(p Problem) {
	field := lastToken(p.Path)
	rule, fix := RuleSchema, "correct the value so that it matches the manifest schema"
	switch p.Keyword {
	case "json", "yaml":
		rule, fix = RuleParse, "fix the document so that it is well-formed JSON (or YAML)"
	case "duplicate":
		rule, fix = RuleParse, "keep one of the repeated keys and delete the other"
	case "required":
		fix = fmt.Sprintf("add the field %q", field)
	case "additionalProperties":
		fix = fmt.Sprintf("remove the field %q or correct its spelling", field)
		if m := didYouMeanRE.FindStringSubmatch(p.Message); m != nil {
			fix = fmt.Sprintf("rename %q to %q", field, m[1])
		}
	case "enum":
		switch field {
		case "action_type":
			rule, fix = RuleActionType, "use one of "+actionTypes
		case "risk_level":
			rule, fix = RuleRiskLevel, "use one of "+riskLevels
		case "scope":
			fix = "use one of user, tenant or global"
		default:
			fix = "use one of the values the schema allows"
		}
	case "type":
		if p.Message != "" && strings.Contains(p.Message, "apply to") {
			rule, fix = RuleSemantic, "drop the constraints that do not apply to the parameter's type, or change its type"
		} else {
			fix = "give the field the type the schema expects"
		}
	case "pattern":
		switch {
		case field == "intent":
			fix = "write the intent as entity.verb in lowercase, e.g. product.search"
		case field == "entity" || field == "name":
			fix = "use a lowercase name of letters, digits and underscores"
		case field == "version":
			fix = "use a semantic version such as 1.0.0"
		case field == "pattern":
			rule, fix = RuleSemantic, "write a regular expression Go's regexp (RE2) accepts"
		case field == "upstream_sha256":
			fix = "write the pin as 64 lowercase hex digits, as axgate manifest init drafts it, or remove it"
		default:
			fix = "make the value match the pattern the schema requires"
		}
	case "format":
		fix = "use a valid value for the format"
		if strings.HasPrefix(p.Message, "unknown format") {
			rule, fix = RuleSemantic, "use one of the formats email, url, uri, date, datetime, date-time, time, uuid, ipv4, ipv6 or hostname"
		}
	case "disjoint":
		rule, fix = RuleParamOverlap, "declare the parameter in one list only: required_parameters or optional_parameters"
	case "approval_roles":
		rule, fix = RuleApprovalRoles, "list the roles that may approve in approval_roles, or set approval_required to false"
	case "unique":
		rule, fix = RuleSemantic, "give each action its own intent and tool name (operation_id)"
		if field == "name" {
			fix = "declare each parameter once"
		}
	case "approval_count":
		rule, fix = RuleSemantic, "set approval_required to true, or remove approval_count"
	case "rate_limit":
		rule, fix = RuleSemantic, `write the rate limit as N/second, N/minute, N/hour or N/day with N ≥ 1, e.g. "10/minute"`
	case "cooldown":
		rule, fix = RuleSemantic, `write the cooldown as a positive duration such as "30s", "5m" or "1h"`
	case "confirmation_message":
		rule, fix = RuleSemantic, "refer only to declared parameters in {{…}} placeholders, or declare the parameter"
	case "output_schema":
		rule, fix = RuleSemantic, "make output_schema a valid JSON Schema (draft-07)"
	case "parameters":
		rule, fix = RuleSemantic, "correct the parameter definitions so that they compile to a JSON Schema"
	case "entity":
		rule, fix = RuleSemantic, "remove the action's entity or make it match the enclosing entity's name"
	case "minimum", "maximum", "min", "max", "maxLength", "minLength":
		fix = "correct the bound"
		if strings.Contains(p.Message, " is below ") {
			rule, fix = RuleSemantic, "make the lower bound no larger than the upper bound"
		}
	case "items", "properties":
		rule, fix = RuleSemantic, "use items only on arrays and properties only on objects"
	}
	l.addLoaded(rule, p.Path, fix, p.Message)
}

var didYouMeanRE = regexp.MustCompile(`did you mean "([^"]+)"\?`)

func lastToken(ptr string) string {
	if i := strings.LastIndexByte(ptr, '/'); i >= 0 {
		return jsonx.UnescapePointer(ptr[i+1:])
	}
	return ptr
}

// tenantParams are argument names that pick a tenant.
var tenantParams = map[string]bool{
	"tenant": true, "tenant_id": true, "org": true, "org_id": true, "organization_id": true, "workspace_id": true,
}

// tenantEntities are entities that belong to a tenant rather than a user.
var tenantEntities = map[string]bool{
	"organization": true, "company": true, "department": true, "team": true, "tenant": true,
	"workspace": true, "billing": true, "subscription": true, "invoice": true,
}

// safety applies the AXAG lint rules about safety declarations.
func (l *linter) safety(a *Action, am map[string]any) {
	ptr := a.Pointer
	if a.RiskLevel.AtLeast(RiskHigh) && !a.ConfirmationRequired {
		l.add(RuleRiskConfirmation, SeverityWarning, ptr+"/confirmation_required",
			"set confirmation_required to true so that a person confirms each call (and write a confirmation_message)",
			"risk_level is %s but confirmation_required is not true: an agent could run it without a person confirming", a.RiskLevel)
	}
	if (a.Type == Write || a.Type == Delete) && a.Idempotent == nil {
		l.add(RuleMutationIdempotent, SeverityWarning, ptr+"/idempotent",
			"declare idempotent: true if repeating the call with the same arguments has no further effect, else false",
			"%s action does not say whether it is idempotent: agents cannot tell whether a retry is safe", a.Type)
	}
	if _, ok := am["scope"]; !ok {
		if why := tenantSensitive(a, am); why != "" {
			l.add(RuleScopeMissing, SeverityWarning, ptr+"/scope",
				"declare scope: user, tenant or global, so that the gateway knows whose data the action may touch",
				"the action is %s but declares no scope", why)
		}
	}
}

// tenantSensitive says why an action needs a scope, or "".
func tenantSensitive(a *Action, am map[string]any) string {
	switch {
	case len(a.RequiredRoles) > 0:
		return "role-based (required_roles)"
	case len(a.ApprovalRoles) > 0:
		return "role-based (approval_roles)"
	case am["tenant_boundary"] != nil || am["cross_tenant"] != nil:
		return "tenant-sensitive (it declares a tenant boundary)"
	case tenantEntities[a.Entity]:
		return fmt.Sprintf("tenant-sensitive (entity %q belongs to a tenant)", a.Entity)
	}
	for _, p := range a.Parameters {
		if tenantParams[p.Name] {
			return fmt.Sprintf("tenant-sensitive (parameter %q names a tenant)", p.Name)
		}
	}
	return ""
}

// manifestLevel checks the document-level fields the level requires.
func (l *linter) manifestLevel(root map[string]any, r *LintResult) {
	need := []string{}
	if r.Level.rank() >= LevelIntermediate.rank() {
		need = append(need, "conformance", "generated_at")
	}
	if r.Level.rank() >= LevelFull.rank() {
		need = append(need, "source")
	}
	for _, f := range need {
		if _, ok := root[f]; !ok {
			l.add(RuleLevelField, SeverityError, "/"+f, levelFix(f),
				"conformance level %s requires %q", r.Level, f)
		}
	}
	if _, ok := root["conformance"]; !ok {
		// At basic level an undeclared level is only worth a warning.
		l.add(RuleLevelUndeclared, SeverityWarning, "/conformance",
			`declare the level the manifest meets, e.g. "conformance": "`+string(r.Level)+`"`,
			"the manifest does not declare its conformance level; checked as %s", r.Level)
	}
}

// level checks the action fields the conformance level requires.
func (l *linter) level(a *Action, am map[string]any, lvl Level, form Form) {
	need := []string{"intent", "action_type"}
	if form == FormV1 {
		need = append(need, "entity")
	}
	if lvl.rank() >= LevelIntermediate.rank() {
		need = append(need, "description", "risk_level", "scope")
		if form == FormV1 {
			if am["required_parameters"] == nil && am["optional_parameters"] == nil {
				need = append(need, "required_parameters")
			}
		} else {
			need = append(need, "parameters")
		}
	}
	if lvl.rank() >= LevelFull.rank() {
		need = append(need, "idempotent")
		if a.Type == Write || a.Type == Delete {
			need = append(need, "side_effects")
		}
		if a.RiskLevel.AtLeast(RiskHigh) {
			need = append(need, "confirmation_required")
		}
	}
	for _, f := range need {
		v, ok := am[f]
		if s, isStr := v.(string); ok && (!isStr || strings.TrimSpace(s) != "") {
			continue
		}
		why := ""
		switch f {
		case "side_effects":
			why = fmt.Sprintf(" of a %s action", a.Type)
		case "confirmation_required":
			why = fmt.Sprintf(" of an action of %s risk", a.RiskLevel)
		}
		l.add(RuleLevelField, SeverityError, a.Pointer+"/"+f, levelFix(f),
			"conformance level %s requires %q%s", lvl, f, why)
	}
}

func levelFix(field string) string {
	switch field {
	case "description":
		return "describe what the action does and to what, in a sentence an agent can act on"
	case "risk_level":
		return "declare risk_level: " + riskLevels
	case "scope":
		return "declare scope: user, tenant or global"
	case "required_parameters":
		return "declare required_parameters (an empty list if the action takes no arguments)"
	case "parameters":
		return "declare parameters (an empty object if the action takes no arguments)"
	case "idempotent":
		return "declare idempotent: true if repeating the call with the same arguments has no further effect, else false"
	case "side_effects":
		return "list the side effects (an empty list if there are none)"
	case "confirmation_required":
		return "declare confirmation_required (true for an action of high or critical risk)"
	case "conformance":
		return `declare the conformance level: "basic", "intermediate" or "full"`
	case "generated_at":
		return "add generated_at: the RFC 3339 time the manifest was generated"
	case "source":
		return "add source: the url, tool and tool_version that produced the manifest"
	}
	return fmt.Sprintf("add the field %q", field)
}

// conditionKey normalizes a condition for matching: case and runs of
// white space do not matter.
func conditionKey(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// preconditions checks the precondition graph. An action depends on the
// actions whose postconditions produce one of its preconditions. A
// precondition nobody produces is the host's to check (a warning); a cycle
// of dependencies means none of its actions can ever run first (an error),
// including an action that needs what only it produces.
func (l *linter) preconditions(m *Manifest) {
	producers := map[string][]int{}
	for i, a := range m.Actions {
		seen := map[string]bool{}
		for _, p := range a.Postconditions {
			k := conditionKey(p)
			if k != "" && !seen[k] {
				seen[k] = true
				producers[k] = append(producers[k], i)
			}
		}
	}
	type edge struct {
		to   int
		cond int // index into the action's preconditions
	}
	deps := make([][]edge, len(m.Actions))
	for i, a := range m.Actions {
		linked := map[int]bool{}
		for j, p := range a.Preconditions {
			k := conditionKey(p)
			if k == "" {
				continue
			}
			ps := producers[k]
			if len(ps) == 0 {
				l.add(RulePrecondUnproduced, SeverityWarning, fmt.Sprintf("%s/preconditions/%d", a.Pointer, j),
					"bind a checker for this precondition on the host, or add it to the postconditions of the action that establishes it",
					"precondition %q is not produced by any action's postconditions: the host must check it", p)
				continue
			}
			for _, to := range ps {
				if to == i && len(ps) > 1 {
					continue // another action can establish it first
				}
				if !linked[to] {
					linked[to] = true
					deps[i] = append(deps[i], edge{to, j})
				}
			}
		}
	}

	// Depth-first search with a recursion stack, as in the dependency cycle
	// detection of the validation rules: reaching a node that is still on
	// the stack closes a cycle, which is reported as the path around it.
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(m.Actions))
	var stack []int
	var stackEdge []int // the precondition each stacked node was left by
	reported := map[string]bool{}
	var visit func(int)
	visit = func(n int) {
		color[n] = grey
		stack = append(stack, n)
		for _, e := range deps[n] {
			stackEdge = append(stackEdge, e.cond)
			switch color[e.to] {
			case white:
				visit(e.to)
			case grey:
				start := len(stack) - 1
				for stack[start] != e.to {
					start--
				}
				cyc := stack[start:]
				key := cycleKey(cyc)
				if !reported[key] {
					reported[key] = true
					l.cycle(m, cyc, stackEdge[start])
				}
			}
			stackEdge = stackEdge[:len(stackEdge)-1]
		}
		stack = stack[:len(stack)-1]
		color[n] = black
	}
	for i := range m.Actions {
		if color[i] == white {
			visit(i)
		}
	}
}

func cycleKey(cyc []int) string {
	s := append([]int(nil), cyc...)
	sort.Ints(s)
	var b strings.Builder
	for _, n := range s {
		b.WriteString(strconv.Itoa(n))
		b.WriteByte(',')
	}
	return b.String()
}

// cycle reports one cycle, at the precondition by which its first action
// depends on the next.
func (l *linter) cycle(m *Manifest, cyc []int, firstCond int) {
	names := make([]string, 0, len(cyc)+1)
	for _, n := range cyc {
		names = append(names, actionName(m.Actions[n]))
	}
	names = append(names, names[0])
	first := m.Actions[cyc[0]]
	cond := first.Preconditions[firstCond]
	msg := fmt.Sprintf("dependency cycle: %s — each action needs a precondition only the next one produces, so none can run first", strings.Join(names, " → "))
	if len(cyc) == 1 {
		msg = fmt.Sprintf("dependency cycle: %s — the action needs %q, which only it produces, so it can never run", strings.Join(names, " → "), cond)
	}
	l.add(RulePrecondCycle, SeverityError, fmt.Sprintf("%s/preconditions/%d", first.Pointer, firstCond),
		"break the cycle: remove the precondition, let the host establish it, or let an action outside the cycle produce it",
		"%s", msg)
}

func actionName(a *Action) string {
	if a.Intent != "" {
		return a.Intent
	}
	return a.Pointer
}

// sortFindings orders findings by path (numbers numerically), errors before
// warnings, then by rule, so that reports are identical on every run.
func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Path != b.Path {
			return pointerLess(a.Path, b.Path)
		}
		if a.Severity != b.Severity {
			return a.Severity == SeverityError
		}
		return a.Rule < b.Rule
	})
}

var actionPtrRE = regexp.MustCompile(`^(/actions/[0-9]+|/entities/[0-9]+/actions/[0-9]+)(/|$)`)

// actionPointer returns the pointer of the action a path lies in, or "".
func actionPointer(path string) string {
	if m := actionPtrRE.FindStringSubmatch(path); m != nil {
		return m[1]
	}
	return ""
}

// rawActions returns the pointers and raw values of the document's actions.
func rawActions(doc any) (ptrs []string, vals []any) {
	root, _ := doc.(map[string]any)
	if root == nil {
		return nil, nil
	}
	if ents, ok := root["entities"].([]any); ok {
		for i, e := range ents {
			em, _ := e.(map[string]any)
			acts, _ := em["actions"].([]any)
			for j, a := range acts {
				ptrs = append(ptrs, fmt.Sprintf("/entities/%d/actions/%d", i, j))
				vals = append(vals, a)
			}
		}
		return ptrs, vals
	}
	acts, _ := root["actions"].([]any)
	for i, a := range acts {
		ptrs = append(ptrs, fmt.Sprintf("/actions/%d", i))
		vals = append(vals, a)
	}
	return ptrs, vals
}

func actionStatuses(doc any, fs []Finding) []ActionStatus {
	failing := map[string]bool{}
	for _, f := range fs {
		if f.Severity == SeverityError {
			if p := actionPointer(f.Path); p != "" {
				failing[p] = true
			}
		}
	}
	ptrs, vals := rawActions(doc)
	out := make([]ActionStatus, len(ptrs))
	for i, p := range ptrs {
		name := p
		if am, ok := vals[i].(map[string]any); ok {
			if s, ok := am["intent"].(string); ok && s != "" {
				name = s
			}
		}
		out[i] = ActionStatus{Intent: name, Pointer: p, Failing: failing[p]}
	}
	return out
}

// PruneError is returned by Prune when removing the failing actions does not
// make the manifest pass: an error outside every action remains.
type PruneError struct {
	// Remaining are the errors left after removing the failing actions.
	Remaining []Finding
}

func (e *PruneError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "removing the failing actions does not make the manifest pass: %d error(s) remain outside any action", len(e.Remaining))
	for _, f := range e.Remaining {
		b.WriteString("\n  ")
		b.WriteString(f.String())
	}
	return b.String()
}

// Prune applies the partial schema policy.
//
// It returns the manifest (as indented JSON, keys sorted) without the
// actions that have errors, and the actions it removed, in document order.
// Removing an action can change what the others see (its postconditions no
// longer produce anything), so the result is linted again until it passes.
// When an error outside every action remains, or the document cannot be
// read at all, it returns a *PruneError and no document.
func (r *LintResult) Prune() ([]byte, []ActionStatus, error) {
	if r.doc == nil {
		return nil, nil, &PruneError{Remaining: r.Errors()}
	}
	opts := LintOptions{Level: r.Level, Source: r.Source}
	cur, removed := r, []ActionStatus{}
	doc := deepCopy(r.doc)
	for !cur.Passed() {
		var drop []ActionStatus
		for _, a := range cur.Actions {
			if a.Failing {
				drop = append(drop, a)
			}
		}
		if len(drop) == 0 {
			return nil, removed, &PruneError{Remaining: cur.Errors()}
		}
		doc = withoutActions(doc, drop)
		removed = append(removed, drop...)
		data, err := json.Marshal(doc)
		if err != nil {
			return nil, removed, err
		}
		// The pruned document is JSON whatever the source was.
		cur = Lint(data, LintOptions{Level: opts.Level, Source: jsonName(opts.Source)})
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, removed, err
	}
	return append(out, '\n'), removed, nil
}

func jsonName(source string) string {
	if f := formatFor(source); f == formatYAML {
		return strings.TrimSuffix(strings.TrimSuffix(source, ".yaml"), ".yml") + ".json"
	}
	return source
}

// withoutActions removes the actions at the given pointers; indices shift,
// so each array is rebuilt rather than edited in place.
func withoutActions(doc any, drop []ActionStatus) any {
	gone := map[string]bool{}
	for _, a := range drop {
		gone[a.Pointer] = true
	}
	root := doc.(map[string]any)
	keep := func(prefix string, acts []any) []any {
		out := make([]any, 0, len(acts))
		for i, a := range acts {
			if !gone[fmt.Sprintf("%s/%d", prefix, i)] {
				out = append(out, a)
			}
		}
		return out
	}
	if ents, ok := root["entities"].([]any); ok {
		for i, e := range ents {
			if em, ok := e.(map[string]any); ok {
				if acts, ok := em["actions"].([]any); ok {
					em["actions"] = keep(fmt.Sprintf("/entities/%d/actions", i), acts)
				}
			}
		}
		return root
	}
	if acts, ok := root["actions"].([]any); ok {
		root["actions"] = keep("/actions", acts)
	}
	return root
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}
