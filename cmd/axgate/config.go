package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

const configAbout = `
Checks a configuration file against a command's flags, without running the
command: every key must name one of the command's flags (or a section), and
every value must be one the flag accepts. It prints the value each flag
would have and where it comes from (the file, an AXGATE_* environment
variable, or the default).

A configuration file is one YAML mapping. Its keys are the flag names
(manifest, upstream, tls-cert …; a repeatable flag takes a list); a section
groups flags that share a prefix (tls: {cert: …, key: …} is tls-cert and
tls-key). The sections enforce: (shadow mode per intent) and notify:
(approval webhooks) are checked here as far as the file goes; their
intents are checked against the manifest, and the webhooks' keys read,
when the command starts. --command says whose flags the file configures:
serve (the default) or mcp.

Precedence, lowest first: the flag's default, the AXGATE_* environment
variable (AXGATE_TLS_CERT for --tls-cert), the file, the flag on the
command line.`

// configFlag is the flag that names the configuration file.
const configFlag = "config"

// envPrefix starts the environment variable of every flag.
const envPrefix = "AXGATE_"

// envName is the environment variable of a flag: AXGATE_ and the flag's
// name in upper case with - as _ (AXGATE_TLS_CERT for tls-cert).
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// repeatable is implemented by the values of flags that collect every use
// (--precondition): the file gives them a list.
type repeatable interface{ repeatable() }

func (*conditionFlags) repeatable() {}

// configFile is a configuration file read against a flag set.
type configFile struct {
	path string
	// values holds the file's values of flags, by flag name; a repeatable
	// flag may have several.
	values map[string][]configValue
	// Enforce and Notify are the sections that are not flags.
	Enforce enforceSection
	Notify  notifySection
	// upstreams is mcp's upstreams: section (upstreams.go), and
	// upstreamsGiven whether the file has one; toolSeparator its
	// tool_separator ("" when not given).
	upstreams      []upstreamConfig
	upstreamsGiven bool
	toolSeparator  string
}

// configValue is one value of a flag in the file, with its place.
type configValue struct {
	value     string
	line, col int
}

// Enforcement modes of the enforce: section.
const (
	modeEnforce = "enforce"
	modeShadow  = "shadow"
	// modeShadowForce puts an action whose risk is critical in shadow mode,
	// which plain shadow refuses.
	modeShadowForce = "shadow-force"
)

// enforceSection is the enforce: section: whether the gateway, or an
// action, only records what it would refuse (shadow mode).
//
//	enforce: shadow                # the whole gateway
//	enforce:                       # per intent; "*" for the others
//	  order.place: shadow
//	  "*": enforce
type enforceSection struct {
	// Intents maps intents to modes; "*" is every intent not listed.
	Intents map[string]string
}

// empty says whether the section says nothing.
func (s enforceSection) empty() bool { return len(s.Intents) == 0 }

// notifySection is the notify: section: where approval requests are sent.
//
//	notify:
//	  webhooks:
//	    - url: https://hooks.example.com/axgate
//	      format: axgate            # or slack
//	      secret-env: AXGATE_WEBHOOK_SECRET   # HMAC key (format axgate)
//	      tenants: [acme]           # optional: only these tenants
//	      intents: [order.place]    # optional: only these actions
type notifySection struct {
	Webhooks []webhookConfig
}

// webhookConfig is one webhook of the notify: section.
type webhookConfig struct {
	URL    string
	Format string // "axgate" (signed JSON) or "slack"
	// SecretEnv and SecretFile name where the HMAC key is: the key itself
	// never sits in the file.
	SecretEnv, SecretFile string
	Tenants, Intents      []string
}

// empty says whether the section says nothing.
func (s notifySection) empty() bool { return len(s.Webhooks) == 0 }

// configSections are the top-level keys that are not flags.
var configSections = []string{"enforce", "notify"}

