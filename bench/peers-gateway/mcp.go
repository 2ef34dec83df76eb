package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// engine is one way to reach the upstream: directly or through a hop.
type engine struct {
	name      string
	url       string // the MCP endpoint, or the tool server's base URL
	pids      []int  // the hop's processes (none for direct)
	enforcing bool   // it enforces the manifest (or its Cedar equivalent)
	admin     string // axgate's admin address with pprof (-profile), or ""
}

// mcpRow is one row of the MCP table: the upstream's work, the protocol
// version the agents ask for and the number of agents.
type mcpRow struct {
	work   time.Duration
	proto  string
	agents int
}

func (w mcpRow) String() string {
	return fmt.Sprintf("%s, %d ms, %d", w.proto, w.work.Milliseconds(), w.agents)
}

// startMCPEngines starts an upstream whose tools work for work, and each
// hop in front of it. A go-sdk v1.8.0 server serves MCP 2026-07-28 over
// HTTP only when it is stateless (StreamableHTTPOptions.Stateless), and a
// stateless one has no sessions: the rows of 2026-07-28 have an upstream
// of their own.
func (r *runner) startMCPEngines(work time.Duration, proto string) []engine {
	stateless := proto >= "2026-07-28"
	tag := fmt.Sprintf("%dms-%s", work.Milliseconds(), map[bool]string{false: "sessions", true: "stateless"}[stateless])
	up := r.startSelf("mcp-upstream-"+tag, "mcp-upstream", "-work", work.String(), "-stateless="+strconv.FormatBool(stateless))
	return r.hopsInFront(up, tag)
}

func (r *runner) hopsInFront(up *proc, tag string) []engine {
	upURL := "http://" + up.addr
	engines := []engine{{name: "direct", url: upURL + "/mcp"}}
	relay := r.startSelf("relay-"+tag, "relay", "-target", up.addr)
	engines = append(engines, engine{name: "relay", url: "http://" + relay.addr + "/mcp", pids: []int{relay.cmd.Process.Pid}})
	proxy := r.startSelf("proxy-"+tag, "proxy", "-target", upURL)
	engines = append(engines, engine{name: "ReverseProxy", url: "http://" + proxy.addr + "/mcp", pids: []int{proxy.cmd.Process.Pid}})
	if r.thvgate != "" {
		addr := freeAddr()
		_, port, _ := strings.Cut(addr, ":")
		thv := r.start("toolhive-"+tag, addr, r.thvgate, "-port", port, "-target", upURL,
			"-jwks", r.jwks, "-authz", r.authz)
		engines = append(engines, engine{name: "ToolHive", url: "http://" + thv.addr + "/mcp", pids: []int{thv.cmd.Process.Pid}, enforcing: true})
	}
	addr := freeAddr()
	argv, admin := r.withProfile(r.axgate, "mcp", "--manifest", r.manifest,
		"--upstream-url", upURL+"/mcp", "--listen", addr, "--jwks", r.jwks, "--audience", "axgate")
	ax := r.start("axgate-mcp-"+tag, addr, argv...)
	engines = append(engines, engine{name: "axgate mcp", url: "http://" + ax.addr + "/mcp", pids: []int{ax.cmd.Process.Pid}, enforcing: true, admin: admin})
	return engines
}

func connect(url, tok, proto string) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: bearerClient(tok)},
		&mcp.ClientSessionOptions{ProtocolVersion: proto})
}

// readParams are the read's parameters, new for every call: a go-sdk
// v1.8.0 client on MCP 2026-07-28 writes the per-request _meta into the
// params it is given, and params shared with a session on 2025-11-25 would
// then carry 2026-07-28's _meta there (which a server with sessions
// rejects).
func readParams() *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": "docs/intro.md"}}
}

func writeParams(path string) func() *mcp.CallToolParams {
	return func() *mcp.CallToolParams {
		return &mcp.CallToolParams{Name: "write", Arguments: map[string]any{"path": path, "text": "new"}}
	}
}

