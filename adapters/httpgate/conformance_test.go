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
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// bearerOf authenticates p only, by the bearer token "p.ID".
func bearerOf(p middleware.Principal) httpgate.PrincipalFunc {
	return func(r *http.Request) (middleware.Principal, error) {
		if r.Header.Get("Authorization") != "Bearer "+p.ID {
			return middleware.Principal{}, errors.New("no such caller")
		}
		return p, nil
	}
}

// invokeOver returns an Invoke that POSTs the arguments as p to the URL
// path(name) of srv, with the tool's name in X-AXAG-Intent, and reads
// {"result": …} or the AXAG envelope.
func invokeOver(srv *httptest.Server, p middleware.Principal, path func(name string) string) adaptertest.Invoke {
	return func(t *testing.T, name, args string) adaptertest.Outcome {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+path(name), strings.NewReader(args))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+p.ID)
		req.Header.Set(httpgate.HeaderIntent, name)
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
}

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
		s, err := httpgate.NewToolServer(e, handlers, httpgate.WithPrincipal(bearerOf(p)))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		return invokeOver(srv, p, func(name string) string { return "/tools/" + name + "/call" })
	}})
}

// TestMiddlewareConformance runs the adapters' shared suite against the
// middleware's intent-dispatch endpoint (WithIntentHeaderOn): the handler
// reads the checked arguments from the body and writes the tool's value, or
// its error with WriteError (a plain error as AXGATE_TOOL_FAILED).
func TestMiddlewareConformance(t *testing.T) {
	adaptertest.Run(t, adaptertest.Harness{Serve: func(t *testing.T, e *axgate.Enforcer, p middleware.Principal, _ []string, tool adaptertest.Tool) adaptertest.Invoke {
		mw, err := httpgate.NewMiddleware(e, httpgate.WithPrincipal(bearerOf(p)), httpgate.WithIntentHeaderOn("POST /agent"))
		if err != nil {
			t.Fatal(err)
		}
		app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var args any
			if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
				httpgate.WriteError(w, err)
				return
			}
			v, err := tool(r.Context(), r.Header.Get(httpgate.HeaderIntent), args)
			if err != nil {
				if _, ok := axerr.As(err); !ok {
					err = axerr.New(axerr.CodeToolFailed, "the tool failed")
				}
				httpgate.WriteError(w, err)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"result": v})
		})
		srv := httptest.NewServer(mw(app))
		t.Cleanup(srv.Close)
		return invokeOver(srv, p, func(string) string { return "/agent" })
	}})
}
