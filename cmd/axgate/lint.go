package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
)

const lintAbout = `
Checks a manifest deterministically — structure and semantics, the AXAG lint
rules that apply to a manifest, the fields its conformance level requires, and
the graph of preconditions and postconditions — scores its quality from 0.0
to 5.0, and prints a grade report: PASS or FAIL, the errors and warnings
(each with a rule id, a JSON Pointer and a fix), the score and the grade A–F.

Exit status: 0 PASS, 1 FAIL, 2 usage error (including an unreadable file).

--prune OUT writes the manifest without its failing actions (the partial
schema policy: a failing action is removed before deployment) and says which
were removed; the exit status still reports the manifest as given.

The report's timestamp is the current time, unless AXGATE_LINT_NOW (RFC 3339)
or SOURCE_DATE_EPOCH (Unix seconds) fixes it, for reproducible reports.
Colour is used only when the output is a terminal and NO_COLOR is unset.`

func runLint(_ context.Context, e *env, args []string) int {
	fs := newFlags(e, "lint", "lint MANIFEST [--level basic|intermediate|full] [--format text|json] [--prune OUT]", lintAbout)
	level := fs.String("level", "", "conformance level to check: basic, intermediate or full (default: the level the manifest declares, else basic)")
	format := fs.String("format", "text", "output format: text or json (the grade report)")
	prune := fs.String("prune", "", "write the manifest without its failing actions to this file")
	id := fs.String("id", "", "manifest id in the report (default: namespace/name derived from source and file name)")
	rules := fs.Bool("rules", false, "print the rules and exit")
	pos, err := parseFlags(e, fs, args)
	if err != nil {
		return flagStatus(err)
	}
	if *rules {
		printRules(e.stdout)
		return exitOK
	}
	if len(pos) != 1 {
		return usageError(e, fs, "want exactly one MANIFEST, got %d arguments", len(pos))
	}
	if !oneOf(*format, "text", "json") {
		return usageError(e, fs, "--format must be text or json, not %q", *format)
	}
	opts := lintOptions()
	if *level != "" {
		l, err := manifest.ParseLevel(*level)
		if err != nil {
			return usageError(e, fs, "--level: %v", err)
		}
		opts.Level = l
	}
	now, err := reportTime(e.getenv)
	if err != nil {
		return usageError(e, fs, "%v", err)
	}
	if err := fileArg(pos[0]); err != nil {
		return fileError(e, "lint", err)
	}
	res, err := manifest.LintFile(pos[0], opts)
	if err != nil {
		return usageError(e, fs, "%v", err)
	}
	rep := lintReport{GradeReport: res.Report(*id, now)}
	if *prune != "" {
		rep.Pruned = pruneTo(res, *prune)
	}
	if *format == "json" {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			return failf(e, "lint", "%v", err)
		}
	} else {
		printLint(e.stdout, colorsFor(e.stdout, e.getenv), pos[0], res, rep)
	}
	if rep.Pruned != nil && rep.Pruned.Error != "" {
		fmt.Fprintf(e.stderr, "axgate lint: --prune: %s\n", rep.Pruned.Error)
	}
	if rep.Deterministic.Status != manifest.StatusPass {
		return exitFail
	}
	return exitOK
}

// lintOptions are the options of axgate lint: constraints are compiled as
// New compiles them, with the default limits, so that what New would refuse
// fails the manifest.
func lintOptions() manifest.LintOptions {
	return manifest.LintOptions{Expressions: func(m *manifest.Manifest) []manifest.Finding {
		return gate.LintConstraints(m, gate.CELLimits{})
	}}
}

// lintReport is the grade report plus what --prune did.
type lintReport struct {
	manifest.GradeReport
	Pruned *pruneResult `json:"pruned,omitempty"`
}

// pruneResult says what --prune wrote.
type pruneResult struct {
	// Output is the file written, absent when nothing was written.
	Output string `json:"output,omitempty"`
	// Removed are the actions removed, in document order.
	Removed []manifest.ActionStatus `json:"removed"`
	// Remaining are the intents of the actions kept.
	Remaining []string `json:"remaining"`
	// Error says why nothing was written.
	Error string `json:"error,omitempty"`
}

func pruneTo(res *manifest.LintResult, out string) *pruneResult {
	pr := &pruneResult{Removed: []manifest.ActionStatus{}, Remaining: []string{}}
	data, removed, err := res.Prune()
	if removed != nil {
		pr.Removed = removed
	}
	if err != nil {
		pr.Error = err.Error()
		return pr
	}
	gone := map[string]bool{}
	for _, a := range removed {
		gone[a.Pointer] = true
	}
	for _, a := range res.Actions {
		if !gone[a.Pointer] {
			pr.Remaining = append(pr.Remaining, a.Intent)
		}
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		pr.Error = err.Error()
		return pr
	}
	pr.Output = out
	return pr
}

