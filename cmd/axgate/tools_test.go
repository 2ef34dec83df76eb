package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestToolsGolden(t *testing.T) {
	t.Parallel()
	manifests := map[string]string{
		"shop-full": projectManifest("shop-full.json"),
		"reference": filepath.Join("testdata", "manifests", "tools-reference.yaml"),
	}
	for name, file := range manifests {
		for _, format := range []string{"mcp", "openai", "anthropic"} {
			t.Run(name+"/"+format, func(t *testing.T) {
				stdout, stderr, code := cli(t, nil, "tools", file, "--format", format)
				if code != exitOK {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				golden(t, filepath.Join("tools", name+"-"+format+".json"), stdout)
				checkToolShape(t, format, stdout)
			})
		}
	}
}

// checkToolShape checks what each provider requires of a tool definition.
func checkToolShape(t *testing.T, format, out string) {
	t.Helper()
	var schemas []map[string]any
	switch format {
	case "mcp":
		var v struct {
			Tools []struct {
				Name        string         `json:"name"`
				InputSchema map[string]any `json:"inputSchema"`
				Annotations map[string]any `json:"annotations"`
				Meta        map[string]any `json:"_meta"`
			} `json:"tools"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		for _, tl := range v.Tools {
			if tl.Name == "" || tl.Annotations == nil || tl.Meta["axag/safety"] == nil {
				t.Errorf("MCP tool without name, annotations or safety block: %+v", tl)
			}
			schemas = append(schemas, tl.InputSchema)
		}
	case "openai":
		var v []struct {
			Type     string `json:"type"`
			Function struct {
				Name       string         `json:"name"`
				Parameters map[string]any `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		for _, tl := range v {
			if tl.Type != "function" || !providerNameRE.MatchString(tl.Function.Name) {
				t.Errorf("not an OpenAI function tool: %+v", tl)
			}
			if _, ok := tl.Function.Parameters["$schema"]; ok {
				t.Errorf("%s: $schema left in the parameters", tl.Function.Name)
			}
			schemas = append(schemas, tl.Function.Parameters)
		}
	case "anthropic":
		var v []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"input_schema"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		for _, tl := range v {
			if !providerNameRE.MatchString(tl.Name) {
				t.Errorf("not an Anthropic tool name: %q", tl.Name)
			}
			schemas = append(schemas, tl.InputSchema)
		}
	}
	if len(schemas) == 0 {
		t.Fatal("no tools")
	}
	for _, s := range schemas {
		if s["type"] != "object" {
			t.Errorf("input schema is not an object schema: %v", s)
		}
	}
}

func TestToolsRefusals(t *testing.T) {
	t.Parallel()
	_, stderr, code := cli(t, nil, "tools", projectManifest("invalid-risk-level.json"))
	if code != exitFail || !strings.Contains(stderr, "/actions/0/risk_level") || !strings.Contains(stderr, "axgate lint") {
		t.Errorf("an invalid manifest: exit %d, %s", code, stderr)
	}
	bad := filepath.Join("testdata", "manifests", "tools-bad-name.json")
	if _, _, code := cli(t, nil, "tools", bad, "--format", "mcp"); code != exitOK {
		t.Errorf("MCP refuses a dotted tool name (exit %d)", code)
	}
	for _, f := range []string{"openai", "anthropic"} {
		_, stderr, code := cli(t, nil, "tools", bad, "--format", f)
		if code != exitFail || !strings.Contains(stderr, "catalog.search.v2") {
			t.Errorf("%s: a tool name the provider refuses: exit %d, %s", f, code, stderr)
		}
	}
}

// An unreadable manifest is a usage error (exit 2), as for lint; a manifest
// that is read but wrong is a failure (exit 1).
func TestToolsUnreadableFileIsUsageError(t *testing.T) {
	t.Parallel()
	_, stderr, code := cli(t, nil, "tools", filepath.Join(t.TempDir(), "missing.json"))
	if code != exitUsage || !strings.Contains(stderr, "missing.json") {
		t.Fatalf("missing file: exit %d, stderr %q; want exit %d naming the file", code, stderr, exitUsage)
	}
	_, stderr, code = cli(t, nil, "tools", projectManifest("invalid-missing-intent.json"))
	if code != exitFail {
		t.Fatalf("invalid manifest: exit %d, stderr %q; want %d", code, stderr, exitFail)
	}
}

// "axgate help token" lists the flags of every token kind, each with the
// kinds that take it.
func TestHelpTokenListsEveryFlag(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := cli(t, nil, "help", "token")
	out := stdout + stderr
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, flag := range []string{"-roles", "-scope", "-intent", "-args", "-args-file", "-requester", "-key", "-sub", "-tenant", "-ttl"} {
		if !strings.Contains(out, "  "+flag+" ") {
			t.Errorf("help token does not list %s:\n%s", flag, out)
		}
	}
}
