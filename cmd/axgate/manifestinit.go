package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/draft"
	"github.com/axgate/axgate/manifest"
)

const manifestInitAbout = `
Drafts an AXAG manifest for an existing MCP server from the tools it lists,
and writes it to --out FILE (or standard output), for a person to review
before "axgate mcp" enforces it. Each tool becomes an action: its
parameters come from the tool's input schema (types, required, enum,
minimum/maximum, maxLength, format, …), action_type, risk_level,
confirmation_required and idempotent from its annotations (readOnlyHint,
destructiveHint, idempotentHint, openWorldHint), and upstream_sha256 pins
the tool's definition, so that the gateway refuses the tool
(AXGATE_TOOL_CHANGED) should the server change it.
A tool that needs confirmation gets a confirmation_message naming its key
parameters, "Write file with path {{path}} and content {{content}}?", which
the gateway fills with each call's values for the person who confirms.

The server's resources (by exact URI), its resource templates (RFC 6570
level 1 only) and its prompts become the manifest's "resources" and
"prompts", open to every caller: "axgate mcp" refuses every one the
manifest does not declare, so review who may read each (required_roles).

Every field that is guessed rather than stated by the server (a risk level,
whether a person confirms, the confirmation message, a renamed intent, a
schema keyword the manifest cannot express) is listed on standard error, one a line: review them. The
draft passes "axgate lint --level basic".

The upstream is a streamable HTTP URL (--upstream-url) or a command run as a
child process over stdio (--upstream-command, split into words as a POSIX
shell would, nothing expanded, no shell; the child's environment holds only
PATH, HOME and each --upstream-env). generated_at is now, or
SOURCE_DATE_EPOCH when set (reproducible drafts).

When the upstream does not start or answer (a command that exits at once,
say because a folder it serves does not exist), the command fails with exit
status 1, the upstream's own standard error above its message, and writes
nothing: --out FILE is written only once the draft is complete (to a
temporary file beside it, then renamed), where "> FILE" would leave an
empty FILE behind.`

// manifestInitTimeout bounds connecting to the upstream and listing its
// tools.
const manifestInitTimeout = time.Minute

func runManifest(ctx context.Context, e *env, args []string) int {
	if len(args) > 0 && args[0] == "init" {
		return runManifestInit(ctx, e, args[1:])
	}
	fs := newFlags(e, "manifest", "manifest init (--upstream-url URL | --upstream-command \"CMD ARGS…\") --out axag.json", manifestInitAbout)
	if _, err := parseFlags(e, fs, args); err != nil {
		return flagStatus(err)
	}
	if len(args) == 0 {
		return usageError(e, fs, "want a subcommand: init")
	}
	return usageError(e, fs, "unknown subcommand %q (want init)", args[0])
}

func runManifestInit(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "manifest init", "manifest init (--upstream-url URL | --upstream-command \"CMD ARGS…\") [--entity NAME] [--out axag.json]", manifestInitAbout)
	var upURL, upCmd string
	var upEnv envFlags
	fs.StringVar(&upURL, "upstream-url", "", "the upstream's streamable HTTP endpoint, e.g. http://127.0.0.1:9000/mcp")
	fs.StringVar(&upCmd, "upstream-command", "", `the upstream's command line, run as a child over stdio (split into words, never run by a shell)`)
	fs.Var(&upEnv, "upstream-env", "add NAME=VALUE to the child's environment, which otherwise holds only PATH and HOME (repeatable)")
	entity := fs.String("entity", "", "the entity every intent starts with (default: made of the server's name, and listed)")
	version := fs.String("version", draft.DefaultVersion, "the manifest's version")
	var outPath string
	fs.StringVar(&outPath, "out", "", "write the draft to FILE, only once it is complete (default: standard output)")
	fs.StringVar(&outPath, "o", "", "short for --out")
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
	if outPath != "" {
		// Fail before starting the upstream when the draft could not be
		// written anyway.
		if fi, err := os.Stat(filepath.Dir(outPath)); err != nil || !fi.IsDir() {
			return usageError(e, fs, "--out %s: the folder %s does not exist", outPath, filepath.Dir(outPath))
		}
	}
	stderr := &syncWriter{w: e.stderr}
	now, err := reportTime(e.getenv)
	if err != nil {
		return usageError(e, fs, "%v", err)
	}
	var transport mcp.Transport
	var child *exec.Cmd
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
		child = exec.Command(words[0], words[1:]...)
		child.Env = mcpConfig{upstreamEnv: upEnv}.childEnv(e.getenv)
		child.Stderr = stderr
		transport = &mcp.CommandTransport{Command: child}
	}

	ctx, cancel := context.WithTimeout(ctx, manifestInitTimeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "axgate-manifest-init", Version: toolVersion()}, nil)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		// A failed connect has closed the transport, which waits for a
		// child that exited: its status and standard error are known.
		if child != nil && child.ProcessState != nil {
			return failf(e, "manifest init", "connecting to the upstream: the upstream command exited (%v) before it answered initialize; its standard error, if any, is above; nothing was written", child.ProcessState)
		}
		return failf(e, "manifest init", "connecting to the upstream: %v; nothing was written", err)
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
	if outPath != "" {
		if err := writeFileAtomic(outPath, out); err != nil {
			return failf(e, "manifest init", "--out: %v", err)
		}
	} else if _, err := e.stdout.Write(out); err != nil {
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

// writeFileAtomic writes data to a temporary file in path's folder and
// renames it to path, so that path is either left as it was or holds all of
// data, never a part.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		// CreateTemp makes the file 0600; a manifest is meant to be read.
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
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
