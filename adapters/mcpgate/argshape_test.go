package mcpgate_test

import (
	"strings"
	"testing"

	"github.com/axgate/axgate"
)

// TestCaseFoldedKeysRefused: with WithUnknownParams a key that differs from
// an identity argument or a declared parameter only in letter case was an
// unknown key to the gates (USER_ID is no user argument, LIMIT has no
// maximum), while a tool binding the arguments to a struct (encoding/json,
// case-insensitive) read it as user_id or limit: alice's call acted on bob's
// cart, a page size went past its declared maximum of 100. Both are refused
// before the tool runs; the exact spellings are not.
func TestCaseFoldedKeysRefused(t *testing.T) {
	f := connect(t, setup{gateOpts: asAlice(), enfOpts: []axgate.Option{axgate.WithUnknownParams()}})
	for _, tc := range []struct{ name, tool, args, path string }{
		{"user id in capitals", "cart_add_item", `{"product_id":"7c9e6679-7425-40de-944b-e07fc1f90ae7","quantity":1,"USER_ID":"bob"}`, "/USER_ID"},
		{"declared limit in capitals", "product_search", `{"query":"lamp","LIMIT":100000}`, "/LIMIT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := refusal(t, f.call(t, tc.tool, tc.args, nil))
			vs, _ := env.Error.Details["violations"].([]any)
			var at any
			if len(vs) == 1 {
				at = vs[0].(map[string]any)["path"]
			}
			if env.Error.Code != "AXGATE_INVALID_ARGUMENTS" || env.Error.Details["reason"] != "ambiguous_keys" || at != tc.path {
				t.Fatalf("refusal %+v; want AXGATE_INVALID_ARGUMENTS reason ambiguous_keys at %s", env.Error, tc.path)
			}
			if n := f.seen.count(); n != 0 {
				t.Fatalf("the tool ran %d times", n)
			}
		})
	}
	structured(t, f.call(t, "product_search", `{"query":"lamp","limit":100,"Sort":"price"}`, nil))
}

// TestArgumentShapeRefused: a lone surrogate escape and an array over the
// item limit are refused over MCP before any gate, with their reason and
// path.
func TestArgumentShapeRefused(t *testing.T) {
	f := connect(t, setup{gateOpts: asAlice(), enfOpts: []axgate.Option{axgate.WithUnknownParams()}})
	long := `{"query":"lamp","tags":[` + strings.TrimSuffix(strings.Repeat(`"a",`, 10001), ",") + `]}`
	for _, tc := range []struct{ name, args, reason, path string }{
		{"lone surrogate", `{"query":"lamp \ud800"}`, "invalid_string", "/query"},
		{"too many items", long, "too_many_items", "/tags"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := refusal(t, f.call(t, "product_search", tc.args, nil))
			vs, _ := env.Error.Details["violations"].([]any)
			var at any
			if len(vs) == 1 {
				at = vs[0].(map[string]any)["path"]
			}
			if env.Error.Code != "AXGATE_INVALID_ARGUMENTS" || env.Error.Details["reason"] != tc.reason || at != tc.path {
				t.Fatalf("refusal %+v; want AXGATE_INVALID_ARGUMENTS reason %s at %s", env.Error, tc.reason, tc.path)
			}
			if n := f.seen.count(); n != 0 {
				t.Fatalf("the tool ran %d times", n)
			}
		})
	}
}
