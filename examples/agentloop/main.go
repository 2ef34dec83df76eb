// Command agentloop is a scripted agent loop, with no network and no model,
// that shows how an agent lives with axgate: it calls tools with wrong
// arguments, reads each refusal, corrects the call from what the refusal
// says, meets a confirmation refusal, has the person confirm (the host signs
// a confirmation token for that exact call), and succeeds. It prints the
// conversation as a transcript.
//
//	go run ./examples/agentloop
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "agentloop:", err)
		os.Exit(1)
	}
}

// alice is the person on whose behalf the agent acts. In a real host she is
// the authenticated user of the session, never something the model says.
var alice = middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"customer"}}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("agentloop", flag.ContinueOnError)
	fs.SetOutput(out)
	manifestPath := fs.String("manifest", defaultManifest(), "the AXAG manifest")
	decline := fs.Bool("decline", false, "the person declines the confirmation")
	if err := fs.Parse(args); err != nil {
		return err
	}
	m, err := manifest.LoadFile(*manifestPath)
	if err != nil {
		return err
	}
	// The toy tools below keep no shop state to check the manifest's prose
	// preconditions against; a real host binds each one
	// (axgate.WithPrecondition) instead of allowing them unbound.
	enf, err := axgate.New(m, axgate.WithUnboundConditions())
	if err != nil {
		return err
	}
	defer enf.Close()

	a := &agent{
		enf: enf,
		who: alice,
		tools: map[string]middleware.Invoker{
			"product_search": enf.Wrap(middleware.InvokerFunc(searchProducts)),
			"order_place":    enf.Wrap(middleware.InvokerFunc(placeOrder)),
		},
		// What the agent learnt earlier in the conversation.
		memory: map[string]any{
			"cart_id":             "3f0c2a8e-9b1d-4c56-8f3e-2a1b0c9d8e7f",
			"shipping_address_id": "addr-alice",
		},
		// How the agent maps a word of the user's to an allowed value.
		synonyms: map[string]string{"lighting": "home", "lamps": "home"},
		person:   func(string) bool { return !*decline },
		out:      out,
	}

	a.say("user", "Find me a desk lamp and order what is in my cart.")
	if _, err := a.do(ctx, "product_search", map[string]any{"query": "desk lamp", "category": "lighting"}); err != nil {
		return err
	}
	// A first attempt as a model might write it: a misnamed argument and an
	// address id as a number.
	if _, err := a.do(ctx, "order_place", map[string]any{"cart": "my cart", "shipping_address_id": 42}); err != nil {
		if e, ok := axerr.As(err); ok {
			a.say("agent", "tells the user: the order was not placed (%s).", e.Code)
			return nil
		}
		return err
	}
	a.say("agent", "tells the user: the lamp search is done and the order is placed.")
	return nil
}

// agent is the scripted agent: it calls a tool, and on a refusal does what
// the refusal says, as a model reading the tool result would.
type agent struct {
	enf      *axgate.Enforcer
	who      middleware.Principal
	tools    map[string]middleware.Invoker
	memory   map[string]any
	synonyms map[string]string
	person   func(question string) bool
	out      io.Writer
}

// maxAttempts bounds the loop: an agent that cannot get a call right stops.
const maxAttempts = 5

