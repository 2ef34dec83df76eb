package draft

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The manifest's resources and prompts, as the draft writes them.
type (
	resourceEntry struct {
		Intent      string `json:"intent"`
		Description string `json:"description"`
		URI         string `json:"uri,omitempty"`
		URITemplate string `json:"uri_template,omitempty"`
	}
	promptEntry struct {
		Intent      string `json:"intent"`
		Description string `json:"description"`
		Name        string `json:"name"`
	}
)

// level1RE is an RFC 6570 level 1 template, the only kind a manifest
// declares: literals and {name} expressions.
var level1RE = regexp.MustCompile(`^(?:[^{}]|\{[A-Za-z0-9_]+\})*$`)

var templateVarRE = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// level1 reports whether t is a template the manifest can declare: level 1,
// with at least one variable, each once.
func level1(t string) bool {
	if !level1RE.MatchString(t) {
		return false
	}
	vars := templateVarRE.FindAllStringSubmatch(t, -1)
	seen := map[string]bool{}
	for _, v := range vars {
		if seen[v[1]] {
			return false
		}
		seen[v[1]] = true
	}
	return len(vars) > 0
}

// everyone is the guess listed for every resource and prompt drafted.
const everyone = "drafted for every caller: add required_roles (and a rate_limit) unless everyone who may call the tools may read it"

// entries drafts the resources and prompts of opts: one entry per
// resource (its exact uri), per level 1 template and per prompt, each
// listed for review.
func (d *drafter) entries(opts Options) ([]*resourceEntry, []*promptEntry) {
	var rs []*resourceEntry
	seen := map[string]bool{}
	add := func(kind, key, name, description string, e *resourceEntry) {
		who := kind + " " + key
		ptr := "/entities/0/resources/" + strconv.Itoa(len(rs))
		if seen[kind+" "+key] {
			d.guess(who, "", ptr, nil, "not drafted: the upstream lists it twice")
			return
		}
		seen[kind+" "+key] = true
		e.Intent = d.entryIntent(who, name, ptr)
		e.Description = description
		if e.Description == "" {
			e.Description = "The upstream's " + kind + " " + key + "."
			d.guess(who, e.Intent, ptr+"/description", e.Description, "the upstream gives no description: say what it holds")
		}
		d.guess(who, e.Intent, ptr, nil, everyone)
		rs = append(rs, e)
	}
	for _, r := range opts.Resources {
		if r == nil || r.URI == "" {
			continue
		}
		add("resource", r.URI, nameOr(r.Name, r.URI), r.Description, &resourceEntry{URI: r.URI})
	}
	for _, t := range opts.ResourceTemplates {
		if t == nil || t.URITemplate == "" {
			continue
		}
		if !level1(t.URITemplate) {
			d.guess("template "+t.URITemplate, "", "/entities/0/resources", nil,
				"not drafted: not an RFC 6570 level 1 template with a variable (operators such as {+path} can reach beyond one segment); declare a uri_prefix by hand to serve it")
			continue
		}
		add("template", t.URITemplate, nameOr(t.Name, t.URITemplate), t.Description, &resourceEntry{URITemplate: t.URITemplate})
	}
	var ps []*promptEntry
	names := map[string]bool{}
	for _, p := range opts.Prompts {
		if p == nil || p.Name == "" {
			continue
		}
		who := "prompt " + p.Name
		ptr := "/entities/0/prompts/" + strconv.Itoa(len(ps))
		if names[p.Name] {
			d.guess(who, "", ptr, nil, "not drafted: the upstream lists it twice")
			continue
		}
		names[p.Name] = true
		e := &promptEntry{Intent: d.entryIntent(who, p.Name, ptr), Description: p.Description, Name: p.Name}
		if e.Description == "" {
			e.Description = "The upstream's prompt " + p.Name + "."
			d.guess(who, e.Intent, ptr+"/description", e.Description, "the upstream gives no description: say what it asks the model")
		}
		d.guess(who, e.Intent, ptr, nil, everyone)
		ps = append(ps, e)
	}
	return rs, ps
}

// entryIntent is the intent of a resource or prompt: the entity and its
// name as a lowercase name, numbered when a tool or another entry has it.
func (d *drafter) entryIntent(who, name, ptr string) string {
	verb := intentName(name)
	intent := d.entity + "." + verb
	for n := 2; d.intents[intent] != ""; n++ {
		intent = d.entity + "." + verb + "_" + strconv.Itoa(n)
	}
	d.intents[intent] = who
	if intent != d.entity+"."+verb || verb != name {
		d.guess(who, intent, ptr+"/intent", intent, "made of the name "+strconv.Quote(name)+": rename it to say what it reads")
	}
	return intent
}

func nameOr(name, fallback string) string {
	if name != "" {
		return name
	}
	return fallback
}

// ListResourcesAndPrompts returns the upstream's resources, resource
// templates and prompts, each list followed to its end as ListTools does
// (within maxTools entries and maxPages pages, no cursor twice). A kind the
// upstream does not announce in its capabilities is not asked for.
func ListResourcesAndPrompts(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Resource, []*mcp.ResourceTemplate, []*mcp.Prompt, error) {
	if cs == nil {
		return nil, nil, nil, errors.New("draft: ListResourcesAndPrompts without a client session")
	}
	var caps *mcp.ServerCapabilities
	if ir := cs.InitializeResult(); ir != nil {
		caps = ir.Capabilities
	}
	if caps == nil {
		return nil, nil, nil, nil
	}
	var (
		rs  []*mcp.Resource
		ts  []*mcp.ResourceTemplate
		ps  []*mcp.Prompt
		err error
	)
	if caps.Resources != nil {
		if rs, err = pages(ctx, "resources/list", func(c string) ([]*mcp.Resource, string, error) {
			r, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: c})
			if err != nil {
				return nil, "", err
			}
			return r.Resources, r.NextCursor, nil
		}); err != nil {
			return nil, nil, nil, err
		}
		if ts, err = pages(ctx, "resources/templates/list", func(c string) ([]*mcp.ResourceTemplate, string, error) {
			r, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: c})
			if err != nil {
				return nil, "", err
			}
			return r.ResourceTemplates, r.NextCursor, nil
		}); err != nil {
			return nil, nil, nil, err
		}
	}
	if caps.Prompts != nil {
		if ps, err = pages(ctx, "prompts/list", func(c string) ([]*mcp.Prompt, string, error) {
			r, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: c})
			if err != nil {
				return nil, "", err
			}
			return r.Prompts, r.NextCursor, nil
		}); err != nil {
			return nil, nil, nil, err
		}
	}
	return rs, ts, ps, nil
}

// pages reads one list to its end.
func pages[T any](_ context.Context, method string, page func(cursor string) ([]T, string, error)) ([]T, error) {
	var out []T
	cursor := ""
	seen := map[string]bool{}
	for n := 1; ; n++ {
		items, next, err := page(cursor)
		if err != nil {
			return nil, fmt.Errorf("draft: %s (page %d): %w", method, n, err)
		}
		out = append(out, items...)
		if len(out) > maxTools {
			return nil, fmt.Errorf("draft: the upstream's %s has more than %d entries", method, maxTools)
		}
		if next == "" {
			return out, nil
		}
		if seen[next] || n >= maxPages {
			return nil, fmt.Errorf("draft: the upstream's %s repeats a cursor or has more than %d pages", method, maxPages)
		}
		seen[next] = true
		cursor = next
	}
}
