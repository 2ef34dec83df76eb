package main

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// step is one request of the walkthrough the shop prints at start: a curl
// command and what it should answer. The tests run the same steps against
// the server, so the printed walkthrough stays true.
type step struct {
	// Title says what the step shows.
	Title string
	// As names the person whose dev bearer token is sent ("" = none);
	// NAME_person is that person's token for the human endpoints.
	As     string
	Method string
	Path   string
	// Headers are extra request headers; values may use $VARS.
	Headers [][2]string
	// Body is the JSON body; it may use $VARS.
	Body string
	// Repeat sends the request this many times (default once).
	Repeat int
	// Status and Code are the expected answer (Code "" for a success).
	Status int
	Code   string
	// Capture stores the first string member Field of the answer in Var
	// for later steps.
	Capture *capture
}

type capture struct{ Var, Field string }

const placeOrderArgs = `{"cart_id":"$ALICE_CART","shipping_address_id":"addr-alice"}`

// walkthrough passes every gate of the shop once: first a refusal, then the
// call that gets through.
func walkthrough() []step {
	const refund = `{"order_id":"$ORDER","amount":10}`
	return []step{
		{Title: "Discovery needs no token: the tools with their input schemas and AXAG safety blocks",
			Method: "GET", Path: "/tools", Status: 200},
		{Title: "Validation (Tool Validation API) needs no token and runs nothing: every violation at once",
			Method: "POST", Path: "/tools/cart_add_item/validate", Body: `{"product_id":"lamp","quantity":0}`, Status: 200},
		{Title: "No bearer token → 401 AXGATE_UNAUTHENTICATED",
			Method: "POST", Path: "/tools/product_search/call", Body: `{"query":"lamp"}`, Status: 401, Code: "AXGATE_UNAUTHENTICATED"},
		{Title: "A tool the manifest does not declare → 404 AXAG_INTENT_NOT_FOUND",
			As: "alice", Method: "POST", Path: "/tools/product_delete/call", Body: `{}`, Status: 404, Code: "AXAG_INTENT_NOT_FOUND"},
		{Title: "Parameters are checked against the manifest → 400 AXAG_OUT_OF_RANGE",
			As: "alice", Method: "POST", Path: "/tools/product_search/call", Body: `{"query":"lamp","limit":500}`, Status: 400, Code: "AXAG_OUT_OF_RANGE"},
		{Title: "A misspelled argument is refused, not ignored → 400 AXGATE_UNKNOWN_PARAM",
			As: "alice", Method: "POST", Path: "/tools/product_search/call", Body: `{"query":"lamp","categroy":"home"}`, Status: 400, Code: "AXGATE_UNKNOWN_PARAM"},
		{Title: "Valid arguments → 200",
			As: "alice", Method: "POST", Path: "/tools/product_search/call", Body: `{"query":"lamp"}`, Status: 200},
		{Title: `A token whose scope grants only "read" cannot write → 403 AXAG_SCOPE_VIOLATION`,
			As: "alice_readonly", Method: "POST", Path: "/tools/cart_add_item/call", Body: `{"product_id":"` + lampID + `","quantity":1}`, Status: 403, Code: "AXAG_SCOPE_VIOLATION"},
		{Title: "scope: user — an account_id must be the caller's own → 403 AXAG_SCOPE_VIOLATION",
			As: "alice", Method: "POST", Path: "/tools/account_delete/call", Body: `{"account_id":"$BOB_ID","confirmation_text":"DELETE"}`, Status: 403, Code: "AXAG_SCOPE_VIOLATION"},
		{Title: "required_roles: admin → 403 AXAG_ROLE_INSUFFICIENT for a customer",
			As: "alice", Method: "POST", Path: "/tools/user_list/call", Body: `{}`, Status: 403, Code: "AXAG_ROLE_INSUFFICIENT"},
		{Title: "… and 200 for an admin of the same tenant",
			As: "dave", Method: "POST", Path: "/tools/user_list/call", Body: `{}`, Status: 200},
		{Title: "scope: tenant — another tenant's invoices → 403 AXAG_TENANT_BOUNDARY",
			As: "alice", Method: "POST", Path: "/tools/invoice_list/call", Body: `{"tenant_id":"globex"}`, Status: 403, Code: "AXAG_TENANT_BOUNDARY"},
		{Title: "… a claimed tenant (X-AXAG-Tenant) that is not the caller's → 403 AXAG_TENANT_BOUNDARY",
			As: "alice", Method: "POST", Path: "/tools/invoice_list/call", Headers: [][2]string{{"X-AXAG-Tenant", "globex"}}, Body: `{"tenant_id":"acme"}`, Status: 403, Code: "AXAG_TENANT_BOUNDARY"},
		{Title: "… and the caller's own tenant → 200",
			As: "alice", Method: "POST", Path: "/tools/invoice_list/call", Headers: [][2]string{{"X-AXAG-Tenant", "acme"}}, Body: `{"tenant_id":"acme"}`, Status: 200},
		{Title: `Precondition "cart is not empty" → 412 AXAG_PRECONDITION_FAILED`,
			As: "alice", Method: "POST", Path: "/tools/order_place/call", Body: placeOrderArgs, Status: 412, Code: "AXAG_PRECONDITION_FAILED"},
		{Title: "Add a lamp to the cart, with an idempotency key → 200",
			As: "alice", Method: "POST", Path: "/tools/cart_add_item/call", Headers: [][2]string{{"Idempotency-Key", "add-lamp-1"}}, Body: `{"product_id":"` + lampID + `","quantity":2}`, Status: 200},
		{Title: "The same key and arguments again → 200, the stored result (Idempotent-Replayed: true); the cart still holds 2",
			As: "alice", Method: "POST", Path: "/tools/cart_add_item/call", Headers: [][2]string{{"Idempotency-Key", "add-lamp-1"}}, Body: `{"product_id":"` + lampID + `","quantity":2}`, Status: 200},
		{Title: "The same key with other arguments → 422 AXGATE_IDEMPOTENCY_KEY_REUSED",
			As: "alice", Method: "POST", Path: "/tools/cart_add_item/call", Headers: [][2]string{{"Idempotency-Key", "add-lamp-1"}}, Body: `{"product_id":"` + lampID + `","quantity":5}`, Status: 422, Code: "AXGATE_IDEMPOTENCY_KEY_REUSED"},
		{Title: "order.place is high risk: no confirmation → 428 AXAG_CONFIRMATION_MISSING (details carry the message to show)",
			As: "alice", Method: "POST", Path: "/tools/order_place/call", Body: placeOrderArgs, Status: 428, Code: "AXAG_CONFIRMATION_MISSING"},
		{Title: "The agent cannot confirm for Alice: her bearer token is refused at the human endpoint → 401 AXGATE_UNAUTHENTICATED",
			As: "alice", Method: "POST", Path: "/confirmations", Body: `{"tool":"order_place","arguments":` + placeOrderArgs + `}`, Status: 401, Code: "AXGATE_UNAUTHENTICATED"},
		{Title: "Alice herself confirms this exact call in the shop's UI (human endpoint, her person token) → a single-use token",
			As: "alice_person", Method: "POST", Path: "/confirmations", Body: `{"tool":"order_place","arguments":` + placeOrderArgs + `}`, Status: 200,
			Capture: &capture{"CONFIRMATION", "token"}},
		{Title: "The agent calls again with the token → 200, the order is placed",
			As: "alice", Method: "POST", Path: "/tools/order_place/call", Headers: [][2]string{{"X-AXAG-Confirmation", "$CONFIRMATION"}}, Body: placeOrderArgs, Status: 200,
			Capture: &capture{"ORDER", "order_id"}},
		{Title: "Relational constraint window_end > window_start → 412 AXAG_PRECONDITION_FAILED",
			As: "alice", Method: "POST", Path: "/tools/delivery_schedule/call", Body: `{"order_id":"$ORDER","window_start":14,"window_end":10}`, Status: 412, Code: "AXAG_PRECONDITION_FAILED"},
		{Title: "… and a window that holds → 200",
			As: "alice", Method: "POST", Path: "/tools/delivery_schedule/call", Body: `{"order_id":"$ORDER","window_start":10,"window_end":14}`, Status: 200},
		{Title: "rate_limit 3/minute: three coupon calls pass …",
			As: "alice", Method: "POST", Path: "/tools/coupon_apply/call", Body: `{"code":"SAVE10"}`, Repeat: 3, Status: 200},
		{Title: "… the fourth → 429 AXAG_RATE_LIMITED with Retry-After",
			As: "alice", Method: "POST", Path: "/tools/coupon_apply/call", Body: `{"code":"SAVE10"}`, Status: 429, Code: "AXAG_RATE_LIMITED"},
		{Title: "A refund needs 2 approvals from finance_manager/finance_director → 428 AXAG_APPROVAL_MISSING with an approval request id",
			As: "alice", Method: "POST", Path: "/tools/refund_process/call", Body: refund, Status: 428, Code: "AXAG_APPROVAL_MISSING",
			Capture: &capture{"REQUEST", "approval_request_id"}},
		{Title: "Bob (finance_manager) sees it in his inbox",
			As: "bob_person", Method: "GET", Path: "/approvals", Status: 200},
		{Title: "Alice cannot approve her own refund, nor without an approval role → 403 AXAG_APPROVAL_INVALID",
			As: "alice_person", Method: "POST", Path: "/approvals/$REQUEST", Body: `{"approve":true}`, Status: 403, Code: "AXAG_APPROVAL_INVALID"},
		{Title: "Bob approves → an approval token",
			As: "bob_person", Method: "POST", Path: "/approvals/$REQUEST", Body: `{"approve":true,"reason":"damaged in transit"}`, Status: 200,
			Capture: &capture{"APPROVAL_BOB", "token"}},
		{Title: "One approval of two → still 428 AXAG_APPROVAL_MISSING",
			As: "alice", Method: "POST", Path: "/tools/refund_process/call", Headers: [][2]string{{"X-AXAG-Approval", "$APPROVAL_BOB"}}, Body: refund, Status: 428, Code: "AXAG_APPROVAL_MISSING"},
		{Title: "Carol (finance_director) approves too",
			As: "carol_person", Method: "POST", Path: "/approvals/$REQUEST", Body: `{"approve":true}`, Status: 200,
			Capture: &capture{"APPROVAL_CAROL", "token"}},
		{Title: "Both approvals (comma-separated, or the header twice) → 200, refunded",
			As: "alice", Method: "POST", Path: "/tools/refund_process/call", Headers: [][2]string{{"X-AXAG-Approval", "$APPROVAL_BOB,$APPROVAL_CAROL"}}, Body: refund, Status: 200},
	}
}

