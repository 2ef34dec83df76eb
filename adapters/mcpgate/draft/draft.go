// Package draft writes a first AXAG manifest for an existing MCP server from its tools/list.
//
// The manifest is for a person to review before a gateway enforces it (axgate
// manifest init).
//
// Each upstream tool becomes one action of a reference-form manifest (one
// entity, the server): the tool name is kept as the action's operation_id,
// so the gateway binds the action to the upstream tool by its exact name;
// the intent is "<entity>.<tool name>", the name lowercased and reduced to
// letters, digits and "_" (readFile and read-file both give read_file); the
// description is the tool's; the parameters come from the input schema; the
// safety fields from the tool annotations; upstream_sha256 pins the tool's
// definition (mcpgate.ToolDigest) so that a gateway notices when the
// upstream changes it.
//
// A draft says what the upstream says about itself, and the rest is guessed
// on the safe side. Every field that does not follow from what the upstream
// states (a risk level, whether a person confirms, a renamed intent, a
// schema keyword the manifest cannot express) is returned as a Guess, for
// the person who reviews the draft.
//
// # Safety fields
//
// MCP annotations are hints with defaults (readOnlyHint false,
// destructiveHint true, idempotentHint false, openWorldHint true). The draft
// applies them as follows:
//
//   - readOnlyHint true: action_type read, risk_level low, no confirmation.
//   - otherwise action_type write (never delete: the hints cannot tell a
//     deletion from an overwrite; change it by hand), idempotent as
//     idempotentHint says, and risk_level high with confirmation_required
//     when the tool may destroy (destructiveHint true or absent) or reaches
//     an open world (openWorldHint true or absent: an e-mail sent cannot be
//     unsent), else medium without confirmation.
//   - no annotations at all: the defaults make the tool a destructive,
//     open-world write, so it is drafted as a write of high risk that needs
//     confirmation and is not idempotent. Nothing is guessed from the name:
//     a tool called get_x may still delete.
//
// risk_level and confirmation_required are always guesses, since MCP has no
// such field; action_type and idempotent are guesses when the tool has no
// annotations.
//
// A tool that needs confirmation gets a confirmation_message, listed, that
// names up to three key parameters as {{placeholders}} for the gateway to
// fill with the call's values: "Write file with path {{path}} and content
// {{content}}?". Required parameters come first, then those that name what
// the call acts on (a path, an id, a URL, an address), then other strings;
// optional ones only when they are strings. Without such a parameter the
// gateway's default ("Allow <intent> (<description>), risk high?") stays.
//
// # Parameters
//
// Each property of the input schema becomes a parameter with its type,
// required, description, enum (const as a one-value enum), minimum and
// maximum (exclusive bounds of integers made inclusive; of numbers, made
// inclusive and listed), minLength, maxLength, pattern (when RE2 compiles
// it), format (those the manifest asserts), default, items, maxItems and
// nested properties; local $ref are followed. What the manifest cannot
// express (anyOf, allOf, minItems, uniqueItems, multipleOf, tuple items, a
// type union, other formats, …) is left out of the parameter and listed:
// the upstream still checks it. A parameter without a type is drafted as a
// string and listed. Undeclared arguments are refused by the gateway, even
// where the upstream allowed additional properties (listed); an input
// schema without properties at all leaves the arguments open (listed).
//
// # Command line
//
// axgate manifest init connects an MCP client to the upstream
// (mcp.CommandTransport for a command, mcp.StreamableClientTransport for a
// URL) and calls, as the package example does:
//
//	tools, err := draft.ListTools(ctx, session)
//	out, guesses, err := draft.Draft(tools, draft.Options{
//		ServerName:  session.InitializeResult().ServerInfo.Name,
//		GeneratedAt: time.Now(),
//		Source:      &manifest.Source{URL: upstreamURL, Tool: "axgate manifest init", ToolVersion: version},
//	})
//
// then writes out to standard output and each guess (Guess.String) to
// standard error.
package draft

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/manifest"
)

