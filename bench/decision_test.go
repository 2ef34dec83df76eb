package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

const decisionBenchManifest = `{"version":"1.0.0","actions":[
 {"intent":"file.write","entity":"file","action_type":"write","operation_id":"write_file","description":"Write a file",
  "required_parameters":[{"name":"path","type":"string"},{"name":"content","type":"string"}],
  "risk_level":"high","confirmation_required":true,"confirmation_message":"Write {{path}}?"}
]}`

// decisionSeq makes each call of every run a call of its own (its own
// request id).
var decisionSeq atomic.Int64

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// BenchmarkDecisionRoundTrip is issue 30's round trip, one op each: the
// agent's call refused for the person's confirmation (428 naming the page,
// the request recorded), the person's decision, and the agent's retry,
// which runs the tool (200), without a token. Everything is in process but
// over real HTTP (httptest listeners, net/http clients): httpgate's tool
// server in front of the tool, and httpgate.NewHumanHandler for the person.
//
//   - decide=page: the person's browser, signed in once (DevSignIn, a
//     session cookie): GET the call's page (rendered, with its CSRF token),
//     POST the Confirm form, follow the 303 back to the page.
//   - decide=json: the person's UI backend, POST /approvals/{id} with
//     {"approve":true} (JSON endpoint, the person from a header).
//   - decide=api: Enforcer.Approvals().Decide in process, no HTTP for the
//     decision: the floor of the other two.
//
// store=memory keeps the requests in memory; store=redis in Redis
// (gates/redisstore: approvals and used tokens; skipped without
// AXGATE_REDIS_URL); rt/op counts its round trips per op. allocs/op counts
// both ends (clients and servers).
func BenchmarkDecisionRoundTrip(b *testing.B) {
	m, err := manifest.Parse([]byte(decisionBenchManifest))
	if err != nil {
		b.Fatal(err)
	}
	carol := middleware.Principal{ID: "carol", Tenant: "acme", Roles: []string{"member"}}
	fromHeader := func(r *http.Request) (middleware.Principal, error) {
		if r.Header.Get("X-User") == carol.ID {
			return carol, nil
		}
		return middleware.Principal{}, axerr.New(axerr.CodeUnauthenticated, "who?")
	}
	quiet := httpgate.WithLogger(slog.New(slog.DiscardHandler))
	tool := middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{Value: map[string]any{"ok": true}}, nil
	})
	for _, store := range storeNames {
		b.Run("store="+store, func(b *testing.B) {
			for _, decide := range []string{"page", "json", "api"} {
				b.Run("decide="+decide, func(b *testing.B) {
					var pages http.Handler
					pagesSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { pages.ServeHTTP(w, r) }))
					b.Cleanup(pagesSrv.Close)
					opts := []axgate.Option{axgate.WithDecisionPages(pagesSrv.URL + "/")}
					var rt *roundTrips
					if store == "redis" {
						var rs *redisstore.Stores
						rs, rt = redisBenchStores(b)
						opts = append(opts, axgate.WithApprovalStore(rs.Approvals), axgate.WithReplayStore(rs.Replay))
					}
					enf, err := axgate.New(m, opts...)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { enf.Close() })
					pages = httpgate.NewHumanHandler(enf, fromHeader, quiet, httpgate.DevSignIn(carol))
					ts, err := httpgate.NewToolServer(enf, map[string]middleware.Invoker{"write_file": tool}, quiet, httpgate.WithPrincipal(fromHeader))
					if err != nil {
						b.Fatal(err)
					}
					tools := httptest.NewServer(ts)
					b.Cleanup(tools.Close)

					agent := &http.Client{}
					jar, _ := cookiejar.New(nil)
					browser := &http.Client{Jar: jar}
					if decide == "page" {
						res, err := browser.PostForm(pagesSrv.URL+"/signin", url.Values{"user": {carol.ID}, "next": {"/"}})
						if err != nil {
							b.Fatal(err)
						}
						drain(res)
						if res.StatusCode != http.StatusOK {
							b.Fatalf("dev sign-in: %d", res.StatusCode)
						}
					}
					post := func(c *http.Client, u, ctype, body string) *http.Response {
						req, _ := http.NewRequest("POST", u, strings.NewReader(body))
						req.Header.Set("Content-Type", ctype)
						req.Header.Set("X-User", carol.ID)
						res, err := c.Do(req)
						if err != nil {
							b.Fatal(err)
						}
						return res
					}
					ctx := context.Background()
					if rt != nil {
						rt.Reset()
					}
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						args := fmt.Sprintf(`{"path":"/srv/notes/%d.txt","content":"ship on Friday"}`, decisionSeq.Add(1))
						// The call, refused with its page.
						res := post(agent, tools.URL+"/tools/write_file/call", "application/json", args)
						var env struct {
							Error struct {
								Details struct {
									ID string `json:"decision_id"`
								} `json:"details"`
							} `json:"error"`
						}
						err := json.NewDecoder(res.Body).Decode(&env)
						drain(res)
						id := env.Error.Details.ID
						if res.StatusCode != http.StatusPreconditionRequired || err != nil || id == "" {
							b.Fatalf("the call: %d %v %q", res.StatusCode, err, id)
						}
						// The person decides.
						switch decide {
						case "page":
							page, err := browser.Get(pagesSrv.URL + "/requests/" + id)
							if err != nil {
								b.Fatal(err)
							}
							html, _ := io.ReadAll(page.Body)
							drain(page)
							m := csrfField.FindSubmatch(html)
							if page.StatusCode != http.StatusOK || m == nil {
								b.Fatalf("the page: %d", page.StatusCode)
							}
							form := url.Values{"decision": {"confirm"}, "csrf": {string(m[1])}}.Encode()
							res = post(browser, pagesSrv.URL+"/requests/"+id, "application/x-www-form-urlencoded", form)
							drain(res)
							if res.StatusCode != http.StatusOK {
								b.Fatalf("the confirmation on the page: %d", res.StatusCode)
							}
						case "json":
							res = post(agent, pagesSrv.URL+"/approvals/"+id, "application/json", `{"approve":true}`)
							drain(res)
							if res.StatusCode != http.StatusOK {
								b.Fatalf("the confirmation at the JSON endpoint: %d", res.StatusCode)
							}
						case "api":
							if _, _, _, err := enf.Approvals().Decide(ctx, carol, id, true, ""); err != nil {
								b.Fatal(err)
							}
						}
						// The retry runs.
						res = post(agent, tools.URL+"/tools/write_file/call", "application/json", args)
						drain(res)
						if res.StatusCode != http.StatusOK {
							b.Fatalf("the retry: %d", res.StatusCode)
						}
					}
					if rt != nil {
						b.ReportMetric(float64(rt.Count())/float64(b.N), "rt/op")
					}
				})
			}
		})
	}
}

// drain reads the rest of the body and closes it, so that the connection
// is reused.
func drain(res *http.Response) {
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
}