// readConfigFile reads the configuration file at path for the flags of fs.
// All problems are reported at once, each with its line and column.
func readConfigFile(path string, fs *flag.FlagSet) (*configFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes; a configuration is far smaller (is it the right file?)", path, maxConfigBytes)
	}
	return parseConfig(path, data, fs)
}

// maxConfigBytes bounds what is read of a configuration file: a path that
// names a device (/dev/zero) or a huge file is refused, not read forever.
const maxConfigBytes = 1 << 20

// parseConfig reads a configuration file's content.
func parseConfig(path string, data []byte, fs *flag.FlagSet) (*configFile, error) {
	d := &yamlDoc{file: path}
	cf := &configFile{path: path, values: map[string][]configValue{}}
	root, ok := parseConfigYAML(d, data)
	if ok {
		cf.read(d, root, fs)
	}
	if len(d.problems) > 0 {
		return nil, errors.New(strings.Join(d.report(), "\n"))
	}
	return cf, nil
}

// parseConfigYAML reads data as one YAML document; an empty file is an
// empty mapping.
func parseConfigYAML(d *yamlDoc, data []byte) (*yaml.Node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return &yaml.Node{Kind: yaml.MappingNode}, true
		}
		d.failf(nil, "", "not a well-formed YAML document: %v", err)
		return nil, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		d.failf(nil, "", "a configuration is one YAML document; this file holds more (remove the ---)")
		return nil, false
	}
	if len(doc.Content) == 0 {
		return &yaml.Node{Kind: yaml.MappingNode}, true
	}
	if expandedSize(&doc, 0) > maxConfigNodes {
		d.failf(nil, "", "the document expands to more than %d values through its aliases (*name), or nests deeper than %d levels; a configuration needs far fewer", maxConfigNodes, maxAliasDepth)
		return nil, false
	}
	return doc.Content[0], true
}

// maxConfigNodes bounds the values a configuration expands to, aliases
// followed: a few kilobytes of aliases of aliases ("billion laughs") would
// otherwise be read, and printed by config check, millions of times.
const maxConfigNodes = 100_000

// expandedSize counts the nodes of n with aliases followed, stopping as
// soon as the count passes maxConfigNodes (which also ends an alias that
// contains itself).
func expandedSize(n *yaml.Node, depth int) int {
	if n == nil {
		return 0
	}
	if depth > maxAliasDepth {
		return maxConfigNodes + 1
	}
	if n.Kind == yaml.AliasNode {
		return 1 + expandedSize(n.Alias, depth+1)
	}
	size := 1
	for _, c := range n.Content {
		size += expandedSize(c, depth+1)
		if size > maxConfigNodes {
			break
		}
	}
	return size
}

// configKeys returns the flags a file may set (all but --config), sorted,
// and the sections that group flags by prefix.
func configKeys(fs *flag.FlagSet) (flags, prefixes []string) {
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == configFlag {
			return
		}
		flags = append(flags, f.Name)
		if p, _, ok := strings.Cut(f.Name, "-"); ok && !slices.Contains(prefixes, p) {
			prefixes = append(prefixes, p)
		}
	})
	sort.Strings(flags)
	sort.Strings(prefixes)
	return flags, prefixes
}

