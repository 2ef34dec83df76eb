package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/axgate/axgate/token"
)

// runner holds the run's processes, keys and results.
type runner struct {
	dir      string
	procs    []*proc
	self     string // this binary
	axgate   string // the axgate CLI, built from cmd/axgate
	thvgate  string // ToolHive's chain (./thvgate)
	manifest string
	authz    string
	jwks     string
	signer   *token.Signer

	rounds   int
	duration time.Duration
	agents   []int
	works    []time.Duration
	protos   []string
	tenants  int
	redisURL string
	verify   bool
	sections map[string]bool
	profile  string // where axgate's CPU profiles go ("": none taken)
}

var (
	current *runner
	verbose bool
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "mcp-upstream":
			serveMCPUpstream(os.Args[2:])
			return
		case "http-upstream":
			serveHTTPUpstream(os.Args[2:])
			return
		case "proxy":
			serveProxy(os.Args[2:])
			return
		case "relay":
			serveRelay(os.Args[2:])
			return
		case "redis-counter":
			serveRedisCounter(os.Args[2:])
			return
		}
	}
	r := &runner{}
	var agents, works, protos, sections string
	flag.StringVar(&r.axgate, "axgate", "", "the axgate binary (go build ./cmd/axgate)")
	flag.StringVar(&r.thvgate, "thvgate", "", "the thvgate binary (go build ./thvgate); empty: no ToolHive rows")
	flag.IntVar(&r.rounds, "rounds", 5, "rounds; each measures every engine of every row once, in an order rotated each round")
	flag.DurationVar(&r.duration, "d", 2*time.Second, "how long each engine is driven per row and round")
	flag.StringVar(&agents, "agents", "1,8", "numbers of concurrent agents")
	flag.StringVar(&works, "work", "0ms,1ms", "how long the upstream's tool works per call")
	flag.StringVar(&protos, "protocols", "2025-11-25,2026-07-28", "MCP protocol versions the agents ask for")
	flag.IntVar(&r.tenants, "tenants", 10000, "tenants in the rate-limit keys (shared-state rows)")
	flag.StringVar(&r.redisURL, "redis", "redis://127.0.0.1:6379/9", "Redis of the shared-state rows (its DB is flushed)")
	flag.BoolVar(&r.verify, "verify", false, "check that every engine allows and refuses the same calls, time nothing")
	flag.BoolVar(&verbose, "v", false, "print every verification answer in full (standard error)")
	flag.StringVar(&sections, "sections", "mcp,serve,shared", "what to run: mcp, serve, shared")
	flag.StringVar(&r.profile, "profile", "", "a directory: axgate's processes serve pprof on an admin port, and a CPU profile of each axgate engine's first round of each row is written there")
	flag.Parse()
	if r.axgate == "" {
		fatalf("-axgate is required")
	}
	r.agents = ints(agents)
	for _, w := range strings.Split(works, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(w))
		if err != nil {
			fatalf("-work: %v", err)
		}
		r.works = append(r.works, d)
	}
	r.protos = strings.Split(protos, ",")
	r.sections = map[string]bool{}
	for _, s := range strings.Split(sections, ",") {
		r.sections[strings.TrimSpace(s)] = true
	}
	if r.profile != "" {
		if err := os.MkdirAll(r.profile, 0o755); err != nil {
			fatalf("-profile: %v", err)
		}
	}
	current = r
	r.setup()
	defer os.RemoveAll(r.dir) // kept when the run fails (fatalf names it)
	defer r.stopAll()
	if r.sections["mcp"] {
		r.runMCP()
	}
	if r.sections["serve"] {
		r.runServe()
	}
	if r.sections["shared"] {
		r.runShared()
	}
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fatalf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out
}

// setup makes the run's folder, its ES256 key (ToolHive verifies RSA and
// ECDSA only; axgate all three) and JWK Set, and copies the manifest and
// ToolHive's authorization configuration there.
func (r *runner) setup() {
	var err error
	if r.dir, err = os.MkdirTemp("", "peers-gateway-"); err != nil {
		fatalf("%v", err)
	}
	if r.self, err = os.Executable(); err != nil {
		fatalf("%v", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fatalf("%v", err)
	}
	if r.signer, err = token.NewSigner("bench", key); err != nil {
		fatalf("%v", err)
	}
	set, err := r.signer.PublicJWKS()
	if err != nil {
		fatalf("%v", err)
	}
	r.jwks = filepath.Join(r.dir, "jwks.json")
	r.manifest = filepath.Join(r.dir, "manifest.json")
	r.authz = filepath.Join(r.dir, "authz.json")
	write(r.jwks, set)
	write(r.manifest, mustRead("testdata/manifest.json"))
	write(r.authz, mustRead("testdata/authz.json"))
	what := fmt.Sprintf("%d rounds × %s per engine and row", r.rounds, r.duration)
	if r.verify {
		what = "the checks only"
	}
	fmt.Printf("# peers-gateway: %s, %s\n", time.Now().UTC().Format(time.RFC3339), what)
	fmt.Printf("# load average at start: %s", loadavg())
}

func write(path string, b []byte) {
	if err := os.WriteFile(path, b, 0o600); err != nil {
		fatalf("%v", err)
	}
}

func mustRead(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		fatalf("%v (run from bench/peers-gateway)", err)
	}
	return b
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return string(b)
}

// principalClaims are the claims of an agent's bearer token, as "axgate
// token principal" writes them.
type principalClaims struct {
	jwt.RegisteredClaims
	Tenant string   `json:"tenant,omitempty"`
	Roles  []string `json:"roles,omitempty"`
}

// bearer signs an agent's bearer token (iss and aud "axgate", one hour).
func (r *runner) bearer(sub, tenant string, roles ...string) string {
	now := time.Now()
	c := principalClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: token.DefaultIssuer, Subject: sub, Audience: jwt.ClaimStrings{token.DefaultAudience},
			ID: rand.Text(), IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(2 * time.Hour)),
		},
		Tenant: tenant, Roles: roles,
	}
	s, err := r.signer.Sign("JWT", c)
	if err != nil {
		fatalf("%v", err)
	}
	return s
}

// bearerClient is an HTTP client that sends "Authorization: Bearer tok"
// with every request and keeps an idle connection per agent.
func bearerClient(tok string) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: bearerTransport{tok: tok, next: t}}
}

type bearerTransport struct {
	tok  string
	next http.RoundTripper
}

func (b bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.tok)
	return b.next.RoundTrip(req)
}
