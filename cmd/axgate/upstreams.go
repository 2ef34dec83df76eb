package main

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	mcpgw "github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// The sections of mcp's configuration file that configure several
// upstreams (upstreams: and tool_separator:).
const (
	upstreamsKey     = "upstreams"
	toolSeparatorKey = "tool_separator"
)

// maxUpstreams bounds the upstreams of one gateway: each holds sessions,
// children and an enforcer.
const maxUpstreams = 64

// upstreamConfig is one entry of the upstreams: section of mcp's
// configuration file.
//
//	upstreams:
//	  - name: files
//	    command: npx -y @modelcontextprotocol/server-filesystem /srv/files
//	    manifest: files.yaml          # or the --manifest actions naming it
//	    sandbox: {mode: on, ro: [/srv/files]}
//	  - name: search
//	    url: http://search:9000/mcp
//	    credentials: {header_files: {X-Api-Key: /run/secrets/search-key}}
type upstreamConfig struct {
	name, prefix string
	line         int // where the entry starts, for the problems found at start

	url             string
	command         string
	args, env       []string
	dir             string
	manifest        string // "" : the --manifest actions naming it
	creds           upstreamCredsConfig
	sandbox         sandboxFlags
	roots           rootFlags
	forwardRoots    bool
	allowSampling   bool
	allowElicit     bool
	keepUnchecked   bool
	callTimeout     time.Duration
	connectTimeout  time.Duration
	relistInterval  time.Duration
	backoffMin      time.Duration
	backoffMax      time.Duration
	maxTools        int
	maxToolPages    int
	credentialsLine int
}

// upstreamCredsConfig is an upstream's credentials: section, the choices
// of the --upstream-* credential flags.
//
//	credentials:
//	  header_files: {X-Api-Key: /run/secrets/key}     # url
//	  env_files: {API_KEY: /run/secrets/key}          # command
//	  client_credentials: {token_url: …, client_id: …, client_secret_file: …, scopes: [a, b]}
//	  token_exchange: {token_url: …, client_id: …, client_secret_file: …, audience: …, scopes: [a]}
type upstreamCredsConfig struct {
	headerFiles, envFiles map[string]string
	clientCredentials     *oauthClientConfig
	tokenExchange         *oauthClientConfig
}

// oauthClientConfig is the gateway's client at a token endpoint.
type oauthClientConfig struct {
	tokenURL, clientID, secretFile, audience string
	scopes                                   []string
}

// empty says whether the section gives no credentials.
func (c upstreamCredsConfig) empty() bool {
	return len(c.headerFiles) == 0 && len(c.envFiles) == 0 && c.clientCredentials == nil && c.tokenExchange == nil
}

// upstreamKeys are the keys of an upstreams: entry.
var upstreamKeys = []string{"name", "prefix", "url", "command", "args", "env", "dir", "manifest", "credentials", "sandbox",
	"roots", "forward_client_roots", "allow_sampling", "allow_elicitation", "keep_unchecked_content",
	"call_timeout", "connect_timeout", "relist_interval", "restart_backoff_min", "restart_backoff_max", "max_tools", "max_tool_pages"}

// upstreamNameRE is what Named.Name allows.
var upstreamNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// toolNameChars are the characters MCP allows in a tool name (SEP-986),
// hence in a prefix and a separator.
var toolNameChars = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// readToolSeparator reads tool_separator: the string between an upstream's
// name and its tools' names in the default prefix.
func (cf *configFile) readToolSeparator(d *yamlDoc, n *yaml.Node) {
	s, ok := d.str(n, toolSeparatorKey)
	if !ok {
		return
	}
	if len(s) > 8 || !toolNameChars.MatchString(s) {
		d.failf(n, toolSeparatorKey, "want 1 to 8 of the characters MCP allows in tool names (letters, digits, _ - .), not %q", s)
		return
	}
	cf.toolSeparator = s
}