var varRE = regexp.MustCompile(`\$[A-Z][A-Z0-9_]*`)

// expand replaces $VARS with their values.
func expand(s string, vars map[string]string) string {
	return varRE.ReplaceAllStringFunc(s, func(v string) string {
		if val, ok := vars[v[1:]]; ok {
			return val
		}
		return v
	})
}

// tokenVar is the shell variable holding a person's dev bearer token.
func tokenVar(name string) string { return strings.ToUpper(name) }

// printWalkthrough writes the tokens as shell exports and each step as a
// curl command.
func printWalkthrough(w io.Writer, base string, tokens, facts map[string]string) {
	fmt.Fprintln(w, "# Dev bearer tokens (valid 24 hours), then a walk through every gate.")
	fmt.Fprintln(w, "# Paste these into a shell:")
	names := make([]string, 0, len(tokens))
	for n := range tokens {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "export %s='%s'\n", tokenVar(n), tokens[n])
	}
	fnames := make([]string, 0, len(facts))
	for n := range facts {
		fnames = append(fnames, n)
	}
	sort.Strings(fnames)
	for _, n := range fnames {
		fmt.Fprintf(w, "export %s='%s'\n", n, facts[n])
	}
	fmt.Fprintf(w, "export SHOP='%s'\n\n", base)
	for i, s := range walkthrough() {
		fmt.Fprintf(w, "# %d. %s\n", i+1, s.Title)
		fmt.Fprintln(w, curl(s))
		fmt.Fprintln(w)
	}
}

