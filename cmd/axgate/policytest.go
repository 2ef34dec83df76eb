package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

const testAbout = `
Runs policy test suites, as "opa test" does for Rego: each case of a suite
is a call (a principal, a tool, its arguments, the tokens it carries) and
the outcome the manifest's policy must give it: allow, or a refusal's AXAG
code and, when given, its reason, gate, violation paths and details.

The calls go through the whole chain of a real enforcer, but a stub stands
in for every tool: "allow" means the tool would have run. Confirmation and
approval tokens are minted by the runner with a key it generates, bound to
the exact call. Each case runs against an enforcer of its own, with fresh
in-memory state (used tokens, rate limits, idempotency records, approval
requests); the steps of a case's sequence: share one, in order.

Conditions the manifest only names get their outcome from the suite
(conditions: NAME: true, false or a CEL expression; a case may override
them), or pass unchecked with options.allow_unbound_conditions.

Prints PASS, FAIL or ERROR and the case's name for each case (-v: what each
call got), a line per suite and a summary. --junit FILE also writes JUnit
XML for CI systems. Unknown keys in a suite are refused, with a hint.

Exit status: 0 every case passed, 1 a case failed, 2 a usage error, a suite
that cannot be read or run as written (ERROR), or no case matching --run.
docs/cli.md ("axgate test") describes the suite format.`

func runTest(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "test", "test SUITE.yaml… [--manifest M] [--junit FILE] [--run REGEXP] [-v]", testAbout)
	manifestFlag := fs.String("manifest", "", "the manifest to test, instead of the one each suite names")
	junit := fs.String("junit", "", "also write the results as JUnit XML to this file")
	runRE := fs.String("run", "", "run only the cases whose name matches this regular expression")
	verbose := fs.Bool("v", false, "print what every call got, passing cases too")
	pos, err := parseFlags(e, fs, args)
	if err != nil {
		return flagStatus(err)
	}
	if len(pos) == 0 {
		return usageError(e, fs, "want at least one SUITE file")
	}
	var only *regexp.Regexp
	if *runRE != "" {
		if only, err = regexp.Compile(*runRE); err != nil {
			return usageError(e, fs, "--run: %v", err)
		}
	}
	signer, err := token.GenerateDevKey("axgate-test")
	if err != nil {
		return failf(e, "test", "signing key: %v", err)
	}
	r := &testRunner{e: e, signer: signer, only: only, verbose: *verbose}
	var results []suiteResult
	for _, p := range pos {
		results = append(results, r.suite(ctx, p, *manifestFlag))
	}
	t := tally(results)
	switch {
	case t.cases == 0 && t.broken == 0:
		fmt.Fprintf(e.stdout, "FAIL: no case matches --run %q\n", *runRE)
	case t.failed+t.errors+t.broken == 0:
		fmt.Fprintf(e.stdout, "PASS: %d/%d cases\n", t.cases, t.cases)
	default:
		fmt.Fprintf(e.stdout, "FAIL: %d/%d cases passed%s\n", t.cases-t.failed-t.errors, t.cases, t.trouble())
	}
	if *junit != "" {
		if err := writeJUnit(*junit, results); err != nil {
			fmt.Fprintf(e.stderr, "axgate test: --junit: %v\n", err)
			return exitUsage
		}
	}
	switch {
	case t.broken > 0 || t.errors > 0 || t.cases == 0:
		return exitUsage
	case t.failed > 0:
		return exitFail
	}
	return exitOK
}

// testRunner runs suites and prints their results as they come.
type testRunner struct {
	e       *env
	signer  *token.Signer
	only    *regexp.Regexp
	verbose bool
}

// Statuses of a case.
const (
	statusPass  = "PASS"
	statusFail  = "FAIL"
	statusError = "ERROR"
)

// suiteResult is what one suite gave.
type suiteResult struct {
	path     string
	manifest string
	// problems, when the suite is broken, say why; no case ran.
	problems []string
	cases    []caseResult
	took     time.Duration
}

// caseResult is what one case gave.
type caseResult struct {
	name   string
	status string
	// message says in one line why the case failed, for JUnit.
	message string
	// lines explain a failure or an error (want, got), or with -v what
	// each call got.
	lines []string
	took  time.Duration
}

