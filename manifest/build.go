package manifest

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/axgate/axgate/internal/jsonx"
)

// build turns a decoded manifest document into the model and checks what the
// schema cannot: uniqueness, consistency and syntax of the safety fields. It
// reads defensively: a field of the wrong type was already reported by the
// structural check and is skipped here, so every problem is reported once.
func build(doc map[string]any) (*Manifest, []Problem) {
	b := &builder{}
	m := &Manifest{
		Version:     str(doc, "version"),
		GeneratedAt: str(doc, "generated_at"),
		Conformance: str(doc, "conformance"),
		Form:        FormV1,
	}
	if src, ok := doc["source"].(map[string]any); ok {
		m.Source = &Source{URL: str(src, "url"), Paths: strs(src, "paths"), Tool: str(src, "tool"), ToolVersion: str(src, "tool_version")}
	}
	if ents, ok := doc["entities"].([]any); ok {
		m.Form = FormReference
		m.Metadata, _ = doc["metadata"].(map[string]any)
		for i, e := range ents {
			ent, ok := e.(map[string]any)
			if !ok {
				continue
			}
			entPtr := "/entities/" + strconv.Itoa(i)
			name := str(ent, "name")
			acts, _ := ent["actions"].([]any)
			for j, a := range acts {
				if am, ok := a.(map[string]any); ok {
					ptr := entPtr + "/actions/" + strconv.Itoa(j)
					if e := str(am, "entity"); e != "" && name != "" && e != name {
						b.add(ptr+"/entity", "entity", "action entity %q differs from its enclosing entity %q", e, name)
					}
					act := b.action(am, ptr, FormReference)
					if act.Entity == "" {
						act.Entity = name
					}
					m.Actions = append(m.Actions, act)
				}
			}
			b.entries(m, ent, entPtr, name)
		}
	} else if acts, ok := doc["actions"].([]any); ok {
		for i, a := range acts {
			if am, ok := a.(map[string]any); ok {
				m.Actions = append(m.Actions, b.action(am, "/actions/"+strconv.Itoa(i), FormV1))
			}
		}
		b.entries(m, doc, "", "")
	}
	b.unique(m)
	b.uniqueEntries(m)
	return m, b.problems
}

type builder struct {
	problems []Problem
}

func (b *builder) add(path, keyword, format string, args ...any) {
	b.problems = append(b.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...), Keyword: keyword})
}

var rateLimitRE = regexp.MustCompile(`^\s*([0-9]+)\s*/\s*(second|minute|hour|day)\s*$`)