func (cf *configFile) read(d *yamlDoc, root *yaml.Node, fs *flag.FlagSet) {
	flags, prefixes := configKeys(fs)
	sections := configSections
	if fs.Name() == "mcp" {
		sections = append(slices.Clone(sections), upstreamsKey, toolSeparatorKey)
	}
	allowed := slices.Concat(flags, prefixes, sections)
	slices.Sort(allowed)
	allowed = slices.Compact(allowed)
	var upstreamsAt, separatorAt *yaml.Node
	defer func() {
		switch {
		case upstreamsAt != nil:
			cf.checkUpstreamSet(d)
		case separatorAt != nil:
			d.failf(separatorAt, toolSeparatorKey, "tool_separator joins the names of the upstreams: and of their tools; there is no upstreams: section")
		}
	}()
	for _, f := range d.fields(root, "", allowed...) {
		v := resolve(f.value)
		switch {
		case f.key == "enforce":
			cf.readEnforce(d, f.value)
		case f.key == "notify":
			cf.readNotify(d, f.value)
		case f.key == upstreamsKey && fs.Name() == "mcp":
			cf.readUpstreams(d, f.value)
			upstreamsAt = f.keyAt
		case f.key == toolSeparatorKey && fs.Name() == "mcp":
			cf.readToolSeparator(d, f.value)
			separatorAt = f.keyAt
		case v != nil && v.Kind == yaml.MappingNode && slices.Contains(prefixes, f.key):
			// A section of flags: tls: {cert: …} is tls-cert.
			var sub []string
			for _, name := range flags {
				if rest, ok := strings.CutPrefix(name, f.key+"-"); ok {
					sub = append(sub, rest)
				}
			}
			for _, g := range d.fields(v, f.key, sub...) {
				cf.readFlag(d, fs, f.key+"-"+g.key, g.keyAt, g.value)
			}
		case slices.Contains(flags, f.key):
			cf.readFlag(d, fs, f.key, f.keyAt, f.value)
		default:
			d.failf(f.value, f.key, "want the flag's value, or a mapping of the %s-… flags", f.key)
		}
	}
}

// readFlag records the value of one flag, checking it against a fresh
// value of the flag's type so that a bad one is reported here, at its line.
func (cf *configFile) readFlag(d *yamlDoc, fs *flag.FlagSet, name string, keyAt, n *yaml.Node) {
	if _, dup := cf.values[name]; dup {
		d.failf(keyAt, name, "given twice (once as %s, once in its section)", name)
		return
	}
	f := fs.Lookup(name)
	n = resolve(n)
	var items []*yaml.Node
	_, many := f.Value.(repeatable)
	switch {
	case n != nil && n.Kind == yaml.SequenceNode && many:
		items = n.Content
	case n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null":
		items = []*yaml.Node{n}
	default:
		want := "a single value"
		if many {
			want = "a value or a list of values"
		}
		d.failf(n, name, "want %s, not %s", want, kindOf(n))
		return
	}
	vals := []configValue{}
	for _, it := range items {
		it = resolve(it)
		if it == nil || it.Kind != yaml.ScalarNode || it.ShortTag() == "!!null" {
			d.failf(it, name, "want a value, not %s", kindOf(it))
			continue
		}
		if err := checkFlagValue(fs, name, it.Value); err != nil {
			d.failf(it, name, "%v", err)
			continue
		}
		vals = append(vals, configValue{value: it.Value, line: it.Line, col: it.Column})
	}
	cf.values[name] = vals
}

// checkFlagValue sets value on a copy of the flag set's flag, to see whether
// the flag accepts it, without touching fs.
func checkFlagValue(fs *flag.FlagSet, name, value string) error {
	f := fs.Lookup(name)
	scratch := flag.NewFlagSet("check", flag.ContinueOnError)
	scratch.SetOutput(io.Discard)
	switch v := f.Value.(type) {
	case *conditionFlags:
		var c conditionFlags
		return c.Set(value)
	case interface{ IsBoolFlag() bool }:
		if v.IsBoolFlag() {
			scratch.Bool(name, false, "")
			return scratch.Set(name, value)
		}
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case int:
			scratch.Int(name, 0, "")
		case int64:
			scratch.Int64(name, 0, "")
		case uint:
			scratch.Uint(name, 0, "")
		case uint64:
			scratch.Uint64(name, 0, "")
		case float64:
			scratch.Float64(name, 0, "")
		default:
			if _, isDur := g.Get().(interface{ Hours() float64 }); isDur {
				scratch.Duration(name, 0, "")
			} else {
				scratch.String(name, "", "")
			}
		}
		return scratch.Set(name, value)
	}
	return nil
}