// readOnce is one agent's read, checked: the document, not a refusal.
func readOnce(cs *mcp.ClientSession) error {
	res, err := cs.CallTool(context.Background(), readParams())
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) != 1 {
		return fmt.Errorf("read failed: %s", resultText(res))
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != readDoc {
		return errors.New("read returned another document")
	}
	return nil
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	s := b.String()
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// verdict is what an engine did with one call: "allowed" or "refused",
// and how it said so.
func verdict(res *mcp.CallToolResult, err error) (string, string) {
	switch {
	case err != nil:
		return "refused", "error: " + err.Error()
	case res.IsError:
		return "refused", resultText(res)
	default:
		return "allowed", resultText(res)
	}
}

// checks are the calls every engine is verified with before it is timed.
var checks = []struct {
	name, tok string // tok: "rw" (roles reader, writer) or "none" (no roles)
	params    func() *mcp.CallToolParams
	enforced  string // what an enforcing engine must do
}{
	{"read, role reader", "rw", readParams, "allowed"},
	{"write docs/, role writer", "rw", writeParams("docs/a.md"), "allowed"},
	{"write outside docs/ (argument rule)", "rw", writeParams("etc/passwd"), "refused"},
	{"read without the role", "none", readParams, "refused"},
}

// verifyMCP calls every check on every engine, each on a session of its
// own, and fails the run unless every enforcing engine decides as the
// check says and every other engine allows everything. An engine whose
// transport rejects the protocol version itself (HTTP 400, "protocol
// version … is not supported by this server") does not serve proto: it is
// reported, and left out of that protocol's rows.
func (r *runner) verifyMCP(engines []engine, proto string) (negotiated, unserved map[string]string) {
	toks := map[string]string{"rw": r.bearer("agent", "t0", "reader", "writer"), "none": r.bearer("agent", "t0")}
	negotiated, unserved = map[string]string{}, map[string]string{}
	fmt.Printf("\nVerification, protocol %s:\n\n", proto)
	fmt.Println(joinRow(append([]string{"check"}, names(engines)...)...))
	fmt.Println(joinRow(strings.Split(strings.Repeat("---,", len(engines)+1), ",")[:len(engines)+1]...))
	failed := false
	for _, c := range checks {
		row := []string{c.name}
		for _, e := range engines {
			if unserved[e.name] != "" {
				row = append(row, "not served")
				continue
			}
			cs, err := connect(e.url, toks[c.tok], proto)
			if err != nil {
				fatalf("%s: connect: %v", e.name, err)
			}
			negotiated[e.name] = cs.InitializeResult().ProtocolVersion
			res, err := cs.CallTool(context.Background(), c.params())
			v, how := verdict(res, err)
			cs.Close()
			if verbose {
				fmt.Fprintf(os.Stderr, "%s, %s, %s: %s: %s\n", proto, e.name, c.name, v, how)
			}
			if err != nil && strings.Contains(err.Error(), "is not supported by this server") {
				unserved[e.name] = err.Error()
				row = append(row, "**not served**: "+short(how))
				continue
			}
			want := "allowed"
			if e.enforcing {
				want = c.enforced
			}
			cell := v
			if v == "refused" {
				cell += " (" + short(how) + ")"
			}
			if v != want {
				cell = "**" + cell + ", want " + want + "**"
				failed = true
			}
			row = append(row, cell)
		}
		fmt.Println(joinRow(row...))
	}
	row := []string{"protocol served"}
	for _, e := range engines {
		row = append(row, negotiated[e.name])
	}
	fmt.Println(joinRow(row...))
	for _, e := range engines {
		if u := unserved[e.name]; u != "" {
			fmt.Printf("\n%s does not serve %s: a go-sdk v1.8.0 client that asked for it negotiated %s, then its tools/call was answered: %s\n",
				e.name, proto, negotiated[e.name], u)
		}
	}
	if failed {
		fatalf("the engines do not decide alike (protocol %s)", proto)
	}
	return negotiated, unserved
}

// short is the AXAG code of a refusal, or its first words.
func short(how string) string {
	if i := strings.Index(how, "AXAG_"); i >= 0 {
		code := how[i:]
		if j := strings.IndexAny(code, `" ,:)`); j > 0 {
			code = code[:j]
		}
		return code
	}
	how = strings.TrimPrefix(how, `error: calling "tools/call": sending "tools/call": `)
	how = strings.Replace(how, "rejected by transport: ", "HTTP ", 1)
	if len(how) > 60 {
		how = how[:60] + "…"
	}
	return strings.ReplaceAll(how, "|", "/")
}

func names(engines []engine) []string {
	var out []string
	for _, e := range engines {
		out = append(out, e.name)
	}
	return out
}

// runMCP verifies every engine on every protocol, then times the read on
// every row, the engines interleaved round by round.
func (r *runner) runMCP() {
	fmt.Println("\n## MCP: the same read through every engine")
	type set struct {
		work  time.Duration
		proto string
	}
	engines := map[set][]engine{}
	if r.verify { // the checks run on the first work only
		r.works = r.works[:1]
	}
	for _, w := range r.works {
		for _, p := range r.protos {
			engines[set{w, p}] = r.startMCPEngines(w, p)
		}
	}
	negotiated := map[string]map[string]string{} // proto -> engine -> version
	unserved := map[string]map[string]string{}
	for _, p := range r.protos {
		negotiated[p], unserved[p] = r.verifyMCP(engines[set{r.works[0], p}], p)
		for _, w := range r.works { // what is not served is left out of the rows
			engines[set{w, p}] = slices.DeleteFunc(engines[set{w, p}], func(e engine) bool { return unserved[p][e.name] != "" })
		}
	}
	if r.verify {
		return
	}
	maxAgents := 0
	for _, a := range r.agents {
		maxAgents = max(maxAgents, a)
	}
	tok := r.bearer("agent", "t0", "reader", "writer")
	type key struct {
		work  time.Duration
		proto string
		eng   string
	}
	sessions := map[key][]*mcp.ClientSession{}
	for _, w := range r.works {
		for _, p := range r.protos {
			for _, e := range engines[set{w, p}] {
				for range maxAgents {
					cs, err := connect(e.url, tok, p)
					if err != nil {
						fatalf("%s, %s, %s: %v", e.name, w, p, err)
					}
					if err := readOnce(cs); err != nil { // warm the connections
						fatalf("%s, %s, %s (protocol served %s): %v", e.name, w, p, cs.InitializeResult().ProtocolVersion, err)
					}
					sessions[key{w, p, e.name}] = append(sessions[key{w, p, e.name}], cs)
				}
			}
		}
	}
	var rows []mcpRow
	for _, w := range r.works {
		for _, p := range r.protos {
			for _, a := range r.agents {
				rows = append(rows, mcpRow{w, p, a})
			}
		}
	}
	results := map[mcpRow]map[string]series{}
	for round := range r.rounds {
		fmt.Fprintf(os.Stderr, "round %d/%d, load %s", round+1, r.rounds, loadavg())
		for _, row := range rows {
			if results[row] == nil {
				results[row] = map[string]series{}
			}
			for _, e := range rotate(engines[set{row.work, row.proto}], round) {
				ss := sessions[key{row.work, row.proto, e.name}][:row.agents]
				profiled := r.profileDuring(round, e, fmt.Sprintf("mcp-%s-%s-%d", row.proto, row.work, row.agents))
				s, err := drive(row.agents, r.duration, e.pids, func(a int, _ int64) error { return readOnce(ss[a]) })
				profiled()
				if err != nil {
					fatalf("%s, %s: %v", row, e.name, err)
				}
				results[row][e.name] = append(results[row][e.name], s)
			}
		}
	}
	fmt.Printf("\nMCP read, medians of %d rounds (ratios and added latency: medians of the per-round values); load average at the end: %s\n", r.rounds, loadavg())
	fmt.Println(joinRow("protocol, tool, agents", "engine (protocol served)", "calls/s", "of direct", "of ReverseProxy", "of ToolHive", "p50 added", "p99 added", "CPU/call", "peak RSS"))
	fmt.Println(joinRow("---", "---", "---", "---", "---", "---", "---", "---", "---", "---"))
	for _, row := range rows {
		res := results[row]
		direct, proxy, thv := res["direct"], res["ReverseProxy"], res["ToolHive"]
		for _, e := range engines[set{row.work, row.proto}] {
			s := res[e.name]
			ofThv := "—"
			if thv != nil && e.name != "ToolHive" {
				ofThv = pct(ratio(s, thv))
			}
			p50, p99, ofDirect, ofProxy := "—", "—", "—", "—"
			if e.name != "direct" {
				p50 = signed(added(s, direct, func(x sample) time.Duration { return x.p50 })) + " ms"
				p99 = signed(added(s, direct, func(x sample) time.Duration { return x.p99 })) + " ms"
				ofDirect = pct(ratio(s, direct))
			} else {
				p50 = fmt.Sprintf("(%.2f ms)", s.med(func(x sample) float64 { return ms(x.p50) }))
				p99 = fmt.Sprintf("(%.2f ms)", s.med(func(x sample) float64 { return ms(x.p99) }))
			}
			if e.name != "ReverseProxy" && e.name != "direct" {
				ofProxy = pct(ratio(s, proxy))
			}
			fmt.Println(joinRow(row.String(), e.name+" ("+negotiated[row.proto][e.name]+")",
				fmt.Sprintf("%.0f", s.med(func(x sample) float64 { return x.callsPerSec })),
				ofDirect, ofProxy, ofThv, p50, p99, cpuStr(s), rssStr(s)))
		}
	}
	for _, ss := range sessions {
		for _, cs := range ss {
			cs.Close()
		}
	}
}
