package axgate_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/axgate/axgate"
)

// The Tool Validation API criteria of seeds/002 that the core answers
// (5, 6, 8 and 9 are about the HTTP endpoint and are tested there too).

func marshal(t *testing.T, r axgate.ValidationResult) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestValidate01ValidInput(t *testing.T) {
	r := fullEnforcer(t).Validate("product_search", []byte(`{"query":"lamp","limit":20}`))
	if r.Status() != 200 || !r.Valid || marshal(t, r) != `{"valid":true}` {
		t.Fatalf("status %d body %s", r.Status(), marshal(t, r))
	}
}

func TestValidate02MissingRequired(t *testing.T) {
	r := fullEnforcer(t).Validate("order_place", []byte(`{"shipping_address_id":"a"}`))
	if r.Status() != 200 || r.Valid || len(r.Errors) != 1 {
		t.Fatalf("status %d body %s", r.Status(), marshal(t, r))
	}
	if e := r.Errors[0]; e.Keyword != "required" || e.Path != "/cart_id" || e.Message == "" {
		t.Fatalf("error = %+v", e)
	}
}

func TestValidate03WrongType(t *testing.T) {
	r := fullEnforcer(t).Validate("cart_add_item", []byte(`{"product_id":"3fa85f64-5717-4562-b3fc-2c963f66afa6","quantity":"two"}`))
	if r.Status() != 200 || r.Valid || len(r.Errors) != 1 || r.Errors[0].Keyword != "type" || r.Errors[0].Path != "/quantity" {
		t.Fatalf("status %d body %s", r.Status(), marshal(t, r))
	}
}

func TestValidate04MultipleViolations(t *testing.T) {
	r := fullEnforcer(t).Validate("product_search", []byte(`{"query":1,"category":"food","limit":0,"extra":true}`))
	if r.Status() != 200 || r.Valid {
		t.Fatalf("status %d body %s", r.Status(), marshal(t, r))
	}
	got := map[string]string{}
	for _, e := range r.Errors {
		got[e.Path] = e.Keyword
	}
	want := map[string]string{"/query": "type", "/category": "enum", "/limit": "minimum", "/extra": "additionalProperties"}
	if len(got) != len(want) {
		t.Fatalf("errors = %s", marshal(t, r))
	}
	for p, k := range want {
		if got[p] != k {
			t.Errorf("%s: keyword %q, want %q", p, got[p], k)
		}
	}
}

func TestValidate05ToolNotFound(t *testing.T) {
	r := fullEnforcer(t).Validate("nope", []byte(`{}`))
	if r.Status() != 404 || !r.NotFound() || marshal(t, r) != `{"error":"Tool not found: nope"}` {
		t.Fatalf("status %d body %s", r.Status(), marshal(t, r))
	}
}

func TestValidate06BodyNotJSON(t *testing.T) {
	r := fullEnforcer(t).Validate("product_search", []byte(`{"query":`))
	if r.Status() != 400 || r.Valid || len(r.Errors) != 1 || r.Errors[0].Path != "" || r.Errors[0].Keyword != "format" {
		t.Fatalf("status %d body %s", r.Status(), marshal(t, r))
	}
}

func TestValidate07ToolWithoutSchema(t *testing.T) {
	e, err := axgate.New(loadManifest(t, filepath.Join("testdata", "formats.json")))
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{}`, `{"anything":[1,2,3]}`, `[1]`, `"x"`} {
		r := e.Validate("ping_send", []byte(body))
		if r.Status() != 200 || marshal(t, r) != `{"valid":true}` {
			t.Errorf("body %s: status %d %s", body, r.Status(), marshal(t, r))
		}
	}
}

func TestValidate10NeverInvokes(t *testing.T) {
	e := fullEnforcer(t)
	tool := &spy{}
	_ = e.Wrap(tool) // a wrapped tool exists, as in a server
	for _, body := range []string{`{"query":"x"}`, `{}`, `{`, `[]`} {
		e.Validate("product_search", []byte(body))
		e.Validate("order_place", []byte(body))
		e.Validate("nope", []byte(body))
	}
	if tool.calls.Load() != 0 {
		t.Fatalf("Validate invoked the tool %d times", tool.calls.Load())
	}
}

func TestValidate11NoErrorsKeyWhenValid(t *testing.T) {
	r := fullEnforcer(t).Validate("user_list", []byte(`{}`))
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(marshal(t, r)), &raw); err != nil {
		t.Fatal(err)
	}
	if _, has := raw["errors"]; has || len(raw) != 1 || string(raw["valid"]) != "true" {
		t.Fatalf("body = %s; want exactly {\"valid\":true}", marshal(t, r))
	}
}

// TestValidateNamesIJSONViolations: a body the call would refuse as not
// I-JSON is a 400 whose error names the place and the rule, not a bare
// "Invalid JSON" at the root.
func TestValidateNamesIJSONViolations(t *testing.T) {
	e := fullEnforcer(t)
	for _, tc := range []struct{ body, path, keyword string }{
		{`{"query":"lamp","limit":12345678901234567890}`, "/limit", "i-json"},
		{`{"query":"lamp","QUERY":"desk"}`, "/QUERY", "i-json"},
	} {
		r := e.Validate("product_search", []byte(tc.body))
		if r.Valid || len(r.Errors) != 1 || r.Errors[0].Path != tc.path || r.Errors[0].Keyword != tc.keyword {
			t.Errorf("%s: %+v, want one error at %s (%s)", tc.body, r.Errors, tc.path, tc.keyword)
		}
	}
}