// readUpstreams reads the upstreams: section. Each problem is reported at
// its line; the checks that need more than the file (the manifests, the
// programs, the credentials' files) are made when the gateway starts.
func (cf *configFile) readUpstreams(d *yamlDoc, n *yaml.Node) {
	items, ok := d.list(n, upstreamsKey)
	if !ok {
		return
	}
	if len(items) == 0 {
		d.failf(n, upstreamsKey, "want at least one upstream")
		return
	}
	if len(items) > maxUpstreams {
		d.failf(n, upstreamsKey, "%d upstreams; at most %d", len(items), maxUpstreams)
		return
	}
	cf.upstreamsGiven = true
	for i, it := range items {
		at := fmt.Sprintf("upstreams[%d]", i)
		u := upstreamConfig{line: resolve(it).Line, sandbox: sandboxFlags{mode: "off"}}
		for _, f := range d.fields(it, at, upstreamKeys...) {
			key := at + "." + f.key
			switch f.key {
			case "name":
				if s, ok := d.str(f.value, key); ok {
					if !upstreamNameRE.MatchString(s) {
						d.failf(f.value, key, "want 1 to 64 letters, digits, _ or -, not %q", s)
					}
					u.name = s
					at = fmt.Sprintf("upstreams[%d] (%s)", i, s)
				}
			case "prefix":
				if s, ok := d.str(f.value, key); ok {
					if len(s) > 64 || !toolNameChars.MatchString(s) {
						d.failf(f.value, key, "want up to 64 of the characters MCP allows in tool names (letters, digits, _ - .), not %q", s)
					}
					u.prefix = s
				}
			case "url":
				if s, ok := d.str(f.value, key); ok {
					if !isHTTPURL(s) {
						d.failf(f.value, key, "want an http or https URL, not %q", redactURL(s))
					}
					u.url = s
				}
			case "command":
				if s, ok := d.str(f.value, key); ok {
					words, err := splitCommand(s)
					if err != nil {
						d.failf(f.value, key, "%v", err)
						continue
					}
					u.command, u.args = words[0], append(words[1:], u.args...)
				}
			case "args":
				if ss, ok := d.strings(f.value, key); ok {
					u.args = append(u.args, ss...)
				}
			case "env":
				u.env = d.envList(f.value, key)
			case "dir":
				u.dir, _ = d.str(f.value, key)
			case "manifest":
				u.manifest, _ = d.str(f.value, key)
			case "credentials":
				u.credentialsLine = resolve(f.value).Line
				u.creds = d.upstreamCreds(f.value, key)
			case "sandbox":
				u.sandbox = d.sandbox(f.value, key)
			case "roots":
				if ss, ok := d.strings(f.value, key); ok {
					for _, s := range ss {
						if err := u.roots.Set(s); err != nil {
							d.failf(f.value, key, "%v", err)
						}
					}
				}
			case "forward_client_roots":
				u.forwardRoots, _ = d.boolean(f.value, key)
			case "allow_sampling":
				u.allowSampling, _ = d.boolean(f.value, key)
			case "allow_elicitation":
				u.allowElicit, _ = d.boolean(f.value, key)
			case "keep_unchecked_content":
				u.keepUnchecked, _ = d.boolean(f.value, key)
			case "call_timeout":
				u.callTimeout = d.duration(f.value, key)
			case "connect_timeout":
				u.connectTimeout = d.duration(f.value, key)
			case "relist_interval":
				u.relistInterval = d.duration(f.value, key)
			case "restart_backoff_min":
				u.backoffMin = d.duration(f.value, key)
			case "restart_backoff_max":
				u.backoffMax = d.duration(f.value, key)
			case "max_tools":
				u.maxTools = d.positive(f.value, key)
			case "max_tool_pages":
				u.maxToolPages = d.positive(f.value, key)
			}
		}
		d.checkUpstream(it, at, &u)
		cf.upstreams = append(cf.upstreams, u)
	}
}

