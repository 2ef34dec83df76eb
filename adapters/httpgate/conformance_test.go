package httpgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/adaptertest"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/middleware"
)

// TestConformance runs the adapters' shared suite against the tool server,
// over a real listener; the caller's identity is its bearer token.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, adaptertest.Harness{Serve: func(t *testing.T, e *axgate.Enforcer, p middleware.Principal, tools []string, tool adaptertest.Tool) adaptertest.Invoke {
		handlers := map[string]middleware.Invoker{}
		for _, name := range tools {
			if _, ok := e.Tool(name); !ok {
				continue // the server answers an undeclared name itself
			}
			handlers[name] = middleware.InvokerFunc(func(ctx context.Context, call *middleware.Call) (middleware.Result, error) {
				args, err := call.Value()
				if err != nil {
					return middleware.Result{}, err
				}
				v, err := tool(ctx, call.Tool, args)
				return middleware.Result{Value: v}, err
			})
		}
		who := func(r *http.Request) (middleware.Principal, error) {
			if r.Header.Get("Authorization") != "Bearer "+p.ID {
				return middleware.Principal{}, errors.New("no such caller")
			}
			return p, nil
		}
		s, err := httpgate.NewToolServer(e, handlers, httpgate.WithPrincipal(who))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		return func(t *testing.T, name, args string) adaptertest.Outcome {
			t.Helper()
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/tools/"+name+"/call", strings.NewReader(args))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+p.ID)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			var got struct {
				Result any `json:"result"`
				Error  struct {
					Code    string         `json:"code"`
					Details map[string]any `json:"details"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("%d %s: %v", resp.StatusCode, body, err)
			}
			if (resp.StatusCode == http.StatusOK) != (got.Error.Code == "") {
				t.Fatalf("status %d with body %s", resp.StatusCode, body)
			}
			return adaptertest.Outcome{Code: got.Error.Code, Details: got.Error.Details, Result: got.Result}
		}
	}})
}