func (cf *configFile) readEnforce(d *yamlDoc, n *yaml.Node) {
	modes := []string{modeEnforce, modeShadow, modeShadowForce}
	n = resolve(n)
	cf.Enforce.Intents = map[string]string{}
	if n != nil && n.Kind == yaml.ScalarNode {
		if m, ok := d.str(n, "enforce"); ok {
			if !slices.Contains(modes, m) {
				d.failf(n, "enforce", "unknown mode %q%s", m, hint(m, modes))
				return
			}
			cf.Enforce.Intents["*"] = m
		}
		return
	}
	if n == nil || n.Kind != yaml.MappingNode {
		d.failf(n, "enforce", "want a mode (enforce, shadow) or a mapping of intents to modes, not %s", kindOf(n))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if _, dup := cf.Enforce.Intents[k.Value]; dup {
			d.failf(k, "enforce", "duplicate intent %q", k.Value)
			continue
		}
		m, ok := d.str(v, "enforce."+k.Value)
		if !ok {
			continue
		}
		if !slices.Contains(modes, m) {
			d.failf(v, "enforce."+k.Value, "unknown mode %q%s", m, hint(m, modes))
			continue
		}
		cf.Enforce.Intents[k.Value] = m
	}
}

func (cf *configFile) readNotify(d *yamlDoc, n *yaml.Node) {
	for _, f := range d.fields(n, "notify", "webhooks") {
		items, ok := d.list(f.value, "notify.webhooks")
		if !ok {
			continue
		}
		for i, it := range items {
			at := fmt.Sprintf("notify.webhooks[%d]", i)
			w := webhookConfig{Format: "axgate"}
			for _, g := range d.fields(it, at, "url", "format", "secret-env", "secret-file", "tenants", "intents") {
				switch g.key {
				case "url":
					if s, ok := d.str(g.value, at+".url"); ok {
						if u, err := url.Parse(s); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
							d.failf(g.value, at+".url", "want an http or https URL (the value is not shown: a webhook's URL may hold its secret)")
						}
						w.URL = s
					}
				case "format":
					if s, ok := d.str(g.value, at+".format"); ok {
						if s != "axgate" && s != "slack" {
							d.failf(g.value, at+".format", "unknown format %q%s", s, hint(s, []string{"axgate", "slack"}))
						}
						w.Format = s
					}
				case "secret-env":
					w.SecretEnv, _ = d.str(g.value, at+".secret-env")
				case "secret-file":
					w.SecretFile, _ = d.str(g.value, at+".secret-file")
				case "tenants":
					w.Tenants, _ = d.strings(g.value, at+".tenants")
				case "intents":
					w.Intents, _ = d.strings(g.value, at+".intents")
				}
			}
			switch {
			case w.URL == "":
				d.failf(it, at, "url is required")
			case w.Format == "axgate" && w.SecretEnv == "" && w.SecretFile == "":
				d.failf(it, at, "a signed webhook needs its key: secret-env or secret-file")
			case w.SecretEnv != "" && w.SecretFile != "":
				d.failf(it, at, "give secret-env or secret-file, not both")
			}
			cf.Notify.Webhooks = append(cf.Notify.Webhooks, w)
		}
	}
}

// Where a flag's value came from.
const (
	sourceDefault = "default"
	sourceFlag    = "flag"
	sourceFile    = "file"
	sourceEnv     = "env"
)

// configured is the outcome of applying the configuration to a flag set.
type configured struct {
	// file is the configuration file read, nil without one.
	file *configFile
	// sources says where each flag's value came from.
	sources map[string]string
}

// sections returns the non-flag sections (empty without a file).
func (c configured) sections() (enforceSection, notifySection) {
	if c.file == nil {
		return enforceSection{}, notifySection{}
	}
	return c.file.Enforce, c.file.Notify
}