func (r *testRunner) suite(ctx context.Context, path, manifestFlag string) suiteResult {
	start := time.Now()
	res := suiteResult{path: path}
	s, problems := loadSuite(path, manifestFlag)
	if len(problems) > 0 {
		res.problems = problems
		fmt.Fprintf(r.e.stderr, "axgate test: %s cannot be run (%s):\n", path, plural(len(problems), "problem"))
		for _, p := range problems {
			fmt.Fprintf(r.e.stderr, "  %s\n", strings.ReplaceAll(p, "\n", "\n    "))
		}
		fmt.Fprintf(r.e.stdout, "--- %s: broken, no case ran\n", path)
		res.took = time.Since(start)
		return res
	}
	res.manifest = s.manifestPath
	for _, c := range s.cases {
		if r.only != nil && !r.only.MatchString(c.name) {
			continue
		}
		cr := r.runCase(ctx, s, c)
		res.cases = append(res.cases, cr)
		fmt.Fprintf(r.e.stdout, "%-5s %s\n", cr.status, cr.name)
		if cr.status != statusPass || r.verbose {
			for _, l := range cr.lines {
				fmt.Fprintf(r.e.stdout, "        %s\n", l)
			}
		}
	}
	t := tally([]suiteResult{res})
	var parts []string
	parts = append(parts, fmt.Sprintf("%d passed", t.cases-t.failed-t.errors))
	if t.failed > 0 {
		parts = append(parts, fmt.Sprintf("%d failed", t.failed))
	}
	if t.errors > 0 {
		parts = append(parts, plural(t.errors, "error"))
	}
	fmt.Fprintf(r.e.stdout, "--- %s: %s\n", path, strings.Join(parts, ", "))
	res.took = time.Since(start)
	return res
}

// runCase runs one case against an enforcer of its own.
func (r *testRunner) runCase(ctx context.Context, s *suite, c testCase) caseResult {
	start := time.Now()
	res := caseResult{name: c.name, status: statusPass}
	defer func() { res.took = time.Since(start) }()
	fail := func(status, message string, lines ...string) caseResult {
		res.status, res.message, res.lines = status, message, lines
		res.took = time.Since(start)
		return res
	}
	e, err := suiteEnforcer(s.m, s.options, c.conditions, r.signer)
	if err != nil {
		return fail(statusError, "no enforcer: "+firstLine(err.Error()), "the case's conditions make no enforcer: "+err.Error())
	}
	defer e.Close()
	for i, st := range c.steps {
		label := ""
		if c.sequence {
			label = fmt.Sprintf("step %d of %d", i+1, len(c.steps))
			if st.name != "" {
				label += fmt.Sprintf(" (%s)", st.name)
			}
		}
		got, err := r.call(ctx, e, s.m, st)
		if err != nil {
			lines := []string{err.Error()}
			if label != "" {
				lines = append(append(res.lines, label+":"), "  "+lines[0])
			}
			return fail(statusError, firstLine(err.Error()), lines...)
		}
		if !st.expect.matches(got) {
			want, gotText := st.expect.String(), got.describe(st.expect)
			lines := []string{"want " + want, "got  " + gotText}
			msg := "want " + want + " — got " + gotText
			if label != "" {
				// The steps before say how the state came to be.
				lines = append(append(res.lines, label+":"), "  "+lines[0], "  "+lines[1])
				msg = label + ": " + msg
			}
			return fail(statusFail, msg, lines...)
		}
		if label != "" {
			res.lines = append(res.lines, label+": "+got.describe(st.expect))
		} else {
			res.lines = append(res.lines, "got  "+got.describe(st.expect))
		}
	}
	return res
}

