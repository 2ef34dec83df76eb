package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
)

// Named is one upstream of a gateway with several (NewMulti).
type Named struct {
	// Name names the upstream in logs, metrics, Upstreams and refusals:
	// letters, digits, '_' and '-', unique within the gateway. Only a
	// gateway's one upstream may have none (New's).
	Name string
	// Prefix is put before the names of the upstream's tools and prompts
	// at the front, and taken off a call's name to route it here ("":
	// Name followed by DefaultToolSeparator). The prefixed names must be
	// valid MCP tool names, and no two may be equal.
	Prefix string
	// Enforcer enforces the manifest of this upstream's tools, resources
	// and prompts. Its manifest names them as the upstream does (without
	// Prefix).
	Enforcer *axgate.Enforcer
	// Upstream is the server, as for New.
	Upstream Upstream
	// Options apply to this upstream only, after the gateway's own: those
	// that shape or bound the upstream (WithCallTimeout,
	// WithConnectTimeout, WithMaxUpstreamTools, WithRelistInterval,
	// WithRestartBackoff, WithSandbox, WithRoots, ForwardClientRoots,
	// AllowUpstreamSampling, AllowUpstreamElicitation,
	// KeepUncheckedContent). NewMulti refuses the others, naming them.
	Options []Option
}

// DefaultToolSeparator joins an upstream's name and its tools' names when
// Named.Prefix is empty.
const DefaultToolSeparator = "_"

// NewMulti returns a gateway that serves several upstreams behind one endpoint.
//
// tools/list is the union, per caller, of what each upstream
// offers and its manifest allows, each tool under its upstream's prefix; a
// call goes to the upstream whose prefix is the longest its name starts
// with, through that upstream's enforcer, with the upstream's own name of
// the tool. Prompts are prefixed likewise; resources keep their URIs and
// go to the upstream whose manifest declares them. An upstream that is
// down has its tools refused (upstream_unavailable) while the others
// answer. opts configure the gateway as for New; it connects to every
// upstream before it returns. It fails when two front names collide
// (naming both upstreams and the name), when two manifests declare one
// resource, or as New does for any one upstream.
func NewMulti(upstreams []Named, opts ...Option) (*Gateway, error) {
	if len(upstreams) == 0 {
		return nil, errors.New("gateway: no upstream")
	}
	return build(upstreams, true, opts)
}

// newBackends checks upstreams as a whole and makes a backend of each,
// reusing those of old (Reload) that did not change. It starts none.
func (g *Gateway) newBackends(upstreams []Named, old *upstreamSet) ([]*backend, error) {
	if err := checkNames(upstreams); err != nil {
		return nil, err
	}
	list := make([]*backend, 0, len(upstreams))
	for _, n := range upstreams {
		if b := old.same(n, g.cfg); b != nil {
			list = append(list, b)
			continue
		}
		b, err := g.newBackend(n, g.cfg)
		if err != nil {
			for _, made := range list {
				if old == nil || !slices.Contains(old.list, made) {
					made.stop()
				}
			}
			if n.Name != "" {
				return nil, fmt.Errorf("%w (upstream %s)", err, n.Name)
			}
			return nil, err
		}
		list = append(list, b)
	}
	if err := checkFrontNames(list, nil); err != nil {
		for _, b := range list {
			if old == nil || !slices.Contains(old.list, b) {
				b.stop()
			}
		}
		return nil, err
	}
	return list, nil
}

// checkNames checks the upstreams' names and prefixes.
func checkNames(upstreams []Named) error {
	seen := map[string]bool{}
	for _, n := range upstreams {
		if n.Enforcer == nil {
			return fmt.Errorf("gateway: upstream %q: nil enforcer", n.Name)
		}
		if n.Name == "" {
			if len(upstreams) > 1 {
				return errors.New("gateway: an upstream without a Name among several")
			}
			if n.Prefix != "" {
				return errors.New("gateway: an upstream without a Name has no Prefix")
			}
			continue
		}
		for _, r := range n.Name {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				return fmt.Errorf("gateway: upstream name %q: want letters, digits, '_' and '-'", n.Name)
			}
		}
		if seen[n.Name] {
			return fmt.Errorf("gateway: two upstreams named %q", n.Name)
		}
		seen[n.Name] = true
		if !validToolName(prefixOf(n)) {
			return fmt.Errorf("gateway: upstream %s: prefix %q: want at most 127 of letters, digits, '_', '-' and '.'", n.Name, prefixOf(n))
		}
	}
	return nil
}