// curl renders a step as a shell command; a captured field is extracted
// with sed so that nothing beyond curl and sed is needed.
func curl(s step) string {
	var b strings.Builder
	b.WriteString("curl -s")
	if s.Capture == nil {
		b.WriteString("i")
	}
	if s.Method != "GET" {
		b.WriteString(" -X " + s.Method)
	}
	b.WriteString(` "$SHOP` + s.Path + `"`)
	if s.As != "" {
		b.WriteString(` -H "Authorization: Bearer $` + tokenVar(s.As) + `"`)
	}
	for _, h := range s.Headers {
		b.WriteString(` -H "` + h[0] + ": " + h[1] + `"`)
	}
	if s.Body != "" {
		// Double quotes so that $VARS expand; the JSON's own quotes escaped.
		b.WriteString(` -H "Content-Type: application/json" -d "` + strings.ReplaceAll(s.Body, `"`, `\"`) + `"`)
	}
	cmd := b.String()
	switch {
	case s.Capture != nil:
		cmd = fmt.Sprintf(`%s=$(%s | sed -nE 's/.*"%s":"([^"]*)".*/\1/p'); echo "%s=$%s"`, s.Capture.Var, cmd, s.Capture.Field, s.Capture.Var, s.Capture.Var)
	case s.Repeat > 1:
		cmd = fmt.Sprintf("for i in $(seq %d); do %s; echo; done", s.Repeat, cmd)
	default:
		cmd += "; echo"
	}
	return cmd
}
