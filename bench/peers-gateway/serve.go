package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// httpClient keeps an idle connection per agent; the bearer token is set
// per request.
var httpClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: t}
}()

const readBody = `{"path":"docs/intro.md"}`

// post calls POST base/tools/name/call with body and the given headers.
func post(base, name, body string, hdr map[string]string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/tools/"+name+"/call", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func auth(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

// readHTTP is one read over HTTP, checked: 200 and the document.
func readHTTP(base, tok string) error {
	code, b, err := post(base, "read", readBody, auth(tok))
	if err != nil {
		return err
	}
	if code != http.StatusOK || !strings.Contains(string(b), "AI agents") {
		return fmt.Errorf("read: HTTP %d: %.200s", code, b)
	}
	return nil
}

// startServe starts "axgate serve" in front of upstream, with Redis when
// redis is not empty.
func (r *runner) startServe(name, upstream, redis string) *proc {
	addr := freeAddr()
	argv, admin := r.withProfile(r.axgate, "serve", "--manifest", r.manifest, "--upstream", upstream, "--listen", addr, "--jwks", r.jwks)
	if redis != "" {
		argv = append(argv, "--redis", redis)
	}
	p := r.start(name, addr, argv...)
	p.admin = admin
	return p
}

// runServe times the read over HTTP directly, through ReverseProxy and
// through "axgate serve", after checking that serve allows and refuses as
// the manifest says.
func (r *runner) runServe() {
	fmt.Println("\n## axgate serve against ReverseProxy: the same read over HTTP")
	up := r.startSelf("http-upstream", "http-upstream")
	upURL := "http://" + up.addr
	proxy := r.startSelf("proxy-http", "proxy", "-target", upURL)
	serve := r.startServe("axgate-serve", upURL, "")
	engines := []engine{
		{name: "direct", url: upURL},
		{name: "ReverseProxy", url: "http://" + proxy.addr, pids: []int{proxy.cmd.Process.Pid}},
		{name: "axgate serve", url: "http://" + serve.addr, pids: []int{serve.cmd.Process.Pid}, enforcing: true, admin: serve.admin},
	}
	rw, none := r.bearer("agent", "t0", "reader", "writer"), r.bearer("agent", "t0")
	httpChecks := []struct {
		name, tool, body, tok, enforced string
	}{
		{"read, role reader", "read", readBody, rw, "allowed"},
		{"write docs/, role writer", "write", `{"path":"docs/a.md","text":"new"}`, rw, "allowed"},
		{"write outside docs/ (argument rule)", "write", `{"path":"etc/passwd","text":"new"}`, rw, "refused"},
		{"read without the role", "read", readBody, none, "refused"},
	}
	fmt.Println("\nVerification:")
	fmt.Println()
	fmt.Println(joinRow(append([]string{"check"}, names(engines)...)...))
	fmt.Println(joinRow("---", "---", "---", "---"))
	failed := false
	for _, c := range httpChecks {
		row := []string{c.name}
		for _, e := range engines {
			code, b, err := post(e.url, c.tool, c.body, auth(c.tok))
			if err != nil {
				fatalf("%s: %v", e.name, err)
			}
			v := "allowed"
			if code != http.StatusOK {
				v = "refused"
			}
			want := "allowed"
			if e.enforcing {
				want = c.enforced
			}
			cell := v
			if v == "refused" {
				cell += fmt.Sprintf(" (%d %s)", code, short(string(b)))
			}
			if v != want {
				cell, failed = "**"+cell+", want "+want+"**", true
			}
			row = append(row, cell)
		}
		fmt.Println(joinRow(row...))
	}
	if failed {
		fatalf("serve does not decide as the manifest says")
	}
	if r.verify {
		return
	}
	results := map[int]map[string]series{}
	for round := range r.rounds {
		for _, a := range r.agents {
			if results[a] == nil {
				results[a] = map[string]series{}
			}
			for _, e := range rotate(engines, round) {
				profiled := r.profileDuring(round, e, fmt.Sprintf("serve-%d", a))
				s, err := drive(a, r.duration, e.pids, func(int, int64) error { return readHTTP(e.url, rw) })
				profiled()
				if err != nil {
					fatalf("serve, %d agents, %s: %v", a, e.name, err)
				}
				results[a][e.name] = append(results[a][e.name], s)
			}
		}
	}
	fmt.Printf("\nHTTP read, medians of %d rounds; load average at the end: %s\n", r.rounds, loadavg())
	fmt.Println(joinRow("agents", "engine", "calls/s", "of direct", "of ReverseProxy", "p50 added", "p99 added", "CPU/call", "peak RSS"))
	fmt.Println(joinRow("---", "---", "---", "---", "---", "---", "---", "---", "---"))
	for _, a := range r.agents {
		res := results[a]
		for _, e := range engines {
			s := res[e.name]
			ofDirect, ofProxy, p50, p99 := "—", "—", "", ""
			if e.name == "direct" {
				p50 = fmt.Sprintf("(%.2f ms)", s.med(func(x sample) float64 { return ms(x.p50) }))
				p99 = fmt.Sprintf("(%.2f ms)", s.med(func(x sample) float64 { return ms(x.p99) }))
			} else {
				ofDirect = pct(ratio(s, res["direct"]))
				p50 = signed(added(s, res["direct"], func(x sample) time.Duration { return x.p50 })) + " ms"
				p99 = signed(added(s, res["direct"], func(x sample) time.Duration { return x.p99 })) + " ms"
			}
			if e.name == "axgate serve" {
				ofProxy = pct(ratio(s, res["ReverseProxy"]))
			}
			fmt.Println(joinRow(strconv.Itoa(a), e.name, fmt.Sprintf("%.0f", s.med(func(x sample) float64 { return x.callsPerSec })),
				ofDirect, ofProxy, p50, p99, cpuStr(s), rssStr(s)))
		}
	}
}

// redisCount is what a redis-counter has seen.
type redisCount struct {
	Commands   int64 `json:"commands"`
	RoundTrips int64 `json:"round_trips"`
}

func countOf(addr string) redisCount {
	resp, err := http.Get("http://" + addr + "/count")
	if err != nil {
		fatalf("redis-counter: %v", err)
	}
	defer resp.Body.Close()
	var c redisCount
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		fatalf("redis-counter: %v", err)
	}
	return c
}

