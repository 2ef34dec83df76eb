package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestServeIJSON: "axgate serve --allow-unknown-params" refuses arguments
// that decoders read differently — keys equal under case folding, numbers a
// double does not hold exactly, objects wider than the member limit — and
// the upstream never sees them. Before, {"tenant_id":"acme","TENANT_ID":
// "globex"} passed the tenant gate on tenant_id while an upstream decoding
// into a struct (case-insensitive, last wins) read globex.
func TestServeIJSON(t *testing.T) {
	t.Parallel()
	pki, up, srv := unknownParamsGateway(t)
	// A caller whose numeric id a double cannot hold: …768 and …800 are one
	// double.
	big := mint(t, "principal", "--key", pki.key, "--sub", "1234567890123456768", "--tenant", "acme")

	wide := `{"x":{`
	for i := range 1001 {
		if i > 0 {
			wide += ","
		}
		wide += `"k` + toJSON(i) + `":0`
	}
	wide += `}}`
	cases := []struct {
		name, path, bearer, body string
		code, reason, at         string
	}{
		{"case-folded tenant key", "/tools/invoice_list/call", pki.bearer, `{"tenant_id":"acme","TENANT_ID":"globex"}`, "AXGATE_INVALID_ARGUMENTS", "ambiguous_keys", "/TENANT_ID"},
		{"case-folded nested key", "/tools/invoice_list/call", pki.bearer, `{"filter":{"Tenant":"acme","tenant":"globex"}}`, "AXGATE_INVALID_ARGUMENTS", "ambiguous_keys", "/filter/tenant"},
		{"user id above 2^53", "/tools/account_close/call", big, `{"user_id":1234567890123456800}`, "AXAG_INVALID_TYPE", "number_not_interoperable", "/user_id"},
		{"integer spelled with an exponent", "/tools/invoice_list/call", pki.bearer, `{"limit":1e20}`, "AXAG_INVALID_TYPE", "number_not_interoperable", "/limit"},
		{"wide object", "/tools/invoice_list/call", pki.bearer, wide, "AXGATE_INVALID_ARGUMENTS", "too_many_members", "/x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, srv.URL, tc.path, tc.bearer, tc.body)
			d := errorDetails(body)
			vs, _ := d["violations"].([]any)
			var at any
			if len(vs) == 1 {
				at, _ = vs[0].(map[string]any)["path"]
			}
			if status != 400 || errorCode(body) != tc.code || d["reason"] != tc.reason || at != tc.at {
				t.Errorf("%d %v; want 400 %s reason %s at %s", status, body, tc.code, tc.reason, tc.at)
			}
		})
	}
	if calls := up.called(); len(calls) != 0 {
		t.Fatalf("refused calls reached the upstream: %+v", calls)
	}

	// Accepted: the upstream reads the value the gates checked.
	in := `{"tenant_id":"acme","limit":25,"Note":0.1,"ref":9007199254740991}`
	status, body := post(t, srv.URL, "/tools/invoice_list/call", pki.bearer, in)
	if status != 200 {
		t.Fatalf("%d %v", status, body)
	}
	var want map[string]any
	_ = json.Unmarshal([]byte(in), &want)
	if calls := up.called(); len(calls) != 1 || !reflect.DeepEqual(calls[0].Args, want) {
		t.Fatalf("the upstream got %+v, want %v", calls, want)
	}
}

// unknownParamsGateway runs "axgate serve --allow-unknown-params" over the
// invoices manifest in front of a recording upstream, both on real
// listeners, for the tests of arguments an upstream could read otherwise.
func unknownParamsGateway(t *testing.T) (servePKI, *fakeUpstream, *httptest.Server) {
	t.Helper()
	pki := newServePKI(t)
	up := &fakeUpstream{}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	u, _ := url.Parse(upSrv.URL)
	gw, err := newGateway(context.Background(), serveConfig{
		manifest:        filepath.Join("testdata", "serve", "invoices.json"),
		enforcerConfig:  enforcerConfig{jwks: pki.jwks, issuer: "axgate", audience: "axgate", allowUnknownParams: true},
		upstreamTimeout: 5 * time.Second,
	}, u, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.close)
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return pki, up, srv
}
