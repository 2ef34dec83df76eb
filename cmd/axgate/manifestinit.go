package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"runtime/debug"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/draft"
	"github.com/axgate/axgate/manifest"
)

const manifestInitAbout = `
Drafts an AXAG manifest for an existing MCP server from the tools it lists,
and writes it to standard output, for a person to review before "axgate mcp"
enforces it. Each tool becomes an action: its parameters come from the
tool's input schema (types, required, enum, minimum/maximum, maxLength,
format, …), action_type, risk_level, confirmation_required and idempotent
from its annotations (readOnlyHint, destructiveHint, idempotentHint,
openWorldHint), and upstream_sha256 pins the tool's definition, so that the
gateway refuses the tool (AXGATE_TOOL_CHANGED) should the server change it.

The server's resources (by exact URI), its resource templates (RFC 6570
level 1 only) and its prompts become the manifest's "resources" and
"prompts", open to every caller: "axgate mcp" refuses every one the
manifest does not declare, so review who may read each (required_roles).

Every field that is guessed rather than stated by the server (a risk level,
whether a person confirms, a renamed intent, a schema keyword the manifest
cannot express) is listed on standard error, one a line: review them. The
draft passes "axgate lint --level basic".

The upstream is a streamable HTTP URL (--upstream-url) or a command run as a
child process over stdio (--upstream-command, split into words as a POSIX
shell would, nothing expanded, no shell; the child's environment holds only
PATH, HOME and each --upstream-env). generated_at is now, or
SOURCE_DATE_EPOCH when set (reproducible drafts).`

// manifestInitTimeout bounds connecting to the upstream and listing its
// tools.
const manifestInitTimeout = time.Minute

func runManifest(ctx context.Context, e *env, args []string) int {
	if len(args) > 0 && args[0] == "init" {
		return runManifestInit(ctx, e, args[1:])
	}
	fs := newFlags(e, "manifest", "manifest init (--upstream-url URL | --upstream-command \"CMD ARGS…\") > axag.json", manifestInitAbout)
	if _, err := parseFlags(e, fs, args); err != nil {
		return flagStatus(err)
	}
	if len(args) == 0 {
		return usageError(e, fs, "want a subcommand: init")
	}
	return usageError(e, fs, "unknown subcommand %q (want init)", args[0])
}

func runManifestInit(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "manifest init", "manifest init (--upstream-url URL | --upstream-command \"CMD ARGS…\") [--entity NAME] > axag.json", manifestInitAbout)
	var upURL, upCmd string
	var upEnv envFlags
	fs.StringVar(&upURL, "upstream-url", "", "the upstream's streamable HTTP endpoint, e.g. http://127.0.0.1:9000/mcp")
	fs.StringVar(&upCmd, "upstream-command", "", `the upstream's command line, run as a child over stdio (split into words, never run by a shell)`)
	fs.Var(&upEnv, "upstream-env", "add NAME=VALUE to the child's environment, which otherwise holds only PATH and HOME (repeatable)")
	entity := fs.String("entity", "", "the entity every intent starts with (default: made of the server's name, and listed)")
	version := fs.String("version", draft.DefaultVersion, "the manifest's version")
	pos, err := parseFlags(e, fs, args)
	if err != nil {
		return flagStatus(err)
	}
	switch {
	case len(pos) > 0:
		return usageError(e, fs, "unexpected argument %q", pos[0])
	case upURL == "" && upCmd == "":
		return usageError(e, fs, "give the upstream: --upstream-url or --upstream-command")
	case upURL != "" && upCmd != "":
		return usageError(e, fs, "give --upstream-url or --upstream-command, not both")
	case upURL != "" && len(upEnv) > 0:
		return usageError(e, fs, "--upstream-env is for --upstream-command")
	}
	stderr := &syncWriter{w: e.stderr}
	now, err := reportTime(e.getenv)
	if err != nil {
		return usageError(e, fs, "%v", err)
	}
	var transport mcp.Transport
	source := &manifest.Source{Tool: "axgate manifest init", ToolVersion: toolVersion()}
	if upURL != "" {
		if !isHTTPURL(upURL) {
			return usageError(e, fs, "--upstream-url must be an http or https URL, not %q", upURL)
		}
		transport = &mcp.StreamableClientTransport{Endpoint: upURL, HTTPClient: &http.Client{
			// A redirect would carry the request elsewhere than the user said.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
		source.URL = upURL
	} else {
		words, err := splitCommand(upCmd)
		if err != nil {
			return usageError(e, fs, "--upstream-command: %v", err)
		}
		cmd := exec.Command(words[0], words[1:]...)
		cmd.Env = mcpConfig{upstreamEnv: upEnv}.childEnv(e.getenv)
		cmd.Stderr = stderr
		transport = &mcp.CommandTransport{Command: cmd}
	}

	ctx, cancel := context.WithTimeout(ctx, manifestInitTimeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "axgate-manifest-init", Version: toolVersion()}, nil)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return failf(e, "manifest init", "connecting to the upstream: %v", err)
	}
	tools, err := draft.ListTools(ctx, cs)
	if err != nil {
		cs.Close()
		return failf(e, "manifest init", "%v", err)
	}
	opts := draft.Options{Entity: *entity, Version: *version, GeneratedAt: now, Source: source}
	opts.Resources, opts.ResourceTemplates, opts.Prompts, err = draft.ListResourcesAndPrompts(ctx, cs)
	if err != nil {
		cs.Close()
		return failf(e, "manifest init", "%v", err)
	}
	if ir := cs.InitializeResult(); ir != nil && ir.ServerInfo != nil {
		opts.ServerName = ir.ServerInfo.Name
		opts.Metadata = map[string]any{"upstream": map[string]any{"name": ir.ServerInfo.Name, "version": ir.ServerInfo.Version}}
	}
	// Close before printing: for a command upstream this waits for the
	// child to exit, and so for its last lines on standard error, which
	// would otherwise land among the guesses at random.
	cs.Close()
	out, guesses, err := draft.Draft(tools, opts)
	if err != nil {
		return failf(e, "manifest init", "%v", err)
	}
	if _, err := e.stdout.Write(out); err != nil {
		return failf(e, "manifest init", "%v", err)
	}
	others := ""
	if n := len(opts.Resources) + len(opts.ResourceTemplates) + len(opts.Prompts); n > 0 {
		others = fmt.Sprintf(" (and %d resources, templates and prompts)", n)
	}
	fmt.Fprintf(stderr, "axgate manifest init: %d tools drafted%s; review these %d guesses before enforcing the manifest:\n", len(tools), others, len(guesses))
	for _, g := range guesses {
		fmt.Fprintf(stderr, "  %s\n", g)
	}
	return exitOK
}

// isHTTPURL reports whether s is an absolute http or https URL.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// toolVersion is the module version axgate was built from ("devel" for a
// build from a work tree).
func toolVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
