package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/axgate/axgate"
	mcpgw "github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
)

// singleUpstreamFlags are the flags that configure the one upstream of a
// gateway started without upstreams: (each upstreams: entry has its own
// keys for them).
var singleUpstreamFlags = []string{"upstream-url", "upstream-command", "upstream-env",
	"upstream-header-file", "upstream-env-file", "upstream-client-credentials", "upstream-token-exchange",
	"upstream-client-id", "upstream-client-secret-file", "upstream-client-scopes",
	"upstream-token-exchange-audience", "upstream-token-exchange-scopes",
	"sandbox", "sandbox-ro", "sandbox-rw", "sandbox-network"}

// upstreamFlagsWithUpstreams returns the single upstream's flags given
// (on the command line, in the file or in the environment) beside an
// upstreams: section: together they are an error, not one silently
// ignored.
func upstreamFlagsWithUpstreams(conf configured) []string {
	var given []string
	for _, name := range singleUpstreamFlags {
		if src := conf.sources[name]; src != "" && src != sourceDefault {
			given = append(given, "--"+name)
		}
	}
	return given
}

// resolvedUpstream is an upstreams: entry with its manifest loaded, and
// the digest of the file it was read from (its own, or --manifest).
type resolvedUpstream struct {
	cfg    upstreamConfig
	m      *manifest.Manifest
	digest [sha256.Size]byte
}

