package main

import (
	"crypto/ed25519"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// engine decides a request.
type engine interface {
	name() string
	decide(r *request) (decision, error)
}

// setup is the engines (axgate first) and the cases, with the key that signs
// the confirmation tokens.
type setup struct {
	engines []engine
	cases   []benchCase
	issuer  token.Issuer
}

func newSetup() (*setup, error) {
	signer, err := token.GenerateDevKey("bench")
	if err != nil {
		return nil, err
	}
	pub := signer.PublicKey().Public.(ed25519.PublicKey)
	ax, err := newAxgate(signer)
	if err != nil {
		return nil, fmt.Errorf("axgate: %w", err)
	}
	fl, err := newFloor(pub)
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	ce, err := newCedar(pub)
	if err != nil {
		return nil, fmt.Errorf("cedar: %w", err)
	}
	op, err := newOPA(pub)
	if err != nil {
		return nil, fmt.Errorf("opa: %w", err)
	}
	s := &setup{engines: []engine{ax, fl, ce, op}, cases: cases(), issuer: token.Issuer{Signer: signer}}
	return s, s.mint()
}

// mint signs a fresh confirmation token for every case that carries one (a
// token lives 5 minutes; the runner mints again each round).
func (s *setup) mint() error {
	for i := range s.cases {
		c := &s.cases[i]
		if !c.Token {
			continue
		}
		call := middleware.NewCall(c.Req.Tool, c.Req.Args, middleware.Principal{ID: c.Req.Who.ID, Tenant: c.Req.Who.Tenant})
		digest, err := call.ArgsSHA256()
		if err != nil {
			return err
		}
		tok, _, err := s.issuer.Confirmation(call.Principal, c.Req.Intent, digest, token.DefaultConfirmationLifetime)
		if err != nil {
			return err
		}
		c.Req.Token = tok
	}
	return nil
}

// verify checks that every engine gives every case's expected decision (the
// violation count only where the engine reports violations: Cedar does not).
func (s *setup) verify() error {
	for _, c := range s.cases {
		for _, e := range s.engines {
			d, err := e.decide(&c.Req)
			if err != nil {
				return fmt.Errorf("%s on %s: %w", e.name(), c.Name, err)
			}
			want := c.Want
			if e.name() == "cedar" {
				want.Violations = 0
			}
			if d != want {
				return fmt.Errorf("%s on %s: got %+v, want %+v", e.name(), c.Name, d, want)
			}
		}
	}
	return nil
}

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sample is one engine's run of one case in one round.
type sample struct {
	cpu, wall time.Duration // per call
	allocs    float64       // per call
}

// measure runs e on r n times.
func measure(e engine, r *request, n int) sample {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	c0, w0 := cpuTime(), time.Now()
	for range n {
		if _, err := e.decide(r); err != nil {
			panic(err)
		}
	}
	w1, c1 := time.Now(), cpuTime()
	runtime.ReadMemStats(&m1)
	return sample{cpu: (c1 - c0) / time.Duration(n), wall: w1.Sub(w0) / time.Duration(n),
		allocs: float64(m1.Mallocs-m0.Mallocs) / float64(n)}
}

// calibrate finds how many calls of e on r take about d.
func calibrate(e engine, r *request, d time.Duration) int {
	n := 1
	for {
		start := time.Now()
		for range n {
			e.decide(r)
		}
		el := time.Since(start)
		if el >= d/4 || n >= 1<<24 {
			return max(1, int(float64(n)*float64(d)/float64(max(el, time.Microsecond))))
		}
		n *= 4
	}
}

// results[case][engine] are the samples of every round.
type results map[string]map[string][]sample

func (s *setup) run(rounds int, benchtime time.Duration, log io.Writer) (results, error) {
	res := results{}
	counts := map[[2]string]int{}
	for _, c := range s.cases {
		res[c.Name] = map[string][]sample{}
		for _, e := range s.engines {
			counts[[2]string{c.Name, e.name()}] = calibrate(e, &c.Req, benchtime)
		}
	}
	for round := range rounds {
		if err := s.mint(); err != nil {
			return nil, err
		}
		if err := s.verify(); err != nil {
			return nil, err
		}
		for _, c := range s.cases {
			// Rotate the order each round, so that a change of the
			// machine's load does not always fall on the same engine.
			order := slices.Clone(s.engines)
			k := round % len(order)
			order = append(order[k:], order[:k]...)
			for _, e := range order {
				smp := measure(e, &c.Req, counts[[2]string{c.Name, e.name()}])
				res[c.Name][e.name()] = append(res[c.Name][e.name()], smp)
			}
		}
		fmt.Fprintf(log, "round %d/%d done\n", round+1, rounds)
	}
	return res, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	sort.Float64s(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// table prints, per case, each engine's median CPU µs per call and allocs,
// and the median over rounds of each peer's CPU time over axgate's in the same
// round.
func (s *setup) table(w io.Writer, res results) {
	fmt.Fprintln(w, "| case | axgate µs (allocs) | floor µs | Cedar µs | OPA µs | floor/axgate | Cedar/axgate | OPA/axgate |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, c := range s.cases {
		row := res[c.Name]
		us := func(name string) float64 {
			var xs []float64
			for _, x := range row[name] {
				xs = append(xs, float64(x.cpu)/1e3)
			}
			return median(xs)
		}
		allocs := func(name string) float64 {
			var xs []float64
			for _, x := range row[name] {
				xs = append(xs, x.allocs)
			}
			return median(xs)
		}
		ratio := func(name string) float64 {
			var xs []float64
			for i, x := range row[name] {
				xs = append(xs, float64(x.cpu)/float64(row["axgate"][i].cpu))
			}
			return median(xs)
		}
		fmt.Fprintf(w, "| %s | %.2f (%.0f) | %.2f (%.0f) | %.2f (%.0f) | %.1f (%.0f) | %.2f× | %.2f× | %.1f× |\n", c.Name,
			us("axgate"), allocs("axgate"), us("floor"), allocs("floor"), us("cedar"), allocs("cedar"), us("opa"), allocs("opa"),
			ratio("floor"), ratio("cedar"), ratio("opa"))
	}
	fmt.Fprintln(w, "\nµs: median CPU time per call over the rounds (allocations per call in parentheses); peer/axgate: median of the per-round ratios of CPU time (> 1: axgate costs less).")
}

func main() {
	rounds := flag.Int("rounds", 8, "rounds; each runs every engine once on every case, in an order rotated each round")
	benchtime := flag.Duration("benchtime", 200*time.Millisecond, "wall time of one engine on one case in one round")
	flag.Parse()
	s, err := newSetup()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := s.verify(); err != nil {
		fmt.Fprintln(os.Stderr, "verification failed:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "every engine gives the expected decision on every case; %d rounds of %v per engine and case\n", *rounds, *benchtime)
	res, err := s.run(*rounds, *benchtime, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%s, GOMAXPROCS %d, %d rounds, benchtime %v\n\n", runtime.Version(), runtime.GOMAXPROCS(0), *rounds, *benchtime)
	s.table(os.Stdout, res)
}