// suiteEnforcer builds the enforcer a case runs against: the suite's
// manifest and options, each condition bound to its outcome (a fixed one,
// or a CEL expression), the run's signing key (nil: New's own), and state
// of its own: New makes fresh in-memory stores for every enforcer, so that
// no case sees another's used tokens, rate-limit counts, idempotency
// records or approval requests. It is the one place that knows the root's
// options.
func suiteEnforcer(m *manifest.Manifest, o suiteOptions, conds map[string]conditionOutcome, signer *token.Signer) (*axgate.Enforcer, error) {
	var opts []axgate.Option
	if signer != nil {
		opts = append(opts, axgate.WithSigningKey(signer))
	}
	pre, post := conditionNames(m)
	for name, c := range conds {
		if c.expr != "" {
			if pre[name] {
				opts = append(opts, axgate.WithPreconditionExpr(name, c.expr))
			}
			if post[name] {
				opts = append(opts, axgate.WithPostconditionExpr(name, c.expr))
			}
			continue
		}
		holds := c.holds
		opts = append(opts, axgate.WithPrecondition(name, func(context.Context, *middleware.Call) error {
			if holds {
				return nil
			}
			return errConditionFalse
		}),

			axgate.WithPostcondition(name,

				func(ctx context.Context, call *middleware.Call, _ middleware.Result) error {
					return func(context.Context, *middleware.Call) error {
						if holds {
							return nil
						}
						return errConditionFalse
					}(ctx, call)
				}))
	}
	if o.allowUnknownParams {
		opts = append(opts, axgate.WithUnknownParams())
	}
	if o.allowUnbound {
		opts = append(opts, axgate.WithUnboundConditions())
	}
	return axgate.New(m, opts...)
}

// errConditionFalse is the cause of a refusal by a condition the suite
// gives the outcome false.
var errConditionFalse = errors.New("the test suite gives this condition the outcome false")

// stubTool stands in for every tool: it records that it ran and returns
// the case's result.
type stubTool struct {
	result json.RawMessage
	ran    bool
}

func (t *stubTool) Invoke(context.Context, *middleware.Call) (middleware.Result, error) {
	t.ran = true
	if t.result == nil {
		return middleware.Result{}, nil
	}
	return middleware.Result{Value: t.result}, nil
}

// observed is what a call got.
type observed struct {
	err      *axerr.Error // nil: allowed
	ran      bool
	replayed bool
}

// call makes one call of a step through the enforcer's chain, with the
// tokens the step asks for minted for it.
func (r *testRunner) call(ctx context.Context, e *axgate.Enforcer, m *manifest.Manifest, st testStep) (observed, error) {
	call := middleware.NewCall(st.tool, st.args, st.principal)
	call.Credentials.IdempotencyKey = st.idempotencyKey
	call.Credentials.ClaimedTenant = st.claimedTenant
	if st.confirmation || len(st.approvals) > 0 {
		toks, err := r.mint(ctx, e, m, st)
		if err != nil {
			return observed{}, err
		}
		call.Credentials.Confirmation = toks.confirmation
		call.Credentials.Approvals = toks.approvals
	}
	tool := &stubTool{result: st.result}
	_, err := e.Wrap(tool).Invoke(ctx, call)
	o := observed{ran: tool.ran, replayed: call.Facts.Replayed}
	if err != nil {
		o.err = axerr.From(err)
	}
	return o, nil
}

// mintedTokens are the tokens minted for one call.
type mintedTokens struct {
	confirmation string
	approvals    []string
}

// mint mints the step's tokens, bound to its exact call (principal,
// intent, tenant, arguments). Arguments that have no digest (not JSON, a
// repeated key) get no tokens: an earlier gate refuses such a call.
func (r *testRunner) mint(ctx context.Context, e *axgate.Enforcer, m *manifest.Manifest, st testStep) (mintedTokens, error) {
	var out mintedTokens
	a := m.Tool(st.tool)
	probe := middleware.NewCall(st.tool, st.args, st.principal)
	probe.Action = a
	digest, err := probe.ArgsSHA256()
	if err != nil || a == nil {
		return out, nil
	}
	if st.confirmation {
		if out.confirmation, _, err = e.IssueConfirmation(ctx, st.principal, st.tool, st.args); err != nil {
			return out, fmt.Errorf("the confirmation token could not be minted: %v", err)
		}
	}
	issuer := token.Issuer{Signer: r.signer}
	for _, g := range st.approvals {
		tok, _, err := issuer.Approval(g.approver, g.roles, token.Grant{
			Requester: st.principal.ID, Intent: a.Intent, Tenant: st.principal.Tenant, ArgsSHA256: digest,
		}, token.DefaultApprovalLifetime)
		if err != nil {
			return out, fmt.Errorf("the approval token of %q could not be minted: %v", g.approver, err)
		}
		out.approvals = append(out.approvals, tok)
	}
	return out, nil
}