// flushDB empties the run's Redis database (FLUSHDB on that DB only).
func flushDB(redisURL string) {
	u, err := url.Parse(redisURL)
	if err != nil {
		fatalf("-redis: %v", err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || db == "0" {
		fatalf("-redis: name a database of its own (not 0): it is flushed")
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		fatalf("redis: %v", err)
	}
	defer c.Close()
	replies := 2
	if u.User != nil { // AUTH [user] password first
		pw, _ := u.User.Password()
		args := []string{"AUTH", pw}
		if name := u.User.Username(); name != "" {
			args = []string{"AUTH", name, pw}
		}
		fmt.Fprintf(c, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(c, "$%d\r\n%s\r\n", len(a), a)
		}
		replies++
	}
	fmt.Fprintf(c, "SELECT %s\r\nFLUSHDB\r\n", db)
	br := bufio.NewReader(c)
	for range replies {
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "+OK") {
			fatalf("redis: %q %v", line, err)
		}
	}
}

// argsDigest is the arguments' RFC 8785 SHA-256 (these arguments are
// already canonical: one ASCII string member).
func argsDigest(canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// runShared times rate-limited and confirmed calls through one "axgate
// serve" replica and through two sharing one Redis, counting the Redis
// commands and round trips each call costs, after checking that no
// confirmation token is spent twice across the replicas and that the
// replicas share one rate limit.
func (r *runner) runShared() {
	fmt.Println("\n## Shared state: one `axgate serve` replica against two sharing one Redis")
	u, err := url.Parse(r.redisURL)
	if err != nil {
		fatalf("-redis: %v", err)
	}
	flushDB(r.redisURL)
	up := r.startSelf("http-upstream-shared", "http-upstream")
	upURL := "http://" + up.addr
	var replicas []*proc
	var counters []string
	for _, name := range []string{"a", "b"} {
		httpAddr := freeAddr()
		ctr := r.startSelf("redis-counter-"+name, "redis-counter", "-target", u.Host, "-http", httpAddr)
		counters = append(counters, httpAddr)
		via := *u // the same Redis URL, through the counter
		via.Host = ctr.addr
		replicas = append(replicas, r.startServe("axgate-serve-"+name, upURL, via.String()))
	}
	// Tokens issued before a replica started are refused when the replica
	// keeps its replay store in memory; with Redis they are not, but wait a
	// second all the same so that iat is after every start.
	time.Sleep(1100 * time.Millisecond)
	base := func(i int) string { return "http://" + replicas[i].addr }
	issuer := token.Issuer{Signer: r.signer}
	writer := middleware.Principal{ID: "agent", Tenant: "t0", Roles: []string{"writer"}}
	publishDigest := argsDigest(readBody)
	writerTok := r.bearer("agent", "t0", "writer")
	confirm := func() string {
		t, _, err := issuer.Confirmation(writer, "doc.publish", publishDigest, 5*time.Minute)
		if err != nil {
			fatalf("%v", err)
		}
		return t
	}
	publish := func(replica int, conf string) (int, []byte, error) {
		h := auth(writerTok)
		h["X-AXAG-Confirmation"] = conf
		return post(base(replica), "publish", readBody, h)
	}

	// Verification 1: every confirmation token runs once, whichever
	// replica it reaches first; the other replica refuses it.
	const races = 100
	spentTwice, ranOnce := 0, 0
	for range races {
		conf := confirm()
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i := range 2 {
			wg.Go(func() {
				code, _, err := publish(i, conf)
				if err != nil {
					fatalf("publish: %v", err)
				}
				codes[i] = code
			})
		}
		wg.Wait()
		ok := 0
		for _, c := range codes {
			if c == http.StatusOK {
				ok++
			}
		}
		switch ok {
		case 1:
			ranOnce++
		case 2:
			spentTwice++
		}
	}
	fmt.Printf("\nVerification: %d confirmation tokens, each sent to both replicas at once: %d ran once, %d ran twice, %d never ran\n",
		races, ranOnce, spentTwice, races-ranOnce-spentTwice)
	if spentTwice > 0 || ranOnce != races {
		fatalf("a confirmation token ran twice or not at all")
	}
	// Verification 2: the replicas share one rate limit (peek: 5 a minute).
	peekTok := r.bearer("agent", "peek-tenant", "reader")
	allowed := 0
	for i := range 10 {
		code, _, err := post(base(i%2), "peek", readBody, auth(peekTok))
		if err != nil {
			fatalf("peek: %v", err)
		}
		if code == http.StatusOK {
			allowed++
		}
	}
	fmt.Printf("Verification: 10 calls of a 5/minute action, alternating between the replicas: %d allowed\n", allowed)
	if allowed != 5 {
		fatalf("the replicas do not share the rate limit")
	}
	if r.verify {
		return
	}

	// 10,000 tenants: one bearer token each, the calls going round them.
	toks := make([]string, r.tenants)
	for i := range toks {
		toks[i] = r.bearer("agent", fmt.Sprintf("t%05d", i), "reader")
	}
	// Warm the agents' connections to both replicas and the replicas'
	// connections to Redis.
	for i := range 4 * len(r.agents) * 8 {
		if code, b, err := post(base(i%2), "stat", readBody, auth(toks[i%len(toks)])); err != nil || code != http.StatusOK {
			fatalf("stat: HTTP %d %.200s %v", code, b, err)
		}
	}
	type shRow struct {
		kind     string
		replicas int
		agents   int
	}
	var rows []shRow
	for _, a := range r.agents {
		for _, kind := range []string{"rate-limited", "confirmed"} {
			for _, n := range []int{1, 2} {
				rows = append(rows, shRow{kind, n, a})
			}
		}
	}
	type shResult struct {
		s              series
		cmds, trips    []float64
		refused, calls int64
	}
	results := map[shRow]*shResult{}
	pids := []int{replicas[0].cmd.Process.Pid, replicas[1].cmd.Process.Pid}
	for round := range r.rounds {
		for _, row := range rotate(rows, round) {
			var c0 []redisCount
			for _, c := range counters {
				c0 = append(c0, countOf(c))
			}
			var mu sync.Mutex
			var refused int64
			call := func(_ int, i int64) error {
				replica := 0
				if row.replicas == 2 {
					replica = int(i % 2)
				}
				var code int
				var b []byte
				var err error
				if row.kind == "rate-limited" {
					code, b, err = post(base(replica), "stat", readBody, auth(toks[int(i)%len(toks)]))
				} else {
					code, b, err = publish(replica, confirm())
				}
				if err != nil {
					return err
				}
				if code != http.StatusOK {
					mu.Lock()
					refused++
					mu.Unlock()
					return fmt.Errorf("%s: HTTP %d: %.300s", row.kind, code, b)
				}
				return nil
			}
			s, err := drive(row.agents, r.duration, pids[:row.replicas], call)
			if err != nil {
				fatalf("shared state, %d replicas: %v", row.replicas, err)
			}
			var cmds, trips int64
			for i, c := range counters {
				c1 := countOf(c)
				cmds += c1.Commands - c0[i].Commands
				trips += c1.RoundTrips - c0[i].RoundTrips
			}
			res := results[row]
			if res == nil {
				res = &shResult{}
				results[row] = res
			}
			res.s = append(res.s, s)
			res.cmds = append(res.cmds, float64(cmds)/float64(s.calls))
			res.trips = append(res.trips, float64(trips)/float64(s.calls))
			res.refused += refused
			res.calls += s.calls
		}
	}
	fmt.Printf("\nShared state, medians of %d rounds (%d tenants in the rate-limit keys); load average at the end: %s\n", r.rounds, r.tenants, loadavg())
	fmt.Println(joinRow("call, agents", "replicas", "calls/s", "2 replicas of 1", "p50", "p99", "Redis commands/call", "Redis round trips/call", "CPU/call (replicas)", "peak RSS", "refused"))
	fmt.Println(joinRow("---", "---", "---", "---", "---", "---", "---", "---", "---", "---", "---"))
	for _, row := range rows {
		res := results[row]
		rel := "—"
		if row.replicas == 2 {
			rel = pct(ratio(res.s, results[shRow{row.kind, 1, row.agents}].s))
		}
		fmt.Println(joinRow(fmt.Sprintf("%s, %d", row.kind, row.agents), strconv.Itoa(row.replicas),
			fmt.Sprintf("%.0f", res.s.med(func(x sample) float64 { return x.callsPerSec })), rel,
			fmt.Sprintf("%.2f ms", res.s.med(func(x sample) float64 { return ms(x.p50) })),
			fmt.Sprintf("%.2f ms", res.s.med(func(x sample) float64 { return ms(x.p99) })),
			fmt.Sprintf("%.2f", median(res.cmds)), fmt.Sprintf("%.2f", median(res.trips)),
			cpuStr(res.s), rssStr(res.s), fmt.Sprintf("%d of %d", res.refused, res.calls)))
	}
}
