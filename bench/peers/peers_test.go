package main

import (
	"strings"
	"testing"
)

// TestEnginesDecide: every engine gives every case's expected decision
// (the benchmark's numbers compare engines doing the same work), and refuses
// what it must refuse when the call is altered.
func TestEnginesDecide(t *testing.T) {
	s, err := newSetup()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.verify(); err != nil {
		t.Fatal(err)
	}
	// Altered calls every engine must refuse: another tenant, a missing
	// role, a token for other arguments, no token.
	for _, c := range s.cases {
		if !c.Want.Allow {
			continue
		}
		alter := map[string]func(r *request){
			"other_tenant": func(r *request) { r.Args = []byte(strings.Replace(string(r.Args), `"acme"`, `"globex"`, 1)) },
			"no_role":      func(r *request) { r.Who.Roles = []string{"viewer"} },
		}
		if c.Token {
			alter["token_for_other_args"] = func(r *request) { r.Args = []byte(strings.Replace(string(r.Args), "d-1842", "d-1843", 1)) }
			alter["no_token"] = func(r *request) { r.Token = "" }
		}
		for name, f := range alter {
			r := c.Req
			r.Who.Roles = append([]string(nil), r.Who.Roles...)
			f(&r)
			for _, e := range s.engines {
				d, err := e.decide(&r)
				if err != nil {
					t.Fatalf("%s %s %s: %v", e.name(), c.Name, name, err)
				}
				if d.Allow {
					t.Errorf("%s allows %s altered (%s)", e.name(), c.Name, name)
				}
			}
		}
	}
}

// BenchmarkPeers is every case on every engine, for go test -bench and
// benchstat; the round-by-round comparison is `go run . -rounds N`.
func BenchmarkPeers(b *testing.B) {
	s, err := newSetup()
	if err != nil {
		b.Fatal(err)
	}
	if err := s.verify(); err != nil {
		b.Fatal(err)
	}
	for _, c := range s.cases {
		for _, e := range s.engines {
			b.Run(c.Name+"/"+e.name(), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := e.decide(&c.Req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