// Options shape the document around the actions.
type Options struct {
	// Entity names the one entity of the draft, the first half of every
	// intent: a lowercase name of letters, digits and "_". Empty means
	// ServerName without the words "mcp" and "server", listed as a guess.
	Entity string
	// ServerName is the upstream server's name (its Implementation.Name in
	// the initialize result), of which the entity is made when Entity is
	// empty.
	ServerName string
	// Version is the manifest's version; empty means 0.1.0, a draft.
	Version string
	// GeneratedAt dates the draft (generated_at); the zero time leaves it
	// out, so that a draft can be compared with a golden file.
	GeneratedAt time.Time
	// Source says where the draft comes from (source): the upstream URL,
	// the tool and its version. Nil leaves it out.
	Source *manifest.Source
	// Metadata is written as the manifest's metadata object (for example the
	// upstream server's name and version). Nil leaves it out.
	Metadata map[string]any
	// Resources, ResourceTemplates and Prompts are the upstream's lists
	// (ListResourcesAndPrompts), each drafted as a manifest resource or
	// prompt that every caller may use, listed for review; nil drafts none,
	// and a gateway then refuses them all.
	Resources         []*mcp.Resource
	ResourceTemplates []*mcp.ResourceTemplate
	Prompts           []*mcp.Prompt
}

// Guess is a field of the draft that does not follow from what the upstream
// states, or a part of the upstream's definition the draft leaves out: what
// a reviewer must look at before enforcing the manifest.
type Guess struct {
	// Tool is the upstream tool's name; for a resource, a resource template
	// or a prompt, that word and its URI, template or name; empty for the
	// document's own fields.
	Tool string `json:"tool,omitempty"`
	// Intent is the action's intent in the draft; empty when the tool was
	// not drafted.
	Intent string `json:"intent,omitempty"`
	// Pointer is the JSON Pointer of the field in the draft, or where the
	// left-out part would have gone.
	Pointer string `json:"pointer"`
	// Value is the value drafted; nil for what was left out.
	Value any `json:"value,omitempty"`
	// Why says what the guess rests on, or why the part was left out.
	Why string `json:"why"`
}

// String renders the guess on one line, for standard error.
func (g Guess) String() string {
	var b strings.Builder
	if g.Tool != "" {
		b.WriteString(g.Tool)
		b.WriteString(": ")
	}
	b.WriteString(g.Pointer)
	if g.Value != nil {
		v, err := json.Marshal(g.Value)
		if err != nil {
			v = []byte(fmt.Sprint(g.Value))
		}
		b.WriteString(" = ")
		b.Write(v)
	}
	b.WriteString(": ")
	b.WriteString(g.Why)
	return b.String()
}

// defaultEntity is the entity of a draft whose options name none.
const defaultEntity = "upstream"

// DefaultVersion is the version of a draft whose options name none.
const DefaultVersion = "0.1.0"

// The document, in the order a reader expects its fields (a map would sort
// them).
type (
	document struct {
		Version     string           `json:"version"`
		Conformance string           `json:"conformance"`
		GeneratedAt string           `json:"generated_at,omitempty"`
		Source      *manifest.Source `json:"source,omitempty"`
		Metadata    map[string]any   `json:"metadata,omitempty"`
		Entities    []entity         `json:"entities"`
	}
	entity struct {
		Name      string           `json:"name"`
		Actions   []*action        `json:"actions"`
		Resources []*resourceEntry `json:"resources,omitempty"`
		Prompts   []*promptEntry   `json:"prompts,omitempty"`
	}
	action struct {
		Intent               string `json:"intent"`
		OperationID          string `json:"operation_id"`
		ActionType           string `json:"action_type"`
		Description          string `json:"description"`
		RiskLevel            string `json:"risk_level"`
		ConfirmationRequired bool   `json:"confirmation_required"`
		ConfirmationMessage  string `json:"confirmation_message,omitempty"`
		Idempotent           *bool  `json:"idempotent,omitempty"`
		UpstreamSHA256       string `json:"upstream_sha256"`
		// Parameters is nil to leave the arguments open, an empty map to
		// allow none.
		Parameters *map[string]*param `json:"parameters,omitempty"`
	}
	param struct {
		Type        string            `json:"type"`
		Required    bool              `json:"required,omitempty"`
		Description string            `json:"description,omitempty"`
		Enum        []any             `json:"enum,omitempty"`
		Minimum     *float64          `json:"minimum,omitempty"`
		Maximum     *float64          `json:"maximum,omitempty"`
		MinLength   *int              `json:"minLength,omitempty"`
		MaxLength   *int              `json:"maxLength,omitempty"`
		Pattern     string            `json:"pattern,omitempty"`
		Format      string            `json:"format,omitempty"`
		Default     json.RawMessage   `json:"default,omitempty"`
		Items       *param            `json:"items,omitempty"`
		MaxItems    *int              `json:"maxItems,omitempty"`
		Properties  map[string]*param `json:"properties,omitempty"`
	}
)

