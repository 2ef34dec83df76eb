package httpgate_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// Hostile input costs little: however many violations a body carries, a
// refusal and a Validation API answer list at most the cap (20 by default)
// and count the rest, so the answer stays small. Before the cap, a 0.98 MB
// body with 90,000 unknown keys made the unauthenticated validate endpoint
// answer 9.5 MB.

// capsManifest has one tool whose arguments can carry many violations
// without any object having many members (an array of integers), beside the
// many-unknown-keys case.
const capsManifest = `{
  "version": "1.0.0",
  "entities": [{"name": "batch", "actions": [
    {"intent": "batch.tag", "action_type": "read", "operation_id": "batch_tag",
     "description": "Tag the items of a batch", "risk_level": "none", "idempotent": true, "scope": "global",
     "parameters": {
       "name": {"type": "string", "required": true, "description": "Batch name"},
       "ids": {"type": "array", "description": "Item ids", "items": {"type": "integer", "description": "Item id"}}}}
  ]}]
}`

// capsServer serves capsManifest over a real listener. Calls are
// authenticated by X-Test-User; the tool is a spy that must never run.
func capsServer(t *testing.T, opts ...axgate.Option) *httptest.Server {
	t.Helper()
	m, err := manifest.Parse([]byte(capsManifest))
	if err != nil {
		t.Fatal(err)
	}
	enf, err := axgate.New(m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enf.Close() })
	s := &spy{}
	h, err := httpgate.NewToolServer(enf, map[string]middleware.Invoker{"batch_tag": s}, httpgate.WithPrincipal(userHeader), quiet)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if n := s.calls.Load(); n != 0 {
			t.Errorf("the tool ran %d times", n)
		}
	})
	return srv
}

// unknownKeys is {"name":"b", "k00000":1, …}: n unknown members, ~11 bytes
// each (90,000 of them: 0.99 MB, under the 1 MiB limit).
func unknownKeys(n int) string {
	var b strings.Builder
	b.WriteString(`{"name":"b"`)
	for i := range n {
		fmt.Fprintf(&b, `,"k%05d":1`, i)
	}
	b.WriteString("}")
	return b.String()
}

// wrongItems is {"name":"b","ids":["x",…]}: n items of the wrong type.
func wrongItems(n int) string {
	return `{"name":"b","ids":[` + strings.TrimSuffix(strings.Repeat(`"x",`, n), ",") + `]}`
}

// post sends body over the listener and returns the status and the raw
// answer.
func post(t *testing.T, url, body string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, raw
}

// maxAnswer bounds every answer below: 20 violations and a count.
const maxAnswer = 16 << 10

// wideObjects raises the member and item limits (1,000 and 10,000 by
// default, which refuse the 90,000-key and 90,000-item bodies before the
// schema runs) so that the cap itself is what bounds the answer for an
// operator who allows wide objects and long arrays.
var wideObjects = axgate.WithLimits(middleware.Limits{MaxMembers: 100_000, MaxItems: 100_000})