func (a *agent) do(ctx context.Context, tool string, args map[string]any) (any, error) {
	var creds middleware.Credentials
	for range maxAttempts {
		raw, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		with := ""
		if creds.Confirmation != "" {
			with = " + confirmation token"
		}
		a.say("agent", "→ %s %s%s", tool, raw, with)
		call := middleware.NewCall(tool, raw, a.who)
		call.Credentials = creds
		res, err := a.tools[tool].Invoke(ctx, call)
		if err == nil {
			out, _ := json.Marshal(res.Value)
			a.say("axgate", "✓ %s", out)
			return res.Value, nil
		}
		e, ok := axerr.As(err)
		if !ok {
			return nil, err
		}
		a.say("axgate", "✗ %s: %s", e.Code, e.Message)
		if len(e.Violations) > 1 {
			for _, v := range e.Violations {
				a.say("", "    %s: %s", v.Path, v.Message)
			}
		}
		if !e.Retryable() {
			return nil, e
		}
		switch {
		case e.Code == axerr.CodeConfirmationMissing:
			question, _ := e.Details["confirmation_message"].(string)
			a.say("agent", "asks the person: %q", question)
			if !a.person(question) {
				a.say("person", "no")
				return nil, e
			}
			a.say("person", "yes")
			// The host's UI got the answer, so it signs a token bound to this
			// caller, intent and these exact arguments.
			token, exp, err := a.enf.IssueConfirmation(ctx, a.who, tool, raw)
			if err != nil {
				return nil, err
			}
			a.say("host", "signs a single-use confirmation token for exactly these arguments, valid %s", time.Until(exp).Round(time.Minute))
			creds.Confirmation = token
		case len(e.Violations) > 0:
			args = a.correct(tool, args, e.Violations)
		default:
			return nil, e
		}
	}
	return nil, fmt.Errorf("%s: no success after %d attempts", tool, maxAttempts)
}

// correct changes the arguments as each violation says.
func (a *agent) correct(tool string, args map[string]any, vs []axerr.Violation) map[string]any {
	fixed := make(map[string]any, len(args))
	for k, v := range args {
		fixed[k] = v
	}
	for _, v := range vs {
		name := strings.TrimPrefix(v.Path, "/")
		switch v.Code {
		case axerr.CodeUnknownParam:
			delete(fixed, name)
			a.say("agent", "drops %s: the tool does not declare it", name)
		case axerr.CodeMissingParam, axerr.CodeInvalidType, axerr.CodeInvalidFormat:
			if known, ok := a.memory[name]; ok {
				fixed[name] = known
				a.say("agent", "sets %s to %v, which it knows from earlier", name, known)
			}
		case axerr.CodeInvalidEnum:
			allowed := a.enum(tool, name)
			word, _ := fixed[name].(string)
			if pick, ok := a.synonyms[word]; ok && slices.Contains(allowed, pick) {
				fixed[name] = pick
				a.say("agent", "picks %s=%q from the allowed values %q", name, pick, allowed)
			} else {
				delete(fixed, name)
				a.say("agent", "drops %s: none of %q fits %q", name, allowed, word)
			}
		}
	}
	return fixed
}

// enum reads the allowed values of a parameter from the tool's input
// schema, as a model sees it in the tool list.
func (a *agent) enum(tool, name string) []string {
	t, ok := a.enf.Tool(tool)
	if !ok {
		return nil
	}
	props, _ := t.InputSchema["properties"].(map[string]any)
	prop, _ := props[name].(map[string]any)
	var out []string
	switch vs := prop["enum"].(type) {
	case []any:
		for _, v := range vs {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
	case []string:
		out = vs
	}
	return out
}

func (a *agent) say(who, format string, args ...any) {
	fmt.Fprintf(a.out, "%-7s %s\n", who, fmt.Sprintf(format, args...))
}

// The tools. They run only for calls axgate allowed.

func searchProducts(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	args, err := call.Args()
	if err != nil {
		return middleware.Result{}, err
	}
	return middleware.Result{Value: map[string]any{
		"query":   args["query"],
		"results": []map[string]any{{"id": "7b0e4f1c-3a52-4c1e-9d8a-5f2b6c7d8e90", "name": "Desk lamp", "price": 39}},
	}}, nil
}

func placeOrder(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	args, err := call.Args()
	if err != nil {
		return middleware.Result{}, err
	}
	return middleware.Result{Value: map[string]any{"order_id": "ord-0001", "cart_id": args["cart_id"], "status": "placed"}}, nil
}

// defaultManifest finds the shop manifest from the repository root or from
// this folder.
func defaultManifest() string {
	for _, p := range []string{
		filepath.Join("examples", "shop", "shop.json"),
		filepath.Join("..", "shop", "shop.json"),
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return filepath.Join("examples", "shop", "shop.json")
}