// toolNameRE is the manifest's operation_id, which is also the character set
// MCP allows in tool names.
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// entityRE is the manifest's entity name (and each half of an intent).
var entityRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Draft writes a manifest (indented JSON) with one action per tool, in the order of tools.
//
// It also returns the guesses a reviewer must check, in document order. A
// tool whose name the manifest cannot bind (outside MCP's letters, digits,
// "_", "-" and "." or longer than 128) is left out and listed. It fails for
// a nil tool, a tool without a name, two tools of one name, an input schema
// that is not JSON, or options that would not load (an entity that is not a
// lowercase name).
//
// The draft loads with manifest.Parse and passes axgate lint at level
// basic.
func Draft(tools []*mcp.Tool, opts Options) ([]byte, []Guess, error) {
	ent := opts.Entity
	if ent == "" {
		ent = entityName(opts.ServerName)
	}
	if !entityRE.MatchString(ent) {
		return nil, nil, fmt.Errorf("draft: entity %q is not a lowercase name of letters, digits and _ (entityName makes one)", ent)
	}
	doc := document{Version: opts.Version, Conformance: "basic", Source: opts.Source, Metadata: opts.Metadata}
	if doc.Version == "" {
		doc.Version = DefaultVersion
	}
	if !opts.GeneratedAt.IsZero() {
		doc.GeneratedAt = opts.GeneratedAt.UTC().Format(time.RFC3339)
	}
	d := &drafter{entity: ent, names: map[string]bool{}, intents: map[string]string{}}
	switch {
	case opts.Entity != "":
	case opts.ServerName != "":
		d.guess("", "", "/entities/0/name", ent, fmt.Sprintf("made of the server's name %q: every intent reads %s.<tool>", opts.ServerName, ent))
	default:
		d.guess("", "", "/entities/0/name", ent, "no entity or server name given: every intent reads "+ent+".<tool>")
	}
	acts := []*action{}
	for _, t := range tools {
		a, err := d.action(t, len(acts))
		if err != nil {
			return nil, nil, err
		}
		if a != nil {
			acts = append(acts, a)
		}
	}
	doc.Entities = []entity{{Name: ent, Actions: acts}}
	doc.Entities[0].Resources, doc.Entities[0].Prompts = d.entries(opts)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, nil, fmt.Errorf("draft: %w", err)
	}
	return buf.Bytes(), d.guesses, nil
}

// drafter holds what the actions of one draft share.
type drafter struct {
	entity  string
	names   map[string]bool   // tool names seen
	intents map[string]string // intent → tool name
	guesses []Guess
}

func (d *drafter) guess(tool, intent, ptr string, v any, why string) {
	d.guesses = append(d.guesses, Guess{Tool: tool, Intent: intent, Pointer: ptr, Value: v, Why: why})
}

// action drafts the action of tool t, the i-th of the draft, or returns nil
// when the manifest cannot bind t.
func (d *drafter) action(t *mcp.Tool, i int) (*action, error) {
	if t == nil {
		return nil, errors.New("draft: a nil tool")
	}
	if t.Name == "" {
		return nil, errors.New("draft: a tool without a name")
	}
	if d.names[t.Name] {
		return nil, fmt.Errorf("draft: the upstream lists tool %q twice", t.Name)
	}
	d.names[t.Name] = true
	ptr := "/entities/0/actions/" + strconv.Itoa(i)
	if !toolNameRE.MatchString(t.Name) {
		d.guess(t.Name, "", ptr, nil, "not drafted: a tool name of more than 128 characters or with characters other than letters, digits, _, - and . cannot be bound (the gateway hides the tool)")
		return nil, nil
	}
	pin, err := mcpgate.ToolDigest(t)
	if err != nil {
		return nil, fmt.Errorf("draft: %w", err)
	}
	a := &action{OperationID: t.Name, Description: t.Description, UpstreamSHA256: pin}
	a.Intent = d.intent(t.Name, ptr)
	if a.Description == "" {
		a.Description = describe(t)
		d.guess(t.Name, a.Intent, ptr+"/description", a.Description, "the tool has no description: say what it does and to what")
	}
	d.safety(t, a, ptr)
	var schema any
	raw, err := json.Marshal(t.InputSchema)
	if err == nil {
		err = json.Unmarshal(raw, &schema)
	}
	if err != nil {
		return nil, fmt.Errorf("draft: the input schema of tool %q is not JSON: %w", t.Name, err)
	}
	s := &schemaReader{d: d, tool: t.Name, intent: a.Intent, root: schema}
	a.Parameters = s.parameters(schema, ptr+"/parameters")
	if a.ConfirmationRequired && a.Parameters != nil {
		if msg := confirmationMessage(t.Name, *a.Parameters, requiredOrder(schema)); msg != "" {
			a.ConfirmationMessage = msg
			d.guess(t.Name, a.Intent, ptr+"/confirmation_message", msg, fmt.Sprintf("what a person is asked before each call: the tool's name and at most %d key parameters (required first, then paths, ids and other strings); reword it to say what the call does", maxMessageParams))
		}
	}
	return a, nil
}