// validToolName reports whether s is made of what MCP allows in a tool
// name ([A-Za-z0-9_.-]), at most 128 of them ("" passes: a prefix may be
// empty, a whole name is checked for length by its caller).
func validToolName(s string) bool {
	if len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// checkFrontNames checks the names the front shows: each tool's and
// prompt's prefixed name valid and routed back to its own upstream (no
// two equal, none under another upstream's longer prefix), and no
// resource declared by two upstreams. pols, when set, are the policies to
// check instead of the backends' own (Reload's new manifests).
func checkFrontNames(list []*backend, pols map[*backend]*policy) error {
	set := &upstreamSet{list: list, byLength: slices.Clone(list)}
	sortByPrefix(set.byLength)
	polOf := func(b *backend) *policy {
		if p := pols[b]; p != nil {
			return p
		}
		return b.pol()
	}
	owner := map[string]*backend{}
	resources := map[string]*backend{}
	for _, b := range list {
		p := polOf(b)
		names := slices.Clone(p.order)
		for _, pr := range p.m.Prompts {
			names = append(names, pr.Name)
		}
		for _, name := range names {
			front := b.prefix + name
			if len(list) > 1 && (front == "" || !validToolName(front)) {
				return fmt.Errorf("gateway: upstream %s: %q is not a valid MCP tool name (want 1 to 128 of letters, digits, '_', '-' and '.')", b.name, front)
			}
			if o := owner[front]; o != nil && o != b {
				return fmt.Errorf("gateway: upstreams %s and %s both name a tool or prompt %q at the front; give one a Prefix", o.name, b.name, front)
			}
			owner[front] = b
			if r, _ := set.route(front); r != b {
				return fmt.Errorf("gateway: upstreams %s and %s: %q of %s starts with the longer prefix %q of %s; give one another Prefix", b.name, r.name, front, b.name, r.prefix, r.name)
			}
		}
		for _, r := range p.m.Resources {
			key := r.URI + "\x00" + r.URITemplate + "\x00" + r.URIPrefix
			if o := resources[key]; o != nil && o != b {
				return fmt.Errorf("gateway: upstreams %s and %s both declare the resource %q", o.name, b.name, r.URI+r.URITemplate+r.URIPrefix)
			}
			resources[key] = b
		}
	}
	// A URI two manifests match would go to whichever comes first: an
	// exact URI under another's prefix, two prefixes one under the other.
	for _, b := range list {
		for _, o := range list {
			if o == b {
				continue
			}
			for _, r := range polOf(b).m.Resources {
				if r.URI != "" {
					if x, _ := polOf(o).m.Resource(r.URI); x != nil {
						return fmt.Errorf("gateway: upstreams %s and %s both declare the resource %q", o.name, b.name, r.URI)
					}
				}
				for _, x := range polOf(o).m.Resources {
					if r.URIPrefix != "" && x.URIPrefix != "" && strings.HasPrefix(r.URIPrefix, x.URIPrefix) {
						return fmt.Errorf("gateway: upstreams %s and %s declare the resources under %q and %q, one within the other", o.name, b.name, x.URIPrefix, r.URIPrefix)
					}
				}
			}
		}
	}
	return nil
}

// unknownTool is the refusal of a call whose name no upstream's prefix
// begins.
func unknownTool(name string) *axerr.Error {
	return axerr.Newf(axerr.CodeIntentNotFound, "no upstream serves a tool named %q", bound(name)).
		WithSuggestion("Call tools/list and use one of the tools it lists.")
}

// unknownToolOf is the refusal of a call of a tool b's manifest does not
// declare, named as the client did, suggesting b's tools under its prefix.
func unknownToolOf(front string, b *backend, pol *policy) *axerr.Error {
	names := make([]string, 0, len(pol.order))
	for _, name := range pol.order {
		names = append(names, pol.defs[name].Name)
	}
	slices.Sort(names)
	e := axerr.Newf(axerr.CodeIntentNotFound, "no tool named %q", bound(front)).With("tool", bound(front))
	if len(names) > 0 {
		e = e.WithSuggestion("Call one of: " + strings.Join(names, ", "))
	}
	return e
}

// refusedAs reports whether res is a refusal (the AXAG envelope) with code.
func refusedAs(res *mcp.CallToolResult, code axerr.Code) bool {
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return false
	}
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal(raw, &env) == nil && env.Error.Code == string(code)
}