// checkUpstream reports what is wrong with one entry as a whole.
func (d *yamlDoc) checkUpstream(n *yaml.Node, at string, u *upstreamConfig) {
	switch {
	case u.name == "":
		d.failf(n, at, "name is required")
	case u.url == "" && u.command == "":
		d.failf(n, at, "give the upstream: url or command")
	case u.url != "" && u.command != "":
		d.failf(n, at, "give url or command, not both")
	case u.url != "" && (len(u.args) > 0 || len(u.env) > 0 || u.dir != ""):
		d.failf(n, at, "args, env and dir are for a command")
	case u.command == "" && len(u.args) > 0:
		d.failf(n, at, "args go with command")
	case u.url != "" && len(u.creds.envFiles) > 0:
		d.failf(n, at, "credentials.env_files are for a command (its child's environment); a url takes header_files")
	case u.command != "" && (len(u.creds.headerFiles) > 0 || u.creds.clientCredentials != nil || u.creds.tokenExchange != nil):
		d.failf(n, at, "credentials.header_files, client_credentials and token_exchange are for a url; a command takes env_files")
	case u.sandbox.mode != "off" && u.command == "":
		d.failf(n, at, "sandbox contains the children of a command; a url runs no child")
	case len(u.roots) > 0 && u.forwardRoots:
		d.failf(n, at, "roots and forward_client_roots contradict each other: the upstream's roots are the operator's or the client's")
	case u.backoffMin > 0 && u.backoffMax > 0 && u.backoffMin > u.backoffMax:
		d.failf(n, at, "restart_backoff_min is above restart_backoff_max")
	}
}

// envList reads env: a mapping NAME: VALUE, or a list of NAME=VALUE.
func (d *yamlDoc) envList(n *yaml.Node, at string) []string {
	var out envFlags
	if r := resolve(n); r != nil && r.Kind == yaml.MappingNode {
		for _, f := range d.anyFields(r, at) {
			v, ok := d.str(f.value, at+"."+f.key)
			if !ok {
				continue
			}
			if err := out.Set(f.key + "=" + v); err != nil {
				d.failf(f.keyAt, at, "%v", err)
			}
		}
		return out
	}
	ss, _ := d.strings(n, at)
	for _, s := range ss {
		if err := out.Set(s); err != nil {
			d.failf(n, at, "%v", err)
		}
	}
	return out
}

// anyFields returns the members of a mapping whose keys are the file's own
// (environment variables, header names), refusing repeated ones.
func (d *yamlDoc) anyFields(n *yaml.Node, at string) []field {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		d.failf(n, at, "want a mapping (key: value lines), not %s", kindOf(n))
		return nil
	}
	var keys []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := resolve(n.Content[i]); k.Kind == yaml.ScalarNode {
			keys = append(keys, k.Value)
		}
	}
	return d.fields(n, at, keys...)
}

// fileMap reads a mapping NAME: PATH (header_files, env_files).
func (d *yamlDoc) fileMap(n *yaml.Node, at string) map[string]string {
	out := map[string]string{}
	for _, f := range d.anyFields(n, at) {
		p, ok := d.str(f.value, at+"."+f.key)
		if !ok {
			continue
		}
		var ff fileFlags
		if err := ff.Set(f.key + "=" + p); err != nil {
			d.failf(f.keyAt, at, "want NAME: PATH, e.g. \"X-Api-Key: /run/secrets/api-key\"")
			continue
		}
		out[f.key] = p
	}
	return out
}

// upstreamCreds reads an upstream's credentials: section.
func (d *yamlDoc) upstreamCreds(n *yaml.Node, at string) upstreamCredsConfig {
	var c upstreamCredsConfig
	for _, f := range d.fields(n, at, "header_files", "env_files", "client_credentials", "token_exchange") {
		key := at + "." + f.key
		switch f.key {
		case "header_files":
			c.headerFiles = d.fileMap(f.value, key)
		case "env_files":
			c.envFiles = d.fileMap(f.value, key)
		case "client_credentials":
			c.clientCredentials = d.oauthClient(f.value, key, false)
		case "token_exchange":
			c.tokenExchange = d.oauthClient(f.value, key, true)
		}
	}
	return c
}