// parseConfigured parses the command line of a command that takes --config
// and completes it from the environment and the file (applyConfig): the
// prelude serve and mcp share. When ok is false the command exits with
// status.
func parseConfigured(e *env, fs *flag.FlagSet, args []string) (pos []string, conf configured, status int, ok bool) {
	pos, err := parseFlags(e, fs, args)
	if err != nil {
		return nil, configured{}, flagStatus(err), false
	}
	if conf, err = applyConfig(e, fs); err != nil {
		if mf := (*missingFileError)(nil); errors.As(err, &mf) {
			return nil, configured{}, fileError(e, fs.Name(), err), false
		}
		fmt.Fprintln(e.stderr, err)
		return nil, configured{}, usageError(e, fs, "invalid configuration"), false
	}
	return pos, conf, 0, true
}

// applyConfig completes a parsed flag set from the environment and the
// configuration file (--config, or AXGATE_CONFIG): a flag not given on the
// command line takes the file's value, else its AXGATE_* variable's, else
// keeps its default. It is the one place where that precedence is
// implemented, for every command that takes --config.
func applyConfig(e *env, fs *flag.FlagSet) (configured, error) {
	out := configured{sources: map[string]string{}}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	path := ""
	if f := fs.Lookup(configFlag); f != nil {
		path = f.Value.String()
		if path == "" {
			path = e.getenv(envName(configFlag))
		}
	}
	if path != "" {
		if err := fileFlag(configFlag, path); err != nil {
			return out, err
		}
		cf, err := readConfigFile(path, fs)
		if err != nil {
			return out, err
		}
		out.file = cf
	}
	var problems []string
	fs.VisitAll(func(f *flag.Flag) {
		switch {
		case explicit[f.Name]:
			out.sources[f.Name] = sourceFlag
		case out.file != nil && out.file.values[f.Name] != nil:
			for _, v := range out.file.values[f.Name] {
				if err := fs.Set(f.Name, v.value); err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d:%d: %s: %v", path, v.line, v.col, f.Name, err))
				}
			}
			out.sources[f.Name] = sourceFile
		case e.getenv(envName(f.Name)) != "":
			if err := fs.Set(f.Name, e.getenv(envName(f.Name))); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", envName(f.Name), err))
			}
			out.sources[f.Name] = sourceEnv
		default:
			out.sources[f.Name] = sourceDefault
		}
	})
	if len(problems) > 0 {
		return out, errors.New(strings.Join(problems, "\n"))
	}
	return out, nil
}

// configCommands returns the flag sets of the commands that take --config,
// by command name, for axgate config check.
func configCommands(e *env) map[string]func() *flag.FlagSet {
	return map[string]func() *flag.FlagSet{
		"serve": func() *flag.FlagSet { fs, _, _ := serveFlags(e); return fs },
		"mcp":   func() *flag.FlagSet { fs, _, _ := mcpFlags(e); return fs },
	}
}