// matches reports whether the call got what the step expects.
func (x expectation) matches(o observed) bool {
	switch x.outcome {
	case outcomeAllow:
		return o.err == nil && o.ran && !o.replayed
	case outcomeReplayed:
		return o.err == nil && o.replayed
	}
	if o.err == nil || o.err.Code != x.code {
		return false
	}
	if x.reason != "" && detail(o.err, "reason") != x.reason {
		return false
	}
	if x.gate != "" && o.err.Gate != x.gate {
		return false
	}
	if x.violations != nil && !slices.Equal(sortedUnique(x.violations), sortedUnique(violationPaths(o.err))) {
		return false
	}
	for k, want := range x.details {
		got, ok := o.err.Details[k]
		if !ok || canonicalJSON(want) != canonicalJSONOf(got) {
			return false
		}
	}
	return true
}

// String says what the step expects.
func (x expectation) String() string {
	if x.outcome != "" {
		return x.outcome
	}
	var b strings.Builder
	b.WriteString(string(x.code))
	var attrs []string
	if x.reason != "" {
		attrs = append(attrs, "reason "+x.reason)
	}
	if x.gate != "" {
		attrs = append(attrs, "gate "+x.gate)
	}
	if len(attrs) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(attrs, ", "))
	}
	if x.violations != nil {
		fmt.Fprintf(&b, "; violations: %s", pathList(x.violations))
	}
	for _, k := range sortedKeys(x.details) {
		fmt.Fprintf(&b, "; details.%s = %s", k, canonicalJSON(x.details[k]))
	}
	return b.String()
}

// describe says what the call got, with the facts the expectation looks
// at.
func (o observed) describe(x expectation) string {
	switch {
	case o.err == nil && o.replayed:
		return "replayed (the idempotency record answered; the tool did not run)"
	case o.err == nil:
		return "allow (the tool ran)"
	}
	var b strings.Builder
	b.WriteString(string(o.err.Code))
	var attrs []string
	if r := detail(o.err, "reason"); r != "" {
		attrs = append(attrs, "reason "+r)
	}
	if o.err.Gate != "" {
		attrs = append(attrs, "gate "+o.err.Gate)
	}
	if o.ran {
		attrs = append(attrs, "after the tool ran")
	}
	if len(attrs) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(attrs, ", "))
	}
	fmt.Fprintf(&b, ": %s", o.err.Message)
	if vs := violationPaths(o.err); len(vs) > 0 || x.violations != nil {
		fmt.Fprintf(&b, "; violations: %s", pathList(vs))
	}
	for _, k := range sortedKeys(x.details) {
		v, ok := o.err.Details[k]
		if !ok {
			fmt.Fprintf(&b, "; no details.%s", k)
			continue
		}
		fmt.Fprintf(&b, "; details.%s = %s", k, canonicalJSONOf(v))
	}
	return b.String()
}

// detail returns a detail of a refusal as text ("" when absent).
func detail(e *axerr.Error, key string) string {
	v, ok := e.Details[key]
	if !ok || v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func violationPaths(e *axerr.Error) []string {
	out := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		out[i] = v.Path
	}
	return out
}

func sortedUnique(s []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(s)))
}

