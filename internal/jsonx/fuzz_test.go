package jsonx

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// FuzzInteroperable compares Interoperable with an oracle written from the
// definition in exact arithmetic: an integer of magnitude at most 2^53-1, or
// a non-integer equal to the shortest decimal of the double nearest to it.
func FuzzInteroperable(f *testing.F) {
	for _, s := range []string{"0", "-0", "1", "0.1", "0.10000000000000001", "9007199254740991", "9007199254740992",
		"1e15", "1e16", "1.5", "129.95", "1e-400", "5e-324", "2.2250738585072014e-308", "1e400", "0.30000000000000004",
		"123456789012345.6", "12345678901234567890e-5", "-4.9406564584124654e-324", "1.7976931348623157e308", "100e-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		if !json.Valid([]byte(lit)) || len(lit) > 400 {
			return
		}
		r, ok := exactValue(lit)
		if !ok {
			return
		}
		got := Interoperable([]byte(lit))
		if want := oracle(r); got != want {
			t.Fatalf("Interoperable(%s) = %v; want %v", lit, got, want)
		}
	})
}

// exactValue parses a JSON number literal into an exact rational, refusing
// exponents that would make big.Rat build enormous numbers (the oracle is a
// test, so it only needs to cover what it can afford).
func exactValue(lit string) (*big.Rat, bool) {
	if lit == "" || !(lit[0] == '-' || lit[0] >= '0' && lit[0] <= '9') {
		return nil, false
	}
	mant, exp := lit, 0
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		e, err := strconv.Atoi(lit[i+1:])
		if err != nil || e > 1000 || e < -1000 {
			return nil, false
		}
		mant, exp = lit[:i], e
	}
	r, ok := new(big.Rat).SetString(mant)
	if !ok {
		return nil, false
	}
	p := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil))
	if exp >= 0 {
		r.Mul(r, p)
	} else {
		r.Quo(r, p)
	}
	return r, true
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func oracle(r *big.Rat) bool {
	if r.IsInt() {
		limit := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 53), big.NewInt(1))
		return new(big.Int).Abs(r.Num()).Cmp(limit) <= 0
	}
	f, _ := r.Float64()
	if math.IsInf(f, 0) {
		return false
	}
	back, ok := new(big.Rat).SetString(strconv.FormatFloat(f, 'e', -1, 64))
	return ok && back.Cmp(r) == 0
}
