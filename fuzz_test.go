package axgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/middleware"
)

// FuzzArguments feeds arbitrary argument documents to the parameter gate and
// to the Tool Validation API. Neither may panic; every refusal is an
// *errors.Error; and the two must agree: the gate allows exactly the JSON
// objects that Validate calls valid.
func FuzzArguments(f *testing.F) {
	// Only the intent and parameter stages: the property is about them, and
	// later gates (confirmation, …) refuse valid arguments for other reasons.
	e := fullEnforcer(f, axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		var kept []middleware.Stage
		for _, s := range std {
			if s.Name == gates.StageIntent || s.Name == gates.StageParams {
				kept = append(kept, s)
			}
		}
		return kept
	}))
	f.Add("order_place", []byte(`{"cart_id":"3fa85f64-5717-4562-b3fc-2c963f66afa6","shipping_address_id":"a","notes":"n"}`))
	f.Add("product_search", []byte(`{"query":"lamp","category":"books","page":2,"limit":100}`))
	f.Add("product_search", []byte(`{"query":"a","query":"b"}`))
	f.Add("cart_add_item", []byte(`{"product_id":"x","quantity":1e400}`))
	f.Add("user_list", []byte(`[{"a":{"b":[[[[]]]]}}]`))
	f.Add("nope", []byte(`{}`))
	f.Fuzz(func(t *testing.T, tool string, args []byte) {
		call := middleware.NewCall(tool, json.RawMessage(args), principal)
		err := e.Check(context.Background(), call)
		if err != nil {
			if _, ok := axerr.As(err); !ok {
				t.Fatalf("refusal is not an *errors.Error: %v", err)
			}
		}
		r := e.Validate(tool, args)
		if r.NotFound() {
			if !axerr.Is(err, axerr.CodeIntentNotFound) {
				t.Fatalf("Validate: not found, Check: %v", err)
			}
			return
		}
		_, objErr := call.Args()
		if objErr != nil {
			return // not a JSON object: Check refused it as such
		}
		if t := bytes.TrimSpace(args); len(t) == 0 || string(t) == "null" {
			// A call without arguments means {}; a request body must be JSON.
			return
		}
		if r.Valid != (err == nil) {
			t.Fatalf("Validate valid=%v but Check err=%v for %q", r.Valid, err, args)
		}
	})
}