var periods = map[string]time.Duration{"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}

// parseRateLimit reads "N/second|minute|hour|day" with N ≥ 1.
func parseRateLimit(s string) (*RateLimit, error) {
	m := rateLimitRE.FindStringSubmatch(s)
	if m == nil {
		return nil, fmt.Errorf("rate_limit %q is not N/second, N/minute, N/hour or N/day", s)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 {
		return nil, fmt.Errorf("rate_limit %q must allow at least 1 call", s)
	}
	return &RateLimit{Count: n, Per: periods[m[2]], Spec: s}, nil
}

// parseCooldown reads a positive duration such as 30s, 5m or 1h.
func parseCooldown(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("cooldown %q is not a positive duration such as 30s, 5m or 1h", s)
	}
	return d, nil
}

var placeholderRE = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// placeholders returns the parameter names a confirmation message refers to.
func placeholders(msg string) []string {
	var out []string
	for _, m := range placeholderRE.FindAllStringSubmatch(msg, -1) {
		out = append(out, m[1])
	}
	return out
}

func (b *builder) action(am map[string]any, ptr string, form Form) *Action {
	a := &Action{
		Intent:               str(am, "intent"),
		Entity:               str(am, "entity"),
		Type:                 ActionType(str(am, "action_type")),
		OperationID:          str(am, "operation_id"),
		Description:          str(am, "description"),
		RiskLevel:            RiskLevel(str(am, "risk_level")),
		ConfirmationRequired: boolean(am, "confirmation_required"),
		ConfirmationMessage:  str(am, "confirmation_message"),
		ApprovalRequired:     boolean(am, "approval_required"),
		ApprovalRoles:        strs(am, "approval_roles"),
		ApprovalCount:        1,
		RequiredRoles:        strs(am, "required_roles"),
		Idempotent:           boolPtr(am, "idempotent"),
		Scope:                Scope(str(am, "scope")),
		TenantBoundary:       TenantBoundary(str(am, "tenant_boundary")),
		CrossTenant:          boolPtr(am, "cross_tenant"),
		SideEffects:          strs(am, "side_effects"),
		Preconditions:        strs(am, "preconditions"),
		Postconditions:       strs(am, "postconditions"),
		Async:                boolean(am, "async"),
		ElementSelector:      str(am, "element_selector"),
		SourceFile:           str(am, "source_file"),
		UpstreamSHA256:       str(am, "upstream_sha256"),
		Upstream:             str(am, "upstream"),
		Pointer:              ptr,
	}
	if a.TenantBoundary == "" {
		a.TenantBoundary = TenantStrict
	}
	if f, ok := am["source_line"].(float64); ok {
		a.SourceLine = int(f)
	}
	if f, ok := am["approval_count"].(float64); ok && f == math.Trunc(f) {
		a.ApprovalCount = int(f)
		if a.ApprovalCount < 1 {
			// Also caught by the schema's minimum; the model must never hold 0.
			a.ApprovalCount = 1
		}
	}
	if a.ApprovalRequired && len(a.ApprovalRoles) == 0 {
		b.add(ptr+"/approval_roles", "approval_roles", "approval_required is true but approval_roles is empty: nobody could approve")
	}
	if _, ok := am["approval_count"]; ok && !a.ApprovalRequired {
		b.add(ptr+"/approval_count", "approval_count", "approval_count is set but approval_required is not true")
	}
	if s, ok := am["rate_limit"].(string); ok {
		rl, err := parseRateLimit(s)
		if err != nil {
			b.add(ptr+"/rate_limit", "rate_limit", "%v", err)
		}
		a.RateLimit = rl
	}
	if s, ok := am["cooldown"].(string); ok {
		d, err := parseCooldown(s)
		if err != nil {
			b.add(ptr+"/cooldown", "cooldown", "%v", err)
		}
		a.Cooldown = d
	}
	if cs, ok := am["constraints"].(map[string]any); ok {
		for name, e := range cs {
			if expr, ok := e.(string); ok {
				a.Constraints = append(a.Constraints, Constraint{Name: name, Expr: expr, Pointer: ptr + "/constraints/" + jsonx.EscapePointer(name)})
			}
		}
		sort.Slice(a.Constraints, func(i, j int) bool { return a.Constraints[i].Name < a.Constraints[j].Name })
	}
	if os, ok := am["output_schema"]; ok {
		raw, _ := json.Marshal(os)
		a.OutputSchema = raw
	}
	a.toolName = a.OperationID
	if a.toolName == "" {
		a.toolName = strings.ReplaceAll(a.Intent, ".", "_")
	}

	// Parameters.
	switch form {
	case FormV1:
		seen := map[string]string{}
		for _, list := range []string{"required_parameters", "optional_parameters"} {
			items, ok := am[list].([]any)
			if !ok {
				continue
			}
			a.ParametersDeclared = true
			for i, it := range items {
				pm, ok := it.(map[string]any)
				if !ok {
					continue
				}
				pp := ptr + "/" + list + "/" + strconv.Itoa(i)
				p := b.param(pm, pp, str(pm, "name"), form)
				p.Required = list == "required_parameters"
				if prev, dup := seen[p.Name]; dup && p.Name != "" {
					if prev != list {
						b.add(pp+"/name", "disjoint", "parameter %q is both required and optional", p.Name)
					} else {
						b.add(pp+"/name", "unique", "parameter %q is declared twice", p.Name)
					}
					continue
				}
				seen[p.Name] = list
				a.Parameters = append(a.Parameters, p)
			}
		}
	case FormReference:
		if pm, ok := am["parameters"].(map[string]any); ok {
			a.ParametersDeclared = true
			a.Parameters = b.paramMap(pm, ptr+"/parameters")
		}
	}

	for _, name := range placeholders(a.ConfirmationMessage) {
		if a.Param(name) == nil {
			b.add(ptr+"/confirmation_message", "confirmation_message", "placeholder {{%s}} names no declared parameter", name)
		}
	}
	if len(a.OutputSchema) > 0 {
		s, err := compileOutputSchema(a)
		if err != nil {
			b.add(ptr+"/output_schema", "output_schema", "output_schema does not compile: %v", err)
		}
		a.outputSchema = s
	}
	if a.ParametersDeclared {
		doc := ParamsSchema(a, false)
		s, err := compileParams(a, doc)
		if err != nil {
			// Patterns are checked one by one below; this catches the rest.
			b.add(ptr, "parameters", "parameters do not compile to a JSON Schema: %v", err)
		}
		a.inputSchema, a.paramSchema = doc, s
	}
	return a
}

func (b *builder) paramMap(pm map[string]any, ptr string) []*Parameter {
	names := make([]string, 0, len(pm))
	for n := range pm {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*Parameter, 0, len(names))
	for _, n := range names {
		def, ok := pm[n].(map[string]any)
		if !ok {
			continue
		}
		p := b.param(def, ptr+"/"+jsonx.EscapePointer(n), n, FormReference)
		p.Required = boolean(def, "required")
		out = append(out, p)
	}
	return out
}

// formatNames maps AXAG format hints and JSON Schema names to the JSON Schema
// format the validator asserts. A name missing here is refused at load: the
// validator would ignore it silently.
var formatNames = map[string]string{
	"email": "email", "url": "uri", "uri": "uri", "date": "date", "datetime": "date-time",
	"date-time": "date-time", "time": "time", "uuid": "uuid", "ipv4": "ipv4", "ipv6": "ipv6",
	"hostname": "hostname",
}

func (b *builder) param(pm map[string]any, ptr, name string, form Form) *Parameter {
	p := &Parameter{
		Name:        name,
		Type:        str(pm, "type"),
		Description: str(pm, "description"),
		Pattern:     str(pm, "pattern"),
		Pointer:     ptr,
	}
	if e, ok := pm["enum"].([]any); ok {
		p.Enum = e
	}
	if d, ok := pm["default"]; ok {
		p.Default, p.HasDefault = d, true
	}
	minKey, maxKey := "minimum", "maximum"
	if form == FormV1 {
		minKey, maxKey = "min", "max"
	}
	p.Minimum = number(pm, minKey)
	p.Maximum = number(pm, maxKey)
	p.MinLength = integer(pm, "minLength")
	p.MaxLength = integer(pm, "maxLength")
	p.MaxItems = integer(pm, "maxItems")
	if p.MaxItems != nil && p.Type != "array" {
		b.add(ptr, "type", "maxItems applies to arrays, but the parameter is a %s", p.Type)
	}
	if f := str(pm, "format"); f != "" {
		if n, ok := formatNames[f]; ok {
			p.Format = n
		} else {
			b.add(ptr+"/format", "format", "unknown format %q", f)
		}
	}
	if p.Pattern != "" {
		if _, err := regexp.Compile(p.Pattern); err != nil {
			b.add(ptr+"/pattern", "pattern", "pattern does not compile: %v", err)
		}
	}
	numeric := p.Type == "number" || p.Type == "integer"
	if (p.Minimum != nil || p.Maximum != nil) && !numeric {
		b.add(ptr, "type", "%s/%s apply to numbers, but the parameter is a %s", minKey, maxKey, p.Type)
	}
	if p.Minimum != nil && p.Maximum != nil && *p.Minimum > *p.Maximum {
		b.add(ptr+"/"+maxKey, maxKey, "%s %v is below %s %v", maxKey, *p.Maximum, minKey, *p.Minimum)
	}
	if (p.MinLength != nil || p.MaxLength != nil || p.Pattern != "" || p.Format != "") && p.Type != "string" {
		b.add(ptr, "type", "minLength, maxLength, pattern and format apply to strings, but the parameter is a %s", p.Type)
	}
	if p.MinLength != nil && p.MaxLength != nil && *p.MinLength > *p.MaxLength {
		b.add(ptr+"/maxLength", "maxLength", "maxLength %d is below minLength %d", *p.MaxLength, *p.MinLength)
	}
	if it, ok := pm["items"].(map[string]any); ok {
		if p.Type != "array" {
			b.add(ptr+"/items", "items", "items applies to arrays, but the parameter is a %s", p.Type)
		}
		p.Items = b.param(it, ptr+"/items", "", form)
	}
	if props, ok := pm["properties"].(map[string]any); ok {
		if p.Type != "object" {
			b.add(ptr+"/properties", "properties", "properties applies to objects, but the parameter is a %s", p.Type)
		}
		p.Properties = b.paramMap(props, ptr+"/properties")
	}
	return p
}

// unique checks that intents and tool names are unique.
func (b *builder) unique(m *Manifest) {
	m.byIntent = make(map[string]*Action, len(m.Actions))
	m.byTool = make(map[string]*Action, len(m.Actions))
	for _, a := range m.Actions {
		if a.Intent == "" {
			continue
		}
		if prev, dup := m.byIntent[a.Intent]; dup {
			b.add(a.Pointer+"/intent", "unique", "intent %q is already declared at %s", a.Intent, prev.Pointer)
		} else {
			m.byIntent[a.Intent] = a
		}
		if prev, dup := m.byTool[a.toolName]; dup {
			b.add(a.Pointer, "unique", "tool name %q is already used by %s", a.toolName, prev.Pointer)
		} else {
			m.byTool[a.toolName] = a
		}
	}
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func boolean(m map[string]any, k string) bool {
	v, _ := m[k].(bool)
	return v
}

func boolPtr(m map[string]any, k string) *bool {
	if v, ok := m[k].(bool); ok {
		return &v
	}
	return nil
}

func strs(m map[string]any, k string) []string {
	l, ok := m[k].([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(l))
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func number(m map[string]any, k string) *float64 {
	if f, ok := m[k].(float64); ok {
		return &f
	}
	return nil
}

func integer(m map[string]any, k string) *int {
	if f, ok := m[k].(float64); ok && f == math.Trunc(f) {
		i := int(f)
		return &i
	}
	return nil
}