func TestValidateAPIListsAtMostTheCapAndCountsTheRest(t *testing.T) {
	srv := capsServer(t, wideObjects)
	for _, tc := range []struct {
		name, body, first string
		total             int
	}{
		{"90000 unknown keys", unknownKeys(90000), "/k00000", 90000},
		{"90000 wrong items", wrongItems(90000), "/ids/0", 90000},
		{"999 unknown keys", unknownKeys(999), "/k00000", 999},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, raw := post(t, srv.URL+"/tools/batch_tag/validate", tc.body)
			if status != http.StatusOK || len(raw) >= maxAnswer {
				t.Fatalf("status %d, %d bytes (want 200, < %d): %.300s", status, len(raw), maxAnswer, raw)
			}
			var res struct {
				Valid  bool `json:"valid"`
				Errors []struct {
					Path    string `json:"path"`
					Keyword string `json:"keyword"`
				} `json:"errors"`
				Omitted int `json:"errors_omitted"`
			}
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatal(err)
			}
			if res.Valid || len(res.Errors) != axerr.DefaultMaxViolations || res.Omitted != tc.total-axerr.DefaultMaxViolations {
				t.Fatalf("valid %v, %d errors listed, %d omitted; want 20 and %d: %.300s", res.Valid, len(res.Errors), res.Omitted, tc.total-20, raw)
			}
			if res.Errors[0].Path != tc.first {
				t.Fatalf("first error at %q, want %q (path order)", res.Errors[0].Path, tc.first)
			}
		})
	}
	// Under the cap nothing is omitted, and the key is absent.
	status, raw := post(t, srv.URL+"/tools/batch_tag/validate", wrongItems(3))
	if status != http.StatusOK || strings.Contains(string(raw), "errors_omitted") || strings.Count(string(raw), `"keyword":"type"`) != 3 {
		t.Fatalf("%d %s", status, raw)
	}
}

func TestRefusalListsAtMostTheCapAndCountsTheRest(t *testing.T) {
	srv := capsServer(t, wideObjects)
	for _, tc := range []struct {
		name, body string
		code       axerr.Code
		total      int
	}{
		{"90000 unknown keys", unknownKeys(90000), axerr.CodeUnknownParam, 90000},
		{"90000 wrong items", wrongItems(90000), axerr.CodeInvalidType, 90000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, raw := post(t, srv.URL+"/tools/batch_tag/call", tc.body, "X-Test-User", "u1")
			if status != http.StatusBadRequest || len(raw) >= maxAnswer {
				t.Fatalf("status %d, %d bytes (want 400, < %d): %.300s", status, len(raw), maxAnswer, raw)
			}
			var env struct {
				Error struct {
					Code    axerr.Code `json:"code"`
					Message string     `json:"message"`
					Details struct {
						Violations []axerr.Violation `json:"violations"`
						Omitted    int               `json:"violations_omitted"`
					} `json:"details"`
				} `json:"error"`
			}
			if err := json.Unmarshal(raw, &env); err != nil {
				t.Fatal(err)
			}
			e := env.Error
			want := tc.total - axerr.DefaultMaxViolations
			if e.Code != tc.code || len(e.Details.Violations) != axerr.DefaultMaxViolations || e.Details.Omitted != want {
				t.Fatalf("%s, %d violations listed, %d omitted; want %s, 20 and %d", e.Code, len(e.Details.Violations), e.Details.Omitted, tc.code, want)
			}
			if wantMsg := fmt.Sprintf("%d invalid arguments (the first 20 listed, %d more omitted)", tc.total, want); !strings.HasPrefix(e.Message, wantMsg) {
				t.Fatalf("message %q, want it to start with %q", e.Message, wantMsg)
			}
		})
	}
}

func TestWithMaxViolations(t *testing.T) {
	srv := capsServer(t, axgate.WithMaxViolations(3))
	status, raw := post(t, srv.URL+"/tools/batch_tag/validate", wrongItems(10))
	var res struct {
		Errors  []axerr.Violation `json:"errors"`
		Omitted int               `json:"errors_omitted"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || status != http.StatusOK {
		t.Fatalf("%d %v %s", status, err, raw)
	}
	if len(res.Errors) != 3 || res.Omitted != 7 || res.Errors[0].Path != "/ids/0" || res.Errors[1].Path != "/ids/1" || res.Errors[2].Path != "/ids/2" {
		t.Fatalf("%s", raw)
	}
	status, raw = post(t, srv.URL+"/tools/batch_tag/call", wrongItems(10), "X-Test-User", "u1")
	if status != http.StatusBadRequest || strings.Count(string(raw), `"keyword":"type"`) != 3 || !strings.Contains(string(raw), `"violations_omitted":7`) {
		t.Fatalf("%d %s", status, raw)
	}
}