// reportTime is the report's timestamp: AXGATE_LINT_NOW (RFC 3339), else
// SOURCE_DATE_EPOCH (Unix seconds, the reproducible-builds convention), else
// the current time.
func reportTime(getenv func(string) string) (time.Time, error) {
	if v := getenv("AXGATE_LINT_NOW"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return time.Time{}, fmt.Errorf("AXGATE_LINT_NOW %q is not an RFC 3339 time", v)
		}
		return t, nil
	}
	if v := getenv("SOURCE_DATE_EPOCH"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a number of seconds", v)
		}
		return time.Unix(s, 0), nil
	}
	return time.Now(), nil
}

// colors are the ANSI escapes used on a terminal; all empty otherwise.
type colors struct{ red, yellow, green, dim, bold, reset string }

func colorsFor(w io.Writer, getenv func(string) string) colors {
	f, ok := w.(*os.File)
	if !ok || getenv("NO_COLOR") != "" || getenv("TERM") == "dumb" {
		return colors{}
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return colors{}
	}
	return colors{red: "\x1b[31m", yellow: "\x1b[33m", green: "\x1b[32m", dim: "\x1b[2m", bold: "\x1b[1m", reset: "\x1b[0m"}
}

func printLint(w io.Writer, c colors, name string, res *manifest.LintResult, rep lintReport) {
	declared := ""
	if res.DeclaredLevel != "" && res.DeclaredLevel != res.Level {
		declared = fmt.Sprintf(", declares %s", res.DeclaredLevel)
	}
	fmt.Fprintf(w, "%s%s%s — %s, conformance %s%s, %d action(s)\n", c.bold, name, c.reset, rep.ManifestID, res.Level, declared, len(res.Actions))
	for _, f := range res.Findings {
		sev := c.yellow + "warning" + c.reset
		if f.Severity == manifest.SeverityError {
			sev = c.red + "error  " + c.reset
		}
		path := f.Path
		if path == "" {
			path = "(document)"
		}
		fmt.Fprintf(w, "\n%s %s %s\n", sev, f.Rule, path)
		fmt.Fprintf(w, "    %s\n", f.Message)
		fmt.Fprintf(w, "    %sfix:%s %s\n", c.dim, c.reset, f.Fix)
	}
	if len(res.Actions) > 0 {
		fmt.Fprintln(w, "\nActions:")
		for _, a := range res.Actions {
			mark := c.green + "ok  " + c.reset
			if a.Failing {
				mark = c.red + "FAIL" + c.reset
			}
			fmt.Fprintf(w, "  %s %s\n", mark, a.Intent)
		}
	}
	fmt.Fprintf(w, "\nQuality %.1f/5.0:", rep.Quality.Score)
	for i, cr := range rep.Quality.Criteria {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(w, "%s %s %.2f", sep, cr.Name, cr.Score)
	}
	fmt.Fprintln(w)
	if p := rep.Pruned; p != nil {
		fmt.Fprintln(w)
		switch {
		case p.Output != "":
			fmt.Fprintf(w, "Pruned: wrote %s without %s; kept %s.\n", p.Output, listActions(p.Removed), listOrNone(p.Remaining))
		default:
			fmt.Fprintf(w, "Pruned: nothing written: %s\n", firstLine(p.Error))
		}
	}
	status := c.green + string(rep.Deterministic.Status) + c.reset
	if rep.Deterministic.Status != manifest.StatusPass {
		status = c.red + string(rep.Deterministic.Status) + c.reset
	}
	fmt.Fprintf(w, "\n%s: %d error(s), %d warning(s), grade %s%s%s (%s)\n",
		status, len(rep.Deterministic.Errors), len(rep.Deterministic.Warnings), c.bold, rep.Grade, c.reset, rep.ValidatorVersion)
}

func listActions(as []manifest.ActionStatus) string {
	if len(as) == 0 {
		return "any action (none failed)"
	}
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.Intent
	}
	return fmt.Sprintf("%d failing action(s): %s", len(as), strings.Join(names, ", "))
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "no actions"
	}
	return strings.Join(names, ", ")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func printRules(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tSEVERITY\tCHECKS")
	for _, r := range manifest.Rules {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.ID, r.Severity, r.Title)
	}
	tw.Flush()
}