// upstreamOnlyOptions are the fields of config that Named.Options may set:
// those that shape or bound one upstream. upstreamOnly names the option of
// any other.
var upstreamOnlyOptions = map[string]bool{
	"callTimeout": true, "connectTimeout": true, "maxToolPages": true, "maxTools": true,
	"relistInterval": true, "backoffMin": true, "backoffMax": true, "sandbox": true,
	"roots": true, "forwardClientRoots": true, "allowSampling": true, "allowElicitation": true,
	"keepUncheckedContent": true,
}

// optionNames name the option of each front-level field, for refusals.
var optionNames = map[string]string{
	"logger": "WithLogger", "meter": "WithMeterProvider", "toolsOnly": "ToolsOnly",
	"principal": "WithPrincipal", "local": "WithLocalPrincipal", "bearer": "WithBearer",
	"resource": "WithBearer", "mcpOpts": "WithMCPOptions", "sessionTimeout": "WithSessionTimeout",
	"impl": "WithImplementation", "maxSessions": "WithMaxSessions",
	"maxSessionsPerPrincipal": "WithMaxSessions", "maxMessageBytes": "WithMaxMessageBytes",
	"maxCallsPerSession": "WithMaxCallsPerSession", "maxCallsPerPrincipal": "WithMaxCallsPerPrincipal",
	"maxPendingUpstream":     "WithMaxPendingUpstreamRequests",
	"trustClientElicitation": "WithTrustClientElicitation", "sdkOnly": "withoutDirect",
}

// upstreamOnly refuses an option of the front among an upstream's own:
// each is applied to an empty configuration, and any field it sets that
// is not an upstream's is named.
func upstreamOnly(opts []Option) error {
	for _, o := range opts {
		if o == nil {
			return errors.New("gateway: a nil option among an upstream's")
		}
		var c config
		o(&c)
		v := reflect.ValueOf(c)
		for i := range v.NumField() {
			name := v.Type().Field(i).Name
			if v.Field(i).IsZero() || upstreamOnlyOptions[name] {
				continue
			}
			opt := optionNames[name]
			if opt == "" {
				opt = name
			}
			return fmt.Errorf("gateway: %s configures the gateway's front, not one upstream: give it to NewMulti", opt)
		}
	}
	return nil
}

// same returns the backend of s that n describes unchanged (the same
// Name, Prefix, Upstream and options; its manifest may differ), or nil.
func (s *upstreamSet) same(n Named, base config) *backend {
	if s == nil {
		return nil
	}
	for _, b := range s.list {
		if b.name != n.Name || b.named.Prefix != n.Prefix || !sameUpstream(b.named.Upstream, n.Upstream) {
			continue
		}
		if len(b.named.Options) != len(n.Options) {
			return nil
		}
		// The options resolved: the same values, whatever functions.
		c1, c2 := base, base
		for _, o := range b.named.Options {
			o(&c1)
		}
		for _, o := range n.Options {
			if o == nil {
				return nil
			}
			o(&c2)
		}
		if !reflect.DeepEqual(upstreamFields(c1), upstreamFields(c2)) {
			return nil
		}
		return b
	}
	return nil
}

// upstreamFields are the fields of c an upstream's options set
// (upstreamOnlyOptions).
func upstreamFields(c config) []any {
	return []any{c.callTimeout, c.connectTimeout, c.maxToolPages, c.maxTools, c.relistInterval,
		c.backoffMin, c.backoffMax, c.sandbox, c.roots, c.forwardClientRoots, c.allowSampling,
		c.allowElicitation, c.keepUncheckedContent}
}

// sameUpstream reports whether two Upstreams reach the same server the
// same way: the same URL and client, or the same command, arguments,
// environment, directory and standard error; and the same credentials.
func sameUpstream(a, b Upstream) bool {
	return a.URL == b.URL && a.HTTPClient == b.HTTPClient && a.Command == b.Command &&
		slices.Equal(a.Args, b.Args) && slices.Equal(a.Env, b.Env) && a.InheritEnv == b.InheritEnv &&
		a.Dir == b.Dir && sameWriter(a, b) && reflect.DeepEqual(a.Credentials, b.Credentials)
}

// sameWriter compares the Stderr of a and b, without panicking on a
// writer whose type cannot be compared.
func sameWriter(a, b Upstream) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a.Stderr == b.Stderr
}