// runConfig runs "axgate config check FILE [--command serve|mcp]".
func runConfig(_ context.Context, e *env, args []string) int {
	fs := newFlags(e, "config", "config check FILE [--command serve|mcp]", configAbout)
	command := fs.String("command", "serve", "the command whose flags the file configures")
	pos, err := parseFlags(e, fs, args)
	if err != nil {
		return flagStatus(err)
	}
	if len(pos) != 2 || pos[0] != "check" {
		return usageError(e, fs, "want: config check FILE")
	}
	cmds := configCommands(e)
	mk, ok := cmds[*command]
	if !ok {
		names := make([]string, 0, len(cmds))
		for n := range cmds {
			names = append(names, n)
		}
		sort.Strings(names)
		return usageError(e, fs, "--command %q takes no configuration file (want one of: %s)", *command, strings.Join(names, ", "))
	}
	if err := fileArg(pos[1]); err != nil {
		return fileError(e, "config", err)
	}
	target := mk()
	if err := target.Set(configFlag, pos[1]); err != nil {
		return failf(e, "config", "%v", err)
	}
	// --config above counts as given on the command line; nothing else is.
	c, err := applyConfig(e, target)
	if mf := (*missingFileError)(nil); errors.As(err, &mf) {
		return fileError(e, "config", err)
	}
	if err != nil {
		fmt.Fprintln(e.stderr, err)
		return failf(e, "config", "%s: invalid configuration for axgate %s", pos[1], *command)
	}
	fmt.Fprintf(e.stdout, "%s: valid configuration for axgate %s\n", pos[1], *command)
	target.VisitAll(func(f *flag.Flag) {
		if f.Name == configFlag {
			return
		}
		src := c.sources[f.Name]
		if src == sourceEnv {
			src = "env " + envName(f.Name)
		}
		fmt.Fprintf(e.stdout, "  %-26s %-32s (%s)\n", f.Name, quoteEmpty(redactURL(f.Value.String())), src)
	})
	en, no := c.sections()
	if !en.empty() {
		keys := make([]string, 0, len(en.Intents))
		for k := range en.Intents {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(e.stdout, "  enforce %-18s %s\n", k, en.Intents[k])
		}
	}
	for _, w := range no.Webhooks {
		fmt.Fprintf(e.stdout, "  notify  %-18s %s%s\n", w.Format, webhookShown(w), webhookScope(w))
	}
	if cf := c.file; cf != nil && cf.upstreamsGiven {
		for _, u := range cf.upstreams {
			for _, line := range cf.describe(u) {
				fmt.Fprintf(e.stdout, "  %s\n", line)
			}
		}
		fmt.Fprintf(e.stdout, "  (the upstreams' manifests, programs and credentials' files are read, and the tool names checked for collisions, when axgate %s starts)\n", *command)
	}
	if !en.empty() || !no.empty() {
		fmt.Fprintf(e.stdout, "  (the enforce: and notify: intents are checked against the manifest, and the webhooks' keys read, when axgate %s starts)\n", *command)
	}
	return exitOK
}

// redactURL hides the password of a URL (--redis redis://:secret@host):
// config check prints values, and its output ends up in CI logs.
// A URL's query is hidden too (?token=…), and a value that looks like a
// URL but does not parse is not shown at all: its password cannot be found.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if scheme, _, ok := strings.Cut(s, "://"); ok {
			return scheme + "://(a URL that does not parse; not shown)"
		}
		return s
	}
	if u.User == nil && u.RawQuery == "" {
		return s
	}
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	return u.Redacted()
}

// quoteEmpty shows an empty value as "".
func quoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// webhookShown is how config check shows a webhook: its URL, with the path
// of a Slack incoming webhook hidden (that path is its secret), and where
// its key is read from (never the key).
func webhookShown(w webhookConfig) string {
	shown := redactURL(w.URL)
	if w.Format == "slack" {
		if u, err := url.Parse(w.URL); err == nil {
			shown = u.Scheme + "://" + u.Host + "/…"
		} else {
			shown = "(a URL that does not parse; not shown)"
		}
	}
	switch {
	case w.SecretEnv != "":
		shown += " (key from env " + w.SecretEnv + ")"
	case w.SecretFile != "":
		shown += " (key from file " + w.SecretFile + ")"
	}
	return shown
}

// webhookScope says which requests a webhook hears of.
func webhookScope(w webhookConfig) string {
	var parts []string
	if len(w.Tenants) > 0 {
		parts = append(parts, "tenants "+strings.Join(w.Tenants, ","))
	}
	if len(w.Intents) > 0 {
		parts = append(parts, "intents "+strings.Join(w.Intents, ","))
	}
	if len(parts) == 0 {
		return " for every request"
	}
	return " for " + strings.Join(parts, ", ")
}