// loadManifest reads the manifest file at path, and the SHA-256 of the
// bytes it was read from.
func loadManifest(path string) (*manifest.Manifest, [sha256.Size]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestFileBytes+1))
	if err != nil {
		return nil, [sha256.Size]byte{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxManifestFileBytes {
		return nil, [sha256.Size]byte{}, fmt.Errorf("%s: larger than %d bytes", path, maxManifestFileBytes)
	}
	// Parsed as LoadFile would (the name tells the format), from the
	// very bytes the digest is of.
	m, err := manifest.LoadFS(oneFile{name: path, data: data}, path)
	return m, sha256.Sum256(data), err
}

// maxManifestFileBytes is manifest.Load's bound.
const maxManifestFileBytes = 16 << 20

// oneFile is an fs.FS of one file held in memory.
type oneFile struct {
	name string
	data []byte
}

func (o oneFile) Open(name string) (fs.File, error) {
	if name != o.name {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &memFile{Reader: bytes.NewReader(o.data), name: name}, nil
}

// memFile is oneFile's file.
type memFile struct {
	*bytes.Reader
	name string
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	return nil, &fs.PathError{Op: "stat", Path: f.name, Err: errors.ErrUnsupported}
}

func (f *memFile) Close() error { return nil }

// resolveUpstreams loads the manifests of the upstreams: an upstream's own
// (manifest:), or the entries of the shared manifest (--manifest, at
// sharedPath) that name it. It checks what the file alone could not: every
// manifest can be read, every entry of the shared manifest names an
// upstream that takes it, no upstream's manifest names another, every
// upstream has something to serve, no intent is declared by two upstreams
// (a confirmation or approval of one would be accepted by the other), and
// every command can be found. All problems are reported at once.
func resolveUpstreams(cf *configFile, sharedPath string) ([]resolvedUpstream, error) {
	var problems []string
	fail := func(u *upstreamConfig, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if u != nil {
			msg = fmt.Sprintf("%s:%d: upstream %s: %s", cf.path, u.line, u.name, msg)
		}
		problems = append(problems, msg)
	}
	names := map[string]*upstreamConfig{}
	needShared := false
	for i := range cf.upstreams {
		u := &cf.upstreams[i]
		names[u.name] = u
		if u.manifest == "" {
			needShared = true
		}
	}
	var (
		shared       *manifest.Manifest
		sharedDigest [sha256.Size]byte
	)
	switch {
	case needShared && sharedPath == "":
		var without []string
		for _, u := range cf.upstreams {
			if u.manifest == "" {
				without = append(without, u.name)
			}
		}
		fail(nil, "upstreams %s have no manifest: give each its manifest:, or give --manifest with actions that name them (upstream: NAME)", strings.Join(without, ", "))
	case !needShared && sharedPath != "":
		fail(nil, "--manifest %s is given, but every upstream has a manifest of its own: remove one or the other", sharedPath)
	case needShared:
		if err := fileFlag("manifest", sharedPath); err != nil {
			fail(nil, "%v", err)
			break
		}
		m, digest, err := loadManifest(sharedPath)
		if err != nil {
			fail(nil, "--manifest %v", err)
			break
		}
		shared, sharedDigest = m, digest
		for _, a := range m.Checked() {
			u, ok := names[a.Upstream]
			switch {
			case a.Upstream == "":
				fail(nil, "--manifest %s: %s (%s) names no upstream: add upstream: NAME, one of %s", sharedPath, a.Intent, a.Pointer, upstreamNames(cf))
			case !ok:
				fail(nil, "--manifest %s: %s (%s) names the upstream %q, which the configuration lacks (upstreams: %s)", sharedPath, a.Intent, a.Pointer, a.Upstream, upstreamNames(cf))
			case u.manifest != "":
				fail(u, "%s of --manifest %s names it, but it has a manifest of its own (%s)", a.Intent, sharedPath, u.manifest)
			}
		}
	}
	out := make([]resolvedUpstream, 0, len(cf.upstreams))
	owner := map[string]string{} // intent → upstream
	for i := range cf.upstreams {
		u := &cf.upstreams[i]
		r := resolvedUpstream{cfg: *u}
		if u.manifest != "" {
			if err := fileProblem("manifest "+u.manifest, u.manifest); err != nil {
				fail(u, "%v", err)
				continue
			}
			m, digest, err := loadManifest(u.manifest)
			if err != nil {
				fail(u, "manifest %v", err)
				continue
			}
			r.digest = digest
			for _, a := range m.Checked() {
				if a.Upstream != "" && a.Upstream != u.name {
					fail(u, "its manifest %s declares %s for the upstream %q", u.manifest, a.Intent, a.Upstream)
				}
			}
			r.m = m
		} else if shared != nil {
			// Not the digest of a manifest of its own with the same bytes.
			r.m, r.digest = shared.ForUpstream(u.name), sha256.Sum256(append([]byte("--manifest "), sharedDigest[:]...))
		}
		if r.m == nil {
			continue
		}
		if len(r.m.Checked()) == 0 {
			fail(u, "its manifest gives it no action, resource or prompt: nothing of it would be served")
		}
		for _, a := range r.m.Checked() {
			if prev, dup := owner[a.Intent]; dup && prev != u.name {
				fail(u, "the intent %s is declared by the upstreams %s and %s: a confirmation or approval of one would be accepted by the other; give each its own intent", a.Intent, prev, u.name)
			}
			owner[a.Intent] = u.name
		}
		if u.command != "" {
			if err := commandFlag("upstreams: "+u.name+": command", u.command); err != nil {
				fail(u, "%v", err)
			}
		}
		out = append(out, r)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	return out, nil
}

// upstreamNames lists the configuration's upstreams.
func upstreamNames(cf *configFile) string {
	var names []string
	for _, u := range cf.upstreams {
		names = append(names, u.name)
	}
	return strings.Join(names, ", ")
}

// credentials builds an upstream's credentials (nil without any), reading
// the client secret files.
func (c upstreamCredsConfig) build() (*mcpgw.UpstreamCredentials, error) {
	if c.empty() {
		return nil, nil
	}
	out := &mcpgw.UpstreamCredentials{HeaderFiles: c.headerFiles, EnvFiles: c.envFiles}
	if len(out.HeaderFiles) == 0 {
		out.HeaderFiles = nil
	}
	if len(out.EnvFiles) == 0 {
		out.EnvFiles = nil
	}
	if cc := c.clientCredentials; cc != nil {
		secret, err := readSecretFile("client_credentials.client_secret_file", cc.secretFile)
		if err != nil {
			return nil, err
		}
		out.ClientCredentials = &clientcredentials.Config{TokenURL: cc.tokenURL, ClientID: cc.clientID, ClientSecret: secret, Scopes: cc.scopes}
	}
	if te := c.tokenExchange; te != nil {
		secret, err := readSecretFile("token_exchange.client_secret_file", te.secretFile)
		if err != nil {
			return nil, err
		}
		out.TokenExchange = &mcpgw.TokenExchange{TokenURL: te.tokenURL, ClientID: te.clientID, ClientSecret: secret, Audience: te.audience, Scopes: te.scopes}
	}
	return out, nil
}

// readSecretFile reads a client secret; the error names the key and the
// file, never the content.
func readSecretFile(key, path string) (string, error) {
	if err := fileProblem(key+" "+path, path); err != nil {
		return "", err
	}
	raw, err := readSmallFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: the file %s cannot be read", key, path)
	}
	s := strings.TrimRight(string(raw), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s: the file %s is empty", key, path)
	}
	return s, nil
}

// options are the upstream's own gateway options (Named.Options).
func (u upstreamConfig) options() ([]mcpgw.Option, error) {
	var opts []mcpgw.Option
	if u.callTimeout > 0 {
		opts = append(opts, mcpgw.WithCallTimeout(u.callTimeout))
	}
	if u.connectTimeout > 0 {
		opts = append(opts, mcpgw.WithConnectTimeout(u.connectTimeout))
	}
	if u.relistInterval > 0 {
		opts = append(opts, mcpgw.WithRelistInterval(u.relistInterval))
	}
	if u.backoffMin > 0 || u.backoffMax > 0 {
		opts = append(opts, mcpgw.WithRestartBackoff(u.backoffMin, u.backoffMax))
	}
	if u.maxTools > 0 || u.maxToolPages > 0 {
		opts = append(opts, mcpgw.WithMaxUpstreamTools(u.maxToolPages, u.maxTools))
	}
	roots, err := u.roots.mcpRoots()
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", u.name, err)
	}
	if len(roots) > 0 {
		opts = append(opts, mcpgw.WithRoots(roots...))
	}
	if u.forwardRoots {
		opts = append(opts, mcpgw.ForwardClientRoots())
	}
	if u.allowSampling {
		opts = append(opts, mcpgw.AllowUpstreamSampling())
	}
	if u.allowElicit {
		opts = append(opts, mcpgw.AllowUpstreamElicitation())
	}
	if u.keepUnchecked {
		opts = append(opts, mcpgw.KeepUncheckedContent())
	}
	return u.sandbox.option(opts), nil
}

// multiUpstreams runs the upstreams: of a gateway: it builds each
// upstream's enforcer over its manifest (all sharing the process's state,
// keys and decisions, enforcer.go), the gateway, and the pages' enforcer
// over the union of the manifests (--human); SIGHUP builds them anew from
// the file (reload).
type multiUpstreams struct {
	log      *slog.Logger
	cfgPath  string
	manifest string // --manifest: the shared manifest, "" without
	fresh    func() *flag.FlagSet
	childEnv func(upstreamConfig) []string
	stderr   io.Writer
	// enforcer builds an enforcer over m, one of the manifests whose union
	// is union, with the process's shared options.
	enforcer func(m, union *manifest.Manifest) (*axgate.Enforcer, error)
	// human builds the handler of --human over an enforcer (nil without
	// --human).
	human func(enf *axgate.Enforcer) (http.Handler, error)

	mu   sync.Mutex // serializes reloads
	gw   *mcpgw.Gateway
	enfs []*axgate.Enforcer // the current generation's, closed by the next
	// byDigest is each upstream's enforcer of the current generation, by
	// name, with the digest of its manifest's file: a reload whose file did
	// not change keeps it (and so tells no client its tools changed).
	byDigest map[string]keptEnforcer
	pages    atomic.Pointer[http.Handler]
	summary  string // the upstreams and their tool counts, for the log
}

// keptEnforcer is an upstream's enforcer and the digest of its manifest's
// file.
type keptEnforcer struct {
	digest [sha256.Size]byte
	enf    *axgate.Enforcer
}

// generation is the upstreams built from one reading of the file.
type generation struct {
	named    []mcpgw.Named
	enfs     []*axgate.Enforcer // all of the generation's
	made     []*axgate.Enforcer // those made for it (not kept from the last)
	byDigest map[string]keptEnforcer
	pages    http.Handler
	summary  string
}

// build reads the upstreams of cf into a generation: an enforcer per
// upstream, its credentials and options. On error it closes what it made.
func (mu *multiUpstreams) build(cf *configFile) (g *generation, err error) {
	ups, err := resolveUpstreams(cf, mu.manifest)
	if err != nil {
		return nil, err
	}
	g = &generation{byDigest: map[string]keptEnforcer{}}
	defer func() {
		if err != nil {
			for _, enf := range g.made {
				enf.Close()
			}
		}
	}()
	ms := make([]*manifest.Manifest, 0, len(ups))
	for _, r := range ups {
		ms = append(ms, r.m)
	}
	// resolveUpstreams checked that no intent is declared twice.
	union, err := manifest.Union(ms...)
	if err != nil {
		return nil, err
	}
	var summary []string
	for _, r := range ups {
		u := r.cfg
		enf := mu.byDigest[u.name].enf
		if enf == nil || mu.byDigest[u.name].digest != r.digest {
			if enf, err = mu.enforcer(r.m, union); err != nil {
				return nil, fmt.Errorf("upstream %s: %s", u.name, startError(err))
			}
			g.made = append(g.made, enf)
		}
		g.enfs = append(g.enfs, enf)
		g.byDigest[u.name] = keptEnforcer{digest: r.digest, enf: enf}
		up := mcpgw.Upstream{URL: u.url}
		if u.command != "" {
			up = mcpgw.Upstream{Command: u.command, Args: u.args, Env: mu.childEnv(u), Dir: u.dir, Stderr: mu.stderr}
		}
		if up.Credentials, err = u.creds.build(); err != nil {
			return nil, fmt.Errorf("upstream %s: credentials: %w", u.name, err)
		}
		opts, err := u.options()
		if err != nil {
			return nil, err
		}
		g.named = append(g.named, mcpgw.Named{Name: u.name, Prefix: cf.prefixOf(u), Enforcer: enf, Upstream: up, Options: opts})
		summary = append(summary, fmt.Sprintf("%s (%d tools, %s…)", u.name, len(r.m.Actions), cf.prefixOf(u)))
	}
	g.summary = strings.Join(summary, ", ")
	if mu.human != nil {
		// The pages and endpoints for people decide on any upstream's
		// calls: the decisions are in the shared approval store, and the
		// union names every intent. POST /confirmations finds a tool by
		// its name in its upstream's manifest: a name two upstreams share
		// is not found there (the pages still decide its calls).
		enf, err := mu.enforcer(union, union)
		if err != nil {
			return nil, fmt.Errorf("--human: %s", startError(err))
		}
		g.enfs, g.made = append(g.enfs, enf), append(g.made, enf)
		if g.pages, err = mu.human(enf); err != nil {
			return nil, fmt.Errorf("--human: %w", err)
		}
	}
	return g, nil
}

// start builds the first generation and the gateway.
func (mu *multiUpstreams) start(cf *configFile, gopts []mcpgw.Option) error {
	g, err := mu.build(cf)
	if err != nil {
		return err
	}
	gw, err := mcpgw.NewMulti(g.named, gopts...)
	if err != nil {
		for _, enf := range g.made {
			enf.Close()
		}
		return err
	}
	mu.gw, mu.enfs, mu.byDigest, mu.summary = gw, g.enfs, g.byDigest, g.summary
	if g.pages != nil {
		mu.pages.Store(&g.pages)
	}
	return nil
}

// reload reads the configuration file and the manifests again and hands
// the upstreams to the gateway (Gateway.Reload): an upstream that did not
// change keeps its sessions. A file or a manifest that fails keeps what
// runs, and the log says why.
func (mu *multiUpstreams) reload(ctx context.Context) {
	mu.mu.Lock()
	defer mu.mu.Unlock()
	fail := func(err error) {
		mu.log.Error("axgate mcp: reload failed; keeping the upstreams in use", "config", mu.cfgPath, "err", err)
	}
	cf, err := readConfigFile(mu.cfgPath, mu.fresh())
	if err != nil {
		fail(err)
		return
	}
	if !cf.upstreamsGiven {
		fail(errors.New("the file has no upstreams: section any more; a gateway started with upstreams: keeps them until it restarts"))
		return
	}
	g, err := mu.build(cf)
	if err != nil {
		fail(err)
		return
	}
	if err := mu.gw.Reload(ctx, g.named); err != nil {
		for _, enf := range g.made {
			enf.Close()
		}
		fail(err)
		return
	}
	old := mu.enfs
	mu.enfs, mu.byDigest, mu.summary = g.enfs, g.byDigest, g.summary
	if g.pages != nil {
		// The pages anew (people stay signed in with --signing-key).
		mu.pages.Store(&g.pages)
	}
	// Calls still in the old enforcers' chains finish with what they hold.
	for _, enf := range old {
		if !slices.Contains(mu.enfs, enf) {
			enf.Close()
		}
	}
	mu.log.Info("axgate mcp: configuration reloaded", "config", mu.cfgPath, "upstreams", g.summary)
}

// ServeHTTP serves the current generation's pages for people (--human).
func (mu *multiUpstreams) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*mu.pages.Load()).ServeHTTP(w, r)
}