// Reload replaces the gateway's upstreams with upstreams.
//
// For New's gateway, upstreams is one Named with an empty Name and
// Prefix. An upstream whose
// Named is unchanged keeps its sessions; one whose Enforcer alone changed
// keeps them and is enforced with the new manifest from the next call
// (the clients are told their tools changed); one that changed otherwise,
// or is gone, has its sessions closed (its children stopped), and one
// that is new is connected before Reload returns, its sessions started at
// the sessions' next requests. Everything is checked, and new upstreams
// connected, before anything changes: on error nothing has. Options of
// the front cannot change. A replaced enforcer may still run the calls in
// flight when Reload returns: close it once they end (after
// WithCallTimeout).
func (g *Gateway) Reload(ctx context.Context, upstreams []Named) error {
	g.reloading.Lock()
	defer g.reloading.Unlock()
	if len(upstreams) == 0 {
		return errors.New("gateway: no upstream")
	}
	old := g.set()
	list, err := g.newBackends(upstreams, old)
	if err != nil {
		return err
	}
	var fresh []*backend
	pols := map[*backend]*policy{}
	for i, b := range list {
		if !slices.Contains(old.list, b) {
			fresh = append(fresh, b)
		} else if n := upstreams[i]; n.Enforcer != b.pol().enf {
			pols[b] = b.newPolicy(n.Enforcer)
		}
	}
	if err := checkFrontNames(list, pols); err != nil {
		for _, b := range fresh {
			b.stop()
		}
		return err
	}
	if err := startWithin(ctx, fresh); err != nil {
		for _, b := range fresh {
			b.stop()
		}
		return err
	}
	for i, b := range list {
		if !slices.Contains(fresh, b) {
			b.named = upstreams[i]
		}
	}
	for b, p := range pols {
		b.policy.Store(p)
	}
	set := newSet(list)
	// Registered before the set serves them (syncTools).
	g.syncTools(set)

	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		for _, b := range fresh {
			b.stop()
		}
		return errors.New("gateway: the gateway is closed")
	}
	g.ups.Store(set)
	var gone []*backend
	for _, b := range old.list {
		if !slices.Contains(list, b) {
			gone = append(gone, b)
		}
	}
	var closing []*link
	all := make([]*session, 0, len(g.links)+len(g.callers))
	for _, s := range g.links {
		all = append(all, s)
	}
	for _, cl := range g.callers {
		all = append(all, cl.s)
	}
	for _, s := range all {
		for _, b := range gone {
			if l := s.links[b]; l != nil {
				closing = append(closing, l)
				delete(s.links, b)
			}
		}
	}
	var recheck []*link
	for _, s := range all {
		for b := range pols {
			if l := s.links[b]; l != nil {
				recheck = append(recheck, l)
			}
		}
	}
	g.mu.Unlock()

	// The new manifest's pins, checked against what each session of its
	// upstream listed last (and lists from now on).
	for b := range pols {
		b.mu.Lock()
		control := b.control
		b.mu.Unlock()
		if control != nil {
			recheck = append(recheck, control)
		}
	}
	for _, l := range recheck {
		if offered := l.offered(); offered != nil {
			l.b.checkPins(offered)
		}
	}
	g.setDirectFront(set)
	var wg sync.WaitGroup
	for _, l := range closing {
		wg.Go(l.close)
	}
	for _, b := range gone {
		wg.Go(b.stop)
	}
	wg.Wait()
	if len(pols) > 0 || len(gone) > 0 || len(fresh) > 0 {
		for _, s := range g.sessions() {
			go s.notifyToolsChanged()
		}
	}
	return nil
}

// startWithin starts the upstreams together, within ctx.
func startWithin(ctx context.Context, list []*backend) error {
	done := make(chan error, 1)
	go func() { done <- startAll(list) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		err := <-done // each start is bounded by its connect timeout
		if err == nil {
			err = ctx.Err()
		}
		return err
	}
}

// Upstreams reports each upstream's readiness, by name, as Ready checks
// it: nil for one that can serve calls now.
func (g *Gateway) Upstreams(ctx context.Context) map[string]error {
	list := g.set().list
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, b := range list {
		wg.Go(func() { errs[i] = b.Ready(ctx) })
	}
	wg.Wait()
	out := make(map[string]error, len(list))
	for i, b := range list {
		out[b.name] = errs[i]
	}
	return out
}
