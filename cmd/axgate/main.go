// Command axgate is the command-line tool for the people who write AXAG
// manifests and run gateways:
//
//	axgate lint MANIFEST [--level basic|intermediate|full] [--format text|json] [--prune OUT]
//	axgate tools MANIFEST [--format mcp|openai|anthropic]
//	axgate keys gen [--alg EdDSA|ES256|RS256] --out DIR
//	axgate token principal|confirmation|approval --key KEY …
//	axgate serve --manifest M --upstream URL --jwks FILE …
//	axgate test SUITE.yaml [--manifest M] [--junit FILE] [--run REGEXP] [-v]
//	axgate config check FILE [--command serve]
//	axgate mcp --manifest M (--upstream-url URL | --upstream-command "CMD ARGS…") [--listen ADDR | --stdio] …
//	axgate manifest init (--upstream-url URL | --upstream-command "CMD ARGS…") --out axag.json
//
// Exit status, the same rule for every command (exitRule, printed by
// "axgate help"): 0 success, 1 failure, 2 usage error. Run "axgate help
// COMMAND" for a command's flags.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// env is what a command may touch: its streams and the environment. Tests
// run commands in-process with their own env.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// signals delivers the process's signals to serve; nil means the real
	// ones.
	signals func(sig ...os.Signal) (<-chan os.Signal, func())
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := &env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	os.Exit(run(ctx, e, os.Args[1:]))
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) int
}

func commands() []command {
	return []command{
		{"lint", "check a manifest and print its grade report", runLint},
		{"tools", "print the tool definitions for MCP, OpenAI or Anthropic", runTools},
		{"keys", "generate a signing key and its public JWKS (keys gen)", runKeys},
		{"token", "mint development tokens: principal, confirmation, approval", runToken},
		{"serve", "run a gateway that enforces a manifest in front of a tool server", runServe},
		{"test", "run policy test suites: calls and the outcomes the policy must give them", runTest},
		{"config", "check a configuration file against a command's flags (config check)", runConfig},
		{"mcp", "run an MCP gateway that enforces a manifest in front of an MCP server", runMCP},
		{"manifest", "draft a manifest from an MCP server's tools (manifest init)", runManifest},
	}
}

func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		usage(e.stdout)
		return exitOK
	case "help":
		if len(rest) == 0 {
			usage(e.stdout)
			return exitOK
		}
		name, rest = rest[0], []string{"-h"}
	}
	var names []string
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, e, rest)
		}
		names = append(names, c.name)
	}
	// The error, a guess and where to look; not the whole usage, which
	// would scroll the error away.
	msg := fmt.Sprintf("axgate: unknown command %q", name)
	if c := closest(name, names); c != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", c)
	}
	fmt.Fprintln(e.stderr, msg)
	fmt.Fprintln(e.stderr, `Run "axgate -h" for the commands.`)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "axgate enforces AXAG manifests on AI agents' tool calls.")
	fmt.Fprintln(w, "\nUsage: axgate COMMAND [arguments]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun \"axgate help COMMAND\" for a command's flags.")
	fmt.Fprint(w, exitRule)
}

// exitRule is the exit status of every command.
const exitRule = `
Exit status, every command:
  0  success (lint, test, config check: PASS)
  1  failure: what the command checks or loads is wrong (lint or test FAIL, a
     manifest or key file that is read but invalid, a configuration config
     check refuses), or its work fails (a gateway that cannot start, or stops
     on an error)
  2  usage error: an unknown command or flag, a missing or wrong argument or
     flag value (also from --config or an AXGATE_* variable), a file or
     program named on the command line that cannot be found or read (the
     error says where it was looked for); test: a suite that cannot be run
`

// newFlags returns a flag set that reports errors instead of exiting and
// prints its usage to e.stderr (or e.stdout for -h).
func newFlags(e *env, name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: axgate %s\n\n", synopsis)
		if about != "" {
			fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(about))
		}
		fmt.Fprintln(w, "Flags:")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses flags and positional arguments in any order ("axgate
// lint m.json --format json" as well as "axgate lint --format json m.json"),
// which the flag package alone does not: it stops at the first positional
// argument. "--" ends the flags. It returns the positional arguments, and
// for -h the error flag.ErrHelp after printing the usage to stdout.
func parseFlags(e *env, fs *flag.FlagSet, args []string) ([]string, error) {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(e.stdout)
			fs.Usage()
			return nil, flag.ErrHelp
		}
		if a == "--" {
			break
		}
	}
	// The flag package prints the whole usage after a bad flag, which
	// scrolls the error away: it prints nothing here, and flagError says
	// what was wrong, what was probably meant, and where the flags are.
	out := fs.Output()
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(out)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			flagError(e, fs, err)
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagError prints a flag the command line got wrong (unknown, or with a
// bad value), with the flag probably meant, and a pointer to -h.
func flagError(e *env, fs *flag.FlagSet, err error) {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		msg = "unknown flag --" + name
		if s := flagSuggestions(fs, name); len(s) > 0 {
			msg += " (did you mean " + strings.Join(s, " or ") + "?)"
		}
	} else if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		msg = "--" + strings.TrimLeft(name, "-") + " needs a value"
	} else {
		msg = strings.Replace(msg, " for flag -", " for flag --", 1)
	}
	fmt.Fprintf(e.stderr, "axgate %s: %s\n", fs.Name(), msg)
	fmt.Fprintf(e.stderr, "Run \"axgate %s -h\" for its flags.\n", fs.Name())
}

// flagSuggestions returns the flags of fs that name was probably meant to
// be: the closest one, else those whose first word is close to name's
// ("upstrem" → --upstream-url, --upstream-command).
func flagSuggestions(fs *flag.FlagSet, name string) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if c := closest(name, names); c != "" {
		return []string{"--" + c}
	}
	word, _, _ := strings.Cut(name, "-")
	var out []string
	for _, n := range names {
		first, _, _ := strings.Cut(n, "-")
		if first != n && closest(word, []string{first}) != "" {
			out = append(out, n)
		}
	}
	// The three broadest flags of that family (fewest words, then
	// shortest), shown in alphabetical order.
	slices.SortStableFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(strings.Count(a, "-"), strings.Count(b, "-")), cmp.Compare(len(a), len(b)), strings.Compare(a, b))
	})
	out = out[:min(len(out), 3)]
	slices.Sort(out)
	for i, n := range out {
		out[i] = "--" + n
	}
	return out
}

// usageError prints a usage problem and returns the usage exit status.
func usageError(e *env, fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "axgate %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fmt.Fprintf(e.stderr, "Run \"axgate help %s\" for usage.\n", fs.Name())
	return exitUsage
}

// fileError prints that a file (or program) named on the command line
// cannot be read, and returns the usage exit status: the command line
// names something that is not there.
func fileError(e *env, cmd string, err error) int {
	fmt.Fprintf(e.stderr, "axgate %s: %v\n", cmd, err)
	return exitUsage
}

// flagStatus is the exit status after parseFlags failed.
func flagStatus(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// failf prints an operational failure and returns the failure exit status.
func failf(e *env, cmd, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "axgate %s: %s\n", cmd, fmt.Sprintf(format, args...))
	return exitFail
}

// oneOf checks a flag value against its choices.
func oneOf(v string, choices ...string) bool {
	for _, c := range choices {
		if v == c {
			return true
		}
	}
	return false
}

// syncWriter serializes writes to w: a command's log and the standard
// error of the child processes it starts (which exec copies from a
// goroutine of its own unless w is a file) share one stream.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
