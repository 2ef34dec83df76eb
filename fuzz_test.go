package axgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// FuzzArguments feeds arbitrary argument documents to the parameter gate and
// to the Tool Validation API. Neither may panic; every refusal is an
// *axerr.Error; and the two must agree: the gate allows exactly the JSON
// objects that Validate calls valid. Every accepted document is I-JSON, as
// an independent checker (exact arithmetic, strings.EqualFold) sees it — no
// number a double does not hold exactly, no two keys of one object equal
// under case folding — and the tool receives arguments that decode to the
// value the gates checked.
func FuzzArguments(f *testing.F) {
	// Only the intent and parameter stages: the property is about them, and
	// later gates (confirmation, …) refuse valid arguments for other reasons.
	e := fullEnforcer(f, axgate.WithPreExecution(func(std []middleware.Stage) []middleware.Stage {
		var kept []middleware.Stage
		for _, s := range std {
			if s.Name == middleware.StageIntent || s.Name == middleware.StageParams {
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
	f.Add("product_search", []byte(`{"query":"lamp","page":9007199254740993}`))
	f.Add("product_search", []byte(`{"query":"lamp","page":0.10000000000000001}`))
	f.Add("product_search", []byte(`{"query":"lamp","limit":1E2,"page":2.5e0}`))
	f.Add("product_search", []byte(`{"query":"lamp","Query":"x"}`))
	f.Add("product_search", []byte(`{"query":"lamp","category":"\u212a"}`))
	var received atomic.Pointer[middleware.Call]
	tool := middleware.InvokerFunc(func(_ context.Context, c *middleware.Call) (middleware.Result, error) {
		received.Store(&middleware.Call{Arguments: slices.Clone(c.Arguments)})
		return middleware.Result{}, nil
	})
	f.Fuzz(func(t *testing.T, name string, args []byte) {
		call := middleware.NewCall(name, json.RawMessage(args), principal)
		err := e.Check(context.Background(), call)
		if err != nil {
			if _, ok := axerr.As(err); !ok {
				t.Fatalf("refusal is not an *errors.Error: %v", err)
			}
		} else if t2 := bytes.TrimSpace(args); len(t2) > 0 && string(t2) != "null" {
			if problem := notIJSON(args); problem != "" {
				t.Fatalf("accepted %q: %s", args, problem)
			}
			checked, _ := call.Value()
			received.Store(nil)
			if _, err := e.Wrap(tool).Invoke(context.Background(), middleware.NewCall(name, json.RawMessage(args), principal)); err != nil {
				t.Fatalf("Check allowed %q, the chain refused it: %v", args, err)
			}
			got := received.Load()
			var v any
			if got == nil || json.Unmarshal(got.Arguments, &v) != nil || !reflect.DeepEqual(v, checked) {
				t.Fatalf("the gates checked %v, the tool received %v", checked, got)
			}
			if problem := notIJSON(got.Arguments); problem != "" {
				t.Fatalf("the tool received %q: %s", got.Arguments, problem)
			}
		}
		r := e.Validate(name, args)
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

// notIJSON says what in doc is not I-JSON (RFC 7493), or "" when all is
// well: a number whose exact value is not an integer of magnitude at most
// 2^53-1 nor the exact value of the shortest decimal of its double, or two
// keys of one object equal under simple case folding. It is written apart
// from internal/jsonx, on purpose: exact arithmetic with math/big on the
// number's text, and strings.EqualFold on every pair of keys.
func notIJSON(doc []byte) string {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   []string
		expect bool // the next string is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return ""
		}
		if err != nil {
			return "not JSON: " + err.Error()
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			key := tok.(string)
			for _, k := range top.keys {
				if strings.EqualFold(k, key) {
					return fmt.Sprintf("keys %q and %q of one object fold together", k, key)
				}
			}
			top.keys = append(top.keys, key)
			top.expect = false
			continue
		}
		if top != nil && top.object {
			top.expect = true
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{object: true, expect: true})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
			}
		case json.Number:
			if !exactNumber(string(v)) {
				return fmt.Sprintf("number %s is not exactly a double", v)
			}
		}
	}
}

// exactNumber reports whether the JSON number text s is an I-JSON number.
func exactNumber(s string) bool {
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil {
			return false // beyond an int: the value is 0 or out of range
		}
		exp = e
	}
	if strings.Trim(mant, "-0.") == "" {
		return true // zero
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f == 0 || math.IsInf(f, 0) {
		return false // out of range, or a non-zero text that underflows
	}
	// f is finite and non-zero, so the exponent is bounded by the
	// mantissa's length: big.Rat stays affordable.
	if exp > len(mant)+400 || exp < -len(mant)-400 {
		return false
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return false
	}
	if r.IsInt() {
		max := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 53), big.NewInt(1))
		return new(big.Int).Abs(r.Num()).Cmp(max) <= 0
	}
	shortest, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'e', -1, 64))
	return r.Cmp(shortest) == 0
}