// oauthClient reads a client_credentials: or token_exchange: section.
func (d *yamlDoc) oauthClient(n *yaml.Node, at string, exchange bool) *oauthClientConfig {
	keys := []string{"token_url", "client_id", "client_secret_file", "scopes"}
	if exchange {
		keys = append(keys, "audience")
	}
	c := &oauthClientConfig{}
	for _, f := range d.fields(n, at, keys...) {
		key := at + "." + f.key
		switch f.key {
		case "token_url":
			if s, ok := d.str(f.value, key); ok {
				if !isHTTPURL(s) {
					d.failf(f.value, key, "want an http or https URL, not %q", redactURL(s))
				}
				c.tokenURL = s
			}
		case "client_id":
			c.clientID, _ = d.str(f.value, key)
		case "client_secret_file":
			c.secretFile, _ = d.str(f.value, key)
		case "audience":
			c.audience, _ = d.str(f.value, key)
		case "scopes":
			c.scopes, _ = d.strings(f.value, key)
		}
	}
	for _, req := range keys {
		if req == "scopes" {
			continue
		}
		if (req == "token_url" && c.tokenURL == "") || (req == "client_id" && c.clientID == "") ||
			(req == "client_secret_file" && c.secretFile == "") || (req == "audience" && c.audience == "") {
			d.failf(n, at, "%s is required", req)
		}
	}
	return c
}

// sandbox reads sandbox: a mode (on, optional, off), or a mapping of mode,
// ro, rw and network.
func (d *yamlDoc) sandbox(n *yaml.Node, at string) sandboxFlags {
	s := sandboxFlags{mode: "off"}
	modes := []string{"on", "optional", "off"}
	mode := func(v *yaml.Node, key string) {
		r := resolve(v)
		if r != nil && r.Kind == yaml.ScalarNode && r.ShortTag() == "!!bool" {
			// YAML 1.1 reads a bare on and off as booleans.
			if r.Value == "true" || strings.EqualFold(r.Value, "on") || strings.EqualFold(r.Value, "yes") {
				s.mode = "on"
			} else {
				s.mode = "off"
			}
			return
		}
		m, ok := d.str(v, key)
		if !ok {
			return
		}
		if m != "on" && m != "optional" && m != "off" {
			d.failf(v, key, "want on, optional or off, not %q%s", m, hint(m, modes))
			return
		}
		s.mode = m
	}
	if r := resolve(n); r != nil && r.Kind == yaml.ScalarNode {
		mode(n, at)
		return s
	}
	for _, f := range d.fields(n, at, "mode", "ro", "rw", "network") {
		key := at + "." + f.key
		switch f.key {
		case "mode":
			mode(f.value, key)
		case "ro", "rw":
			ss, _ := d.strings(f.value, key)
			for _, p := range ss {
				var err error
				if f.key == "ro" {
					err = s.ro.Set(p)
				} else {
					err = s.rw.Set(p)
				}
				if err != nil {
					d.failf(f.value, key, "%v", err)
				}
			}
		case "network":
			s.network, _ = d.boolean(f.value, key)
		}
	}
	if msg := s.check(true); msg != "" {
		d.failf(n, at, "%s", strings.NewReplacer("--sandbox-ro", "ro", "--sandbox-rw", "rw", "--sandbox-network", "network", "--sandbox", "mode").Replace(msg))
	}
	return s
}

// duration reads a duration such as 30s.
func (d *yamlDoc) duration(n *yaml.Node, at string) time.Duration {
	s, ok := d.str(n, at)
	if !ok {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		d.failf(n, at, "want a positive duration such as 30s, not %q", s)
		return 0
	}
	return v
}

// positive reads a whole number above 0.
func (d *yamlDoc) positive(n *yaml.Node, at string) int {
	r := resolve(n)
	if r == nil || r.Kind != yaml.ScalarNode || r.ShortTag() != "!!int" {
		d.failf(n, at, "want a whole number, not %s", kindOf(n))
		return 0
	}
	v, err := strconv.Atoi(r.Value)
	if err != nil || v < 1 {
		d.failf(n, at, "want a whole number above 0, not %s", r.Value)
		return 0
	}
	return v
}

// checkUpstreamSet reports what is wrong with the upstreams together: two
// of one name, or of one tool prefix (every tool name of one would be the
// other's too). The gateway checks the tools' names themselves when it
// starts: a call goes to the upstream of the longest prefix its name
// starts with, and a name that would route elsewhere is refused, naming
// both upstreams.
func (cf *configFile) checkUpstreamSet(d *yamlDoc) {
	names := map[string]int{}
	prefixes := map[string]int{}
	for i, u := range cf.upstreams {
		if u.name == "" {
			continue
		}
		at := &yaml.Node{Line: u.line, Column: 1}
		if j, dup := names[u.name]; dup {
			d.failf(at, upstreamsKey, "upstreams[%d] and upstreams[%d] are both named %q", j, i, u.name)
			continue
		}
		names[u.name] = i
		p := cf.prefixOf(u)
		if j, dup := prefixes[p]; dup {
			d.failf(at, upstreamsKey, "the tool prefixes of %s and %s are both %q: each upstream needs its own", cf.upstreams[j].name, u.name, p)
		}
		prefixes[p] = i
	}
}

