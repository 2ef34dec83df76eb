package manifest

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Resource declares MCP resources a gateway may serve (an axgate extension
// of AXAG, like upstream_sha256): one URI, the URIs of a template, or those
// under a prefix. Exactly one of URI, URITemplate and URIPrefix is set.
type Resource struct {
	// URI is matched exactly, byte for byte.
	URI string
	// URITemplate is an RFC 6570 level 1 template (file:///docs/{name}), as
	// MCP's resources/templates use: each variable stands for one path
	// segment, neither "." nor "..", without "/" or "\" even encoded.
	URITemplate string
	// URIPrefix matches the URIs that start with it and have no dot segment
	// ("." or "..", even encoded), empty path segment or backslash after it.
	URIPrefix string
	// Action is the read action a request for these resources passes the
	// gates as (access, rate limit, audit, telemetry). It is never a tool:
	// its ToolName is empty, Manifest.Tool does not return it and it is not
	// in Manifest.Actions.
	Action *Action

	tmpl *regexp.Regexp
	vars []string
}

// Prompt declares an MCP prompt a gateway may serve (an axgate extension),
// by name.
type Prompt struct {
	Name string
	// Action is the read action a request for the prompt passes the gates
	// as; never a tool (see Resource.Action).
	Action *Action
}

// match reports whether uri is one of the resources r declares and, for a
// template, the values of its variables (percent-decoded).
func (r *Resource) match(uri string) (map[string]string, bool) {
	switch {
	case r.URI != "":
		return nil, uri == r.URI
	case r.tmpl != nil:
		m := r.tmpl.FindStringSubmatch(uri)
		if m == nil {
			return nil, false
		}
		vars := make(map[string]string, len(r.vars))
		for i, name := range r.vars {
			v, ok := safeSegment(m[i+1])
			if !ok {
				return nil, false
			}
			vars[name] = v
		}
		return vars, true
	case r.URIPrefix != "":
		rest, ok := strings.CutPrefix(uri, r.URIPrefix)
		if !ok || strings.ContainsAny(rest, "\\\x00") {
			return nil, false
		}
		// An empty segment makes the rest absolute ("//etc/passwd" after
		// "file:///docs/"), which os.path.join or path.resolve take as it
		// is; in the path, not in a query or fragment.
		path, _, _ := strings.Cut(rest, "?")
		path, _, _ = strings.Cut(path, "#")
		if strings.Contains(r.URIPrefix[len(r.URIPrefix)-1:]+path, "//") {
			return nil, false
		}
		for _, seg := range strings.FieldsFunc(rest, func(c rune) bool { return c == '/' || c == '?' || c == '#' }) {
			if _, ok := safeSegment(seg); !ok {
				return nil, false
			}
		}
		return nil, true
	}
	return nil, false
}

// safeSegment percent-decodes one path segment and reports whether it
// stays one: neither "." nor ".." nor holding "/", "\\" or NUL, however
// many times an upstream decodes it (%252e%252e is ".." decoded twice).
func safeSegment(seg string) (string, bool) {
	var first string
	for i := 0; i < 4; i++ {
		v, err := url.PathUnescape(seg)
		if err != nil || v == "." || v == ".." || strings.ContainsAny(v, "/\\\x00") {
			return "", false
		}
		if i == 0 {
			first = v
		}
		if v == seg {
			return first, true
		}
		seg = v
	}
	return "", false
}

// Resource returns the declared resource entry that allows uri, and its
// template's variables: an exact URI first, then the first template in
// manifest order, then the longest prefix. Nil when none does.
func (m *Manifest) Resource(uri string) (*Resource, map[string]string) {
	var best *Resource
	for _, r := range m.Resources {
		if r.URI != "" && r.URI == uri {
			return r, nil
		}
	}
	for _, r := range m.Resources {
		if r.tmpl != nil {
			if vars, ok := r.match(uri); ok {
				return r, vars
			}
		}
	}
	for _, r := range m.Resources {
		if r.URIPrefix != "" && (best == nil || len(r.URIPrefix) > len(best.URIPrefix)) {
			if _, ok := r.match(uri); ok {
				best = r
			}
		}
	}
	return best, nil
}

// Prompt returns the declared prompt with that name, or nil.
func (m *Manifest) Prompt(name string) *Prompt {
	for _, p := range m.Prompts {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Checked returns every action the gates check: the tools' (Actions),
// then those that Resources and Prompts stand for.
// It is a new slice when there are resources or prompts.
func (m *Manifest) Checked() []*Action {
	if len(m.Resources)+len(m.Prompts) == 0 {
		return m.Actions
	}
	out := make([]*Action, 0, len(m.Actions)+len(m.Resources)+len(m.Prompts))
	out = append(out, m.Actions...)
	for _, r := range m.Resources {
		out = append(out, r.Action)
	}
	for _, p := range m.Prompts {
		out = append(out, p.Action)
	}
	return out
}

// uriVarRE is an RFC 6570 level 1 expression: a variable name, no operator.
var uriVarRE = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// segmentRE is what one level 1 expansion of a value that stays a segment
// looks like: unreserved characters and percent-encoded octets.
const segmentRE = `((?:[A-Za-z0-9\-._~]|%[0-9A-Fa-f]{2})+)`

// compileTemplate turns a level 1 URI template into a matcher.
func compileTemplate(t string) (*regexp.Regexp, []string, string) {
	var b strings.Builder
	b.WriteString("^")
	var vars []string
	last := 0
	for _, loc := range uriVarRE.FindAllStringSubmatchIndex(t, -1) {
		lit := t[last:loc[0]]
		if strings.ContainsAny(lit, "{}") {
			return nil, nil, "uri_template " + strconv.Quote(t) + " is not an RFC 6570 level 1 template: only {name} expressions (letters, digits, _), no operators such as {+path} or {?q}"
		}
		b.WriteString(regexp.QuoteMeta(lit))
		name := t[loc[2]:loc[3]]
		for _, v := range vars {
			if v == name {
				return nil, nil, "uri_template " + strconv.Quote(t) + " uses the variable " + name + " twice"
			}
		}
		vars = append(vars, name)
		b.WriteString(segmentRE)
		last = loc[1]
	}
	lit := t[last:]
	if strings.ContainsAny(lit, "{}") {
		return nil, nil, "uri_template " + strconv.Quote(t) + " is not an RFC 6570 level 1 template: only {name} expressions (letters, digits, _), no operators such as {+path} or {?q}"
	}
	if len(vars) == 0 {
		return nil, nil, "uri_template " + strconv.Quote(t) + " has no {variable}: declare it as uri"
	}
	b.WriteString(regexp.QuoteMeta(lit))
	b.WriteString("$")
	return regexp.MustCompile(b.String()), vars, ""
}

// entry reads the fields a resource or prompt shares with an action: an
// internal read action, never a tool.
func (b *builder) entry(em map[string]any, ptr, entity string) *Action {
	a := &Action{
		Intent:         str(em, "intent"),
		Entity:         str(em, "entity"),
		Type:           Read,
		Description:    str(em, "description"),
		RiskLevel:      RiskNone,
		RequiredRoles:  strs(em, "required_roles"),
		Scope:          Scope(str(em, "scope")),
		TenantBoundary: TenantBoundary(str(em, "tenant_boundary")),
		ApprovalCount:  1,
		Upstream:       str(em, "upstream"),
		Pointer:        ptr,
	}
	if e := a.Entity; e != "" && entity != "" && e != entity {
		b.add(ptr+"/entity", "entity", "entity %q differs from its enclosing entity %q", e, entity)
	}
	if a.Entity == "" {
		a.Entity = entity
	}
	if a.TenantBoundary == "" {
		a.TenantBoundary = TenantStrict
	}
	if s, ok := em["rate_limit"].(string); ok {
		rl, err := parseRateLimit(s)
		if err != nil {
			b.add(ptr+"/rate_limit", "rate_limit", "%v", err)
		}
		a.RateLimit = rl
	}
	return a
}

func (b *builder) resource(em map[string]any, ptr, entity string) *Resource {
	r := &Resource{URI: str(em, "uri"), URITemplate: str(em, "uri_template"), URIPrefix: str(em, "uri_prefix"), Action: b.entry(em, ptr, entity)}
	n := 0
	for _, s := range []string{r.URI, r.URITemplate, r.URIPrefix} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		b.add(ptr, "resource", "a resource needs exactly one of uri, uri_template and uri_prefix")
		r.URI, r.URITemplate, r.URIPrefix = "", "", ""
		return r
	}
	if r.URITemplate != "" {
		var msg string
		if r.tmpl, r.vars, msg = compileTemplate(r.URITemplate); msg != "" {
			b.add(ptr+"/uri_template", "uri_template", "%s", msg)
		}
	}
	return r
}

// entries reads the resources and prompts of one list holder (the document
// in the v1 form, an entity in the reference form).
func (b *builder) entries(m *Manifest, holder map[string]any, ptr, entity string) {
	if rs, ok := holder["resources"].([]any); ok {
		for i, e := range rs {
			if em, ok := e.(map[string]any); ok {
				m.Resources = append(m.Resources, b.resource(em, ptr+"/resources/"+strconv.Itoa(i), entity))
			}
		}
	}
	if ps, ok := holder["prompts"].([]any); ok {
		for i, e := range ps {
			if em, ok := e.(map[string]any); ok {
				m.Prompts = append(m.Prompts, &Prompt{Name: str(em, "name"), Action: b.entry(em, ptr+"/prompts/"+strconv.Itoa(i), entity)})
			}
		}
	}
}

// uniqueEntries checks that entries' intents are unique among all actions,
// and that no two prompts share a name and no two resources a matcher.
func (b *builder) uniqueEntries(m *Manifest) {
	seen := map[string]string{}
	for _, a := range m.Actions {
		if a.Intent != "" {
			seen[a.Intent] = a.Pointer
		}
	}
	intent := func(a *Action) {
		if a.Intent == "" {
			return
		}
		if prev, dup := seen[a.Intent]; dup {
			b.add(a.Pointer+"/intent", "unique", "intent %q is already declared at %s", a.Intent, prev)
			return
		}
		seen[a.Intent] = a.Pointer
	}
	matchers := map[string]string{}
	for _, r := range m.Resources {
		intent(r.Action)
		key := "uri " + r.URI + "\x00" + r.URITemplate + "\x00" + r.URIPrefix
		if r.URI+r.URITemplate+r.URIPrefix == "" {
			continue
		}
		if prev, dup := matchers[key]; dup {
			b.add(r.Action.Pointer, "unique", "the same resource is already declared at %s", prev)
		} else {
			matchers[key] = r.Action.Pointer
		}
	}
	names := map[string]string{}
	for _, p := range m.Prompts {
		intent(p.Action)
		if prev, dup := names[p.Name]; dup && p.Name != "" {
			b.add(p.Action.Pointer+"/name", "unique", "prompt %q is already declared at %s", p.Name, prev)
		} else {
			names[p.Name] = p.Action.Pointer
		}
	}
}