// pathList renders violation paths; the whole argument object, "", is
// shown quoted.
func pathList(paths []string) string {
	if len(paths) == 0 {
		return "none"
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		if p == "" {
			p = `""`
		}
		out[i] = p
	}
	return strings.Join(out, ", ")
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// canonicalJSON renders JSON with object keys sorted and no white space, so
// that two renderings of one value compare equal.
func canonicalJSON(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return canonicalJSONOf(v)
}

// canonicalJSONOf renders a Go value as canonicalJSON does.
func canonicalJSONOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var back any
	if json.Unmarshal(b, &back) != nil {
		return string(b)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if enc.Encode(back) != nil {
		return string(b)
	}
	return strings.TrimSuffix(out.String(), "\n")
}

// testTally counts the results of a run.
type testTally struct {
	cases, failed, errors, broken int
}

func tally(results []suiteResult) testTally {
	var t testTally
	for _, s := range results {
		if len(s.problems) > 0 {
			t.broken++
		}
		for _, c := range s.cases {
			t.cases++
			switch c.status {
			case statusFail:
				t.failed++
			case statusError:
				t.errors++
			}
		}
	}
	return t
}

// trouble lists the errors and broken suites of a run.
func (t testTally) trouble() string {
	var s string
	if t.errors > 0 {
		s += ", " + plural(t.errors, "error")
	}
	if t.broken > 0 {
		s += ", " + plural(t.broken, "suite") + " broken"
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// JUnit XML, as CI systems read it (the format of Ant's JUnit task, which
// Jenkins, GitLab, GitHub actions and others take).
type (
	junitSuites struct {
		XMLName  xml.Name     `xml:"testsuites"`
		Name     string       `xml:"name,attr"`
		Tests    int          `xml:"tests,attr"`
		Failures int          `xml:"failures,attr"`
		Errors   int          `xml:"errors,attr"`
		Time     string       `xml:"time,attr"`
		Suites   []junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		Name       string           `xml:"name,attr"`
		Tests      int              `xml:"tests,attr"`
		Failures   int              `xml:"failures,attr"`
		Errors     int              `xml:"errors,attr"`
		Skipped    int              `xml:"skipped,attr"`
		Time       string           `xml:"time,attr"`
		Properties *junitProperties `xml:"properties"`
		Cases      []junitCase      `xml:"testcase"`
	}
	junitProperties struct {
		Property []junitProperty `xml:"property"`
	}
	junitProperty struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	}
	junitCase struct {
		Name      string        `xml:"name,attr"`
		Classname string        `xml:"classname,attr"`
		Time      string        `xml:"time,attr"`
		Failure   *junitProblem `xml:"failure,omitempty"`
		Error     *junitProblem `xml:"error,omitempty"`
	}
	junitProblem struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",cdata"`
	}
)

// junitXML renders the results. A broken suite is one test case, named
// after the suite, in error.
func junitXML(results []suiteResult) ([]byte, error) {
	seconds := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
	doc := junitSuites{Name: "axgate test"}
	var total time.Duration
	for _, s := range results {
		class := strings.TrimSuffix(strings.TrimSuffix(filepath.ToSlash(s.path), ".yaml"), ".yml")
		js := junitSuite{Name: s.path, Time: seconds(s.took)}
		if s.manifest != "" {
			js.Properties = &junitProperties{Property: []junitProperty{{Name: "manifest", Value: filepath.ToSlash(s.manifest)}}}
		}
		if len(s.problems) > 0 {
			js.Tests, js.Errors = 1, 1
			js.Cases = []junitCase{{Name: "(suite)", Classname: class, Time: seconds(s.took), Error: &junitProblem{
				Message: "the suite cannot be run: " + firstLine(s.problems[0]), Type: "broken suite",
				Text: strings.Join(s.problems, "\n"),
			}}}
		}
		for _, c := range s.cases {
			jc := junitCase{Name: c.name, Classname: class, Time: seconds(c.took)}
			p := &junitProblem{Message: c.message, Text: strings.Join(c.lines, "\n")}
			switch c.status {
			case statusFail:
				p.Type = "unexpected outcome"
				jc.Failure = p
				js.Failures++
			case statusError:
				p.Type = "case error"
				jc.Error = p
				js.Errors++
			}
			js.Tests++
			js.Cases = append(js.Cases, jc)
		}
		doc.Tests += js.Tests
		doc.Failures += js.Failures
		doc.Errors += js.Errors
		total += s.took
		doc.Suites = append(doc.Suites, js)
	}
	doc.Time = seconds(total)
	out, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(append([]byte(xml.Header), out...), '\n'), nil
}

// writeJUnit writes the JUnit XML of the results to path.
func writeJUnit(path string, results []suiteResult) error {
	out, err := junitXML(results)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