// prefixOf is an upstream's tool prefix: its prefix:, or its name and the
// tool separator.
func (cf *configFile) prefixOf(u upstreamConfig) string {
	if u.prefix != "" {
		return u.prefix
	}
	sep := cf.toolSeparator
	if sep == "" {
		sep = mcpgw.DefaultToolSeparator
	}
	return u.name + sep
}

// describe is how config check shows an upstream: what it runs or reaches,
// its manifest, prefix, credentials (where they are read from, never
// their values), sandbox and bounds. The values of env: are not shown (a
// child's environment often holds a key).
func (cf *configFile) describe(u upstreamConfig) []string {
	var out []string
	what := "url " + redactURL(u.url)
	if u.command != "" {
		what = "command " + strings.Join(append([]string{u.command}, u.args...), " ")
	}
	out = append(out, fmt.Sprintf("upstream %s: %s (tools %s…)", u.name, what, cf.prefixOf(u)))
	if u.manifest != "" {
		out = append(out, "  manifest "+u.manifest)
	} else {
		out = append(out, "  manifest: the actions of --manifest whose upstream is "+u.name)
	}
	if u.dir != "" {
		out = append(out, "  dir "+u.dir)
	}
	if len(u.env) > 0 {
		var names []string
		for _, kv := range u.env {
			k, _, _ := strings.Cut(kv, "=")
			names = append(names, k)
		}
		out = append(out, "  env "+strings.Join(names, " ")+" (values not shown)")
	}
	files := func(kind string, m map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, fmt.Sprintf("  credentials %s %s from file %s", kind, k, m[k]))
		}
	}
	files("header", u.creds.headerFiles)
	files("env", u.creds.envFiles)
	if c := u.creds.clientCredentials; c != nil {
		out = append(out, fmt.Sprintf("  credentials client_credentials at %s as %s (secret from file %s)", redactURL(c.tokenURL), c.clientID, c.secretFile))
	}
	if c := u.creds.tokenExchange; c != nil {
		out = append(out, fmt.Sprintf("  credentials token_exchange at %s as %s for audience %s (secret from file %s)", redactURL(c.tokenURL), c.clientID, c.audience, c.secretFile))
	}
	if s := u.sandbox; s.mode != "off" {
		line := "  sandbox " + s.mode
		if len(s.ro) > 0 {
			line += " ro " + strings.Join(s.ro, ",")
		}
		if len(s.rw) > 0 {
			line += " rw " + strings.Join(s.rw, ",")
		}
		if s.network {
			line += " network"
		}
		out = append(out, line)
	}
	var bounds []string
	for _, b := range []struct {
		key string
		d   time.Duration
	}{{"call_timeout", u.callTimeout}, {"connect_timeout", u.connectTimeout}, {"relist_interval", u.relistInterval},
		{"restart_backoff_min", u.backoffMin}, {"restart_backoff_max", u.backoffMax}} {
		if b.d > 0 {
			bounds = append(bounds, b.key+" "+b.d.String())
		}
	}
	if u.maxTools > 0 {
		bounds = append(bounds, "max_tools "+strconv.Itoa(u.maxTools))
	}
	if u.maxToolPages > 0 {
		bounds = append(bounds, "max_tool_pages "+strconv.Itoa(u.maxToolPages))
	}
	if len(bounds) > 0 {
		out = append(out, "  "+strings.Join(bounds, ", "))
	}
	if len(u.roots) > 0 {
		out = append(out, "  roots "+strings.Join(u.roots, ","))
	}
	for _, b := range []struct {
		key string
		on  bool
	}{{"forward_client_roots", u.forwardRoots}, {"allow_sampling", u.allowSampling}, {"allow_elicitation", u.allowElicit}, {"keep_unchecked_content", u.keepUnchecked}} {
		if b.on {
			out = append(out, "  "+b.key)
		}
	}
	return out
}