// maxMessageParams bounds the placeholders of a drafted
// confirmation_message: the key parameters, not all of them.
const maxMessageParams = 3

// placeholderNameRE is a parameter name a drafted {{placeholder}} may
// carry: one that reads as a word in the message and that the manifest's
// placeholder syntax takes as it is.
var placeholderNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)

// identifierWords mark a parameter that names what the call acts on: a
// path, an id, an address. These come first in a confirmation message.
var identifierWords = []string{"path", "file", "dir", "folder", "url", "uri", "id", "name", "key", "source", "destination", "target", "to", "recipient", "email", "address", "repo", "branch", "channel", "table"}

// requiredOrder returns the position of each name in the input schema's
// required list: the upstream's own order of its key parameters (source
// before destination), which the drafted parameters, a map, lose.
func requiredOrder(schema any) map[string]int {
	order := map[string]int{}
	m, _ := schema.(map[string]any)
	rs, _ := m["required"].([]any)
	for i, r := range rs {
		if name, ok := r.(string); ok {
			if _, dup := order[name]; !dup {
				order[name] = i
			}
		}
	}
	return order
}

// confirmationMessage drafts the confirmation_message of a tool that needs
// confirmation, e.g. "Write file with path {{path}} and content
// {{content}}?". It picks at most
// maxMessageParams top-level parameters: required before optional, then
// those naming what the call acts on (a path, an id, a URL: by name or
// format), then other strings, then numbers and booleans; arrays and
// objects only when required; optional ones only when they are strings;
// ties in the order of the upstream's required list (order), then by name.
// It returns "" when no parameter fits, leaving the gateway's default
// ("Allow <intent> (<description>), risk high?").
func confirmationMessage(tool string, params map[string]*param, order map[string]int) string {
	type cand struct {
		name string
		rank int
		pos  int
	}
	var cands []cand
	for name, p := range params {
		if p == nil || !placeholderNameRE.MatchString(name) {
			continue
		}
		rank := 0
		switch {
		case p.Type == "string" && (isIdentifier(name) || p.Format == "uri" || p.Format == "email" || p.Format == "uuid"):
			rank = 0
		case p.Type == "string":
			rank = 1
		case !p.Required:
			continue
		case p.Type == "integer" || p.Type == "number" || p.Type == "boolean":
			rank = 2
		default:
			rank = 3
		}
		if !p.Required {
			rank += 10
		}
		pos, ok := order[name]
		if !ok {
			pos = len(order)
		}
		cands = append(cands, cand{name, rank, pos})
	}
	if len(cands) == 0 {
		return ""
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if a.pos != b.pos {
			return a.pos < b.pos
		}
		return a.name < b.name
	})
	if len(cands) > maxMessageParams {
		cands = cands[:maxMessageParams]
	}
	parts := make([]string, len(cands))
	for i, c := range cands {
		parts[i] = strings.ReplaceAll(intentName(c.name), "_", " ") + " {{" + c.name + "}}"
	}
	list := parts[0]
	if n := len(parts); n > 1 {
		list = strings.Join(parts[:n-1], ", ") + " and " + parts[n-1]
	}
	verb := strings.ReplaceAll(intentName(tool), "_", " ")
	return strings.ToUpper(verb[:1]) + verb[1:] + " with " + list + "?"
}

// isIdentifier reports whether a parameter name reads as what the call acts
// on: one of identifierWords, alone or as a word of a longer name (file_path,
// userId, repo-name).
func isIdentifier(name string) bool {
	for _, w := range strings.Split(intentName(name), "_") {
		if slices.Contains(identifierWords, w) {
			return true
		}
	}
	return false
}

// describe words a description for a tool that has none.
func describe(t *mcp.Tool) string {
	title := t.Title
	if title == "" && t.Annotations != nil {
		title = t.Annotations.Title
	}
	if title != "" {
		return title + " (upstream tool " + t.Name + ")"
	}
	return "Calls the upstream tool " + t.Name + "."
}

// intent returns the action's intent: the entity and the tool name as a
// lowercase name, numbered when two tool names give the same one.
func (d *drafter) intent(name, ptr string) string {
	verb := intentName(name)
	intent := d.entity + "." + verb
	for n := 2; d.intents[intent] != ""; n++ {
		intent = d.entity + "." + verb + "_" + strconv.Itoa(n)
	}
	d.intents[intent] = name
	switch {
	case intent != d.entity+"."+verb:
		d.guess(name, intent, ptr+"/intent", intent, "another tool's name gives the same intent "+d.entity+"."+verb+"; numbered")
	case verb != name:
		d.guess(name, intent, ptr+"/intent", intent, "the tool name is not a lowercase name of letters, digits and _; rewritten")
	}
	return intent
}

