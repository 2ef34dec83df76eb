package main

import (
	"testing"
)

// TestServeRefusesCaseFoldedKeys: "axgate serve --allow-unknown-params"
// passed a lone {"TENANT_ID":"globex"} (no tenant argument for the gate, an
// unknown key the schema allowed), and an upstream decoding into a struct
// (encoding/json, case-insensitive) acted on tenant globex; LIMIT escaped the
// bounds of limit the same way. Such keys are refused and the upstream is
// never called; the exact names still pass.
func TestServeRefusesCaseFoldedKeys(t *testing.T) {
	t.Parallel()
	pki, up, srv := unknownParamsGateway(t)
	for _, tc := range []struct{ name, body, at string }{
		{"tenant in capitals", `{"TENANT_ID":"globex"}`, "/TENANT_ID"},
		{"tenant in mixed case", `{"Tenant_Id":"globex"}`, "/Tenant_Id"},
		{"declared parameter in capitals", `{"LIMIT":100000}`, "/LIMIT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, srv.URL, "/tools/invoice_list/call", pki.bearer, tc.body)
			d := errorDetails(body)
			vs, _ := d["violations"].([]any)
			var at any
			if len(vs) == 1 {
				at, _ = vs[0].(map[string]any)["path"]
			}
			if status != 400 || errorCode(body) != "AXGATE_INVALID_ARGUMENTS" || d["reason"] != "ambiguous_keys" || at != tc.at {
				t.Errorf("%d %v; want 400 AXGATE_INVALID_ARGUMENTS reason ambiguous_keys at %s", status, body, tc.at)
			}
			if calls := up.called(); len(calls) != 0 {
				t.Fatalf("the upstream was called: %+v", calls)
			}
		})
	}
	if status, body := post(t, srv.URL, "/tools/invoice_list/call", pki.bearer, `{"tenant_id":"acme","limit":5,"Cursor":"x"}`); status != 200 || len(up.called()) != 1 {
		t.Fatalf("exact names: %d %v", status, body)
	}
}
