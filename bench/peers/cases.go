package main

import (
	"fmt"
	"strings"
)

// principal is the caller of every case.
type principal struct {
	ID     string
	Tenant string
	Roles  []string
}

// request is one tool call as every engine receives it: the raw arguments,
// the authenticated caller and the confirmation token, if any.
type request struct {
	Tool   string
	Intent string
	Args   []byte
	Who    principal
	Token  string
}

// decision is an engine's answer: allowed, or refused with a number of
// parameter violations (0 for a refusal that is not about validation).
type decision struct {
	Allow      bool
	Violations int
}

// bench case: a request and the decision every engine must give.
type benchCase struct {
	Name  string
	Req   request
	Want  decision
	Token bool // the request carries a confirmation token minted per round
	// Small: a small call, where the goal is ≥ 10× faster than OPA.
	Small bool
}

var caller = principal{ID: "u-1", Tenant: "acme", Roles: []string{"editor"}}

// fields returns a fields array whose JSON is about size bytes.
func fields(size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q", fmt.Sprintf("section_%04d.paragraph", i))
	}
	return b.String()
}

func cases() []benchCase {
	read := func(name, extra string, small bool) benchCase {
		return benchCase{Name: name, Small: small, Want: decision{Allow: true}, Req: request{
			Tool: "doc_read", Intent: "doc.read", Who: caller,
			Args: []byte(`{"doc_id":"d-1842","tenant_id":"acme","format":"json","limit":20` + extra + `}`),
		}}
	}
	return []benchCase{
		read("read", "", true),
		read("read_1kb", `,"fields":[`+fields(960)+`]`, false),
		read("read_10kb", `,"fields":[`+fields(10200)+`]`, false),
		{Name: "write", Small: true, Want: decision{Allow: true}, Req: request{
			Tool: "doc_update", Intent: "doc.update", Who: caller,
			Args: []byte(`{"doc_id":"d-1842","tenant_id":"acme","from_page":3,"to_page":7,"title":"Q3 report"}`),
		}},
		{Name: "write_deny", Small: true, Want: decision{Allow: false}, Req: request{
			Tool: "doc_update", Intent: "doc.update", Who: caller,
			Args: []byte(`{"doc_id":"d-1842","tenant_id":"acme","from_page":7,"to_page":3,"title":"Q3 report"}`),
		}},
		{Name: "invalid", Small: true, Want: decision{Allow: false, Violations: 3}, Req: request{
			Tool: "doc_read", Intent: "doc.read", Who: caller,
			Args: []byte(`{"doc_id":"` + strings.Repeat("d", 70) + `","tenant_id":"acme","format":"pdf","limit":500}`),
		}},
		{Name: "confirmed", Token: true, Want: decision{Allow: true}, Req: request{
			Tool: "doc_delete", Intent: "doc.delete", Who: caller,
			Args: []byte(`{"doc_id":"d-1842","tenant_id":"acme"}`),
		}},
	}
}