// safety sets action_type, risk_level, confirmation_required and idempotent
// from the annotations (see the package documentation).
func (d *drafter) safety(t *mcp.Tool, a *action, ptr string) {
	ann := t.Annotations
	g := func(field string, v any, why string) { d.guess(t.Name, a.Intent, ptr+"/"+field, v, why) }
	if ann == nil {
		no := false
		a.ActionType, a.RiskLevel, a.ConfirmationRequired, a.Idempotent = string(manifest.Write), string(manifest.RiskHigh), true, &no
		g("action_type", a.ActionType, "no annotations: by MCP's defaults the tool may modify its environment (readOnlyHint false)")
		g("risk_level", a.RiskLevel, "no annotations: by MCP's defaults the tool may destroy and reaches an open world")
		g("confirmation_required", true, "high risk: a person confirms each call")
		g("idempotent", false, "no annotations: by MCP's default a repeated call may have further effect")
		return
	}
	if ann.ReadOnlyHint {
		a.ActionType, a.RiskLevel = string(manifest.Read), string(manifest.RiskLow)
		g("risk_level", a.RiskLevel, "readOnlyHint: reading is low risk; raise it if the tool reads secrets or personal data")
		g("confirmation_required", false, "low risk: calls run without a person confirming")
		return
	}
	idem := ann.IdempotentHint
	a.ActionType, a.Idempotent = string(manifest.Write), &idem
	destructive := ann.DestructiveHint == nil || *ann.DestructiveHint
	openWorld := ann.OpenWorldHint == nil || *ann.OpenWorldHint
	var why string
	switch {
	case destructive:
		a.RiskLevel, why = string(manifest.RiskHigh), "destructiveHint "+hint(ann.DestructiveHint)+": the tool may destroy what it writes over"
	case openWorld:
		a.RiskLevel, why = string(manifest.RiskHigh), "openWorldHint "+hint(ann.OpenWorldHint)+": what the tool does outside cannot be taken back"
	default:
		a.RiskLevel, why = string(manifest.RiskMedium), "destructiveHint false, openWorldHint false: an additive write in a closed world"
	}
	a.ConfirmationRequired = a.RiskLevel == string(manifest.RiskHigh)
	g("risk_level", a.RiskLevel, why)
	if a.ConfirmationRequired {
		g("confirmation_required", true, "high risk: a person confirms each call")
	} else {
		g("confirmation_required", false, "medium risk: calls run without a person confirming")
	}
}

// hint words a pointer hint: its value, or that it is absent.
func hint(b *bool) string {
	if b == nil {
		return "absent (default true)"
	}
	return strconv.FormatBool(*b)
}

// intentName turns a tool name into the second half of an intent.
//
// In order: camelCase split with "_", lowercased, every character other
// than a letter or digit made "_", runs of "_" folded, and "tool_" put
// before a name that does not start with a letter. read_file stays
// read_file; readFile and read-file give read_file.
func intentName(name string) string {
	var b strings.Builder
	var prev rune
	for _, r := range name {
		switch {
		case r >= 'A' && r <= 'Z':
			if (prev >= 'a' && prev <= 'z') || (prev >= '0' && prev <= '9') {
				b.WriteByte('_')
			}
			b.WriteRune(r + 'a' - 'A')
		case (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		prev = r
	}
	s := b.String()
	for strings.Contains(s, "__") {
		s = strings.ReplaceAll(s, "__", "_")
	}
	s = strings.Trim(s, "_")
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		s = "tool_" + s
		s = strings.TrimSuffix(s, "_")
	}
	return s
}

// entityName makes an entity name of an MCP server's name (Implementation.Name).
//
// It works as intentName, without the words "mcp" and "server" at
// either end ("secure-filesystem-server" gives secure_filesystem,
// "mcp-server-github" github); defaultEntity when nothing is left.
func entityName(serverName string) string {
	words := strings.Split(intentName(serverName), "_")
	drop := func(w string) bool { return w == "mcp" || w == "server" || w == "tool" }
	for len(words) > 0 && drop(words[0]) {
		words = words[1:]
	}
	for len(words) > 0 && drop(words[len(words)-1]) {
		words = words[:len(words)-1]
	}
	s := strings.Join(words, "_")
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return defaultEntity
	}
	return s
}
