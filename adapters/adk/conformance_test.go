package adk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/functiontool"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/adaptertest"
	"github.com/axgate/axgate/adapters/adk"
	"github.com/axgate/axgate/middleware"
)

// TestConformance runs the adapters' shared suite against the ADK plugin
// in a runner with a scripted model; the principal is the session's user.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, adaptertest.Harness{DecodedArguments: true, Serve: func(t *testing.T, e *axgate.Enforcer, p middleware.Principal, names []string, run adaptertest.Tool) adaptertest.Invoke {
		var tools []tool.Tool
		for _, name := range names {
			tl, err := functiontool.New(functiontool.Config{Name: name, Description: name},
				func(ctx agent.Context, args map[string]any) (map[string]any, error) {
					v, err := run(ctx, name, args)
					if err != nil {
						return nil, err
					}
					m, _ := v.(map[string]any)
					return m, nil
				})
			if err != nil {
				t.Fatal(err)
			}
			tools = append(tools, tl)
		}
		m := &scriptedModel{}
		a, err := llmagent.New(llmagent.Config{Name: "agent", Model: m, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		who := func(ctx agent.Context) (middleware.Principal, error) {
			if ctx.UserID() != p.ID {
				return middleware.Principal{}, errors.New("not this session's user")
			}
			return p, nil
		}
		pl, err := adk.New(e, adk.WithPrincipal(who), adk.WithoutToolConfirmation()).Plugin()
		if err != nil {
			t.Fatal(err)
		}
		svc := session.InMemoryService()
		r, err := runner.New(runner.Config{AppName: appName, Agent: a, SessionService: svc, PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{pl}}})
		if err != nil {
			t.Fatal(err)
		}
		created, err := svc.Create(context.Background(), &session.CreateRequest{AppName: appName, UserID: p.ID})
		if err != nil {
			t.Fatal(err)
		}
		f := &fixture{r: r, sess: created.Session.ID()}
		return func(t *testing.T, name, args string) adaptertest.Outcome {
			t.Helper()
			m.mu.Lock()
			m.steps = append(m.steps, callPart(name, decodeArgs(t, args)))
			m.mu.Unlock()
			var rs []map[string]any
			for ev, err := range f.r.Run(context.Background(), p.ID, f.sess, userText("go"), agent.RunConfig{}) {
				if err != nil {
					t.Fatalf("run: %v", err)
				}
				rs = append(rs, responses([]*session.Event{ev}, name)...)
			}
			if len(rs) != 1 {
				t.Fatalf("want one function response, got %v", rs)
			}
			if c := code(rs[0]); c != "" {
				return adaptertest.Outcome{Code: c, Details: details(rs[0])}
			}
			return adaptertest.Outcome{Result: rs[0]}
		}
	}})
}

// decodeArgs decodes a JSON object as a model's function call carries it:
// integers as int64, other numbers as float64.
func decodeArgs(t *testing.T, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return numbers(v).(map[string]any)
}

func numbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = numbers(x)
		}
	case []any:
		for i, x := range v {
			v[i] = numbers(x)
		}
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	}
	return v
}