// close closes the current generation's enforcers (after the gateway).
func (mu *multiUpstreams) close() {
	mu.mu.Lock()
	defer mu.mu.Unlock()
	for _, enf := range mu.enfs {
		enf.Close()
	}
	mu.enfs = nil
}

// ready is the readiness of /readyz: the gateway's Ready (what NewMulti
// decides: ready while it can serve calls) and Redis; each upstream's own
// state is in the body (upstreams).
func (mu *multiUpstreams) ready(shared *enforcerState) func(context.Context) []error {
	return func(ctx context.Context) []error {
		errs := checkReady(ctx, nil, shared)
		if err := mu.gw.Ready(ctx); err != nil {
			errs = append(errs, err)
		}
		return errs
	}
}

// readSmallFile reads a file of at most a few kilobytes (a secret).
func readSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 64<<10+1))
	if err != nil {
		return nil, err
	}
	if len(data) > 64<<10 {
		return nil, errors.New("larger than 64 KiB")
	}
	return data, nil
}

// upstreamsReport is the upstreams part of /readyz: each upstream's state
// by name ("ready", or why not), and whether any is ready.
func upstreamsReport(states map[string]error) (map[string]string, bool) {
	out := make(map[string]string, len(states))
	anyReady := false
	for name, err := range states {
		if err == nil {
			out[name] = "ready"
			anyReady = true
			continue
		}
		out[name] = err.Error()
	}
	return out, anyReady
}
