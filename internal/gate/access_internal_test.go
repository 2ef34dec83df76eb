package gate

import (
	"math"
	"testing"
)

// TestArgNamesIDExactText: a number names an id only by its exact decimal
// text, and a double of magnitude 2^53 or more names nobody, even if an
// argument document holding one got past the decoder: such a double is the
// image of several integers, and the tool may act on another one.
func TestArgNamesIDExactText(t *testing.T) {
	cases := []struct {
		v    any
		want string
		ok   bool
	}{
		{float64(42), "42", true},
		{float64(-7), "-7", true},
		{0.5, "0.5", true},
		{0.1, "0.1", true},
		{math.Copysign(0, -1), "0", true},
		{float64(9007199254740991), "9007199254740991", true},
		{float64(42), "042", false},
		{float64(42), "42.0", false},
		{float64(9007199254740992), "9007199254740992", false},
		{float64(1234567890123456768), "1234567890123456768", false},
		{float64(1234567890123456768), "1234567890123456800", false},
		{math.Inf(1), "+Inf", false},
		{math.NaN(), "NaN", false},
		{"42", "42", true},
		{true, "true", false},
	}
	for _, tc := range cases {
		if got := argNamesID(tc.v, tc.want); got != tc.ok {
			t.Errorf("argNamesID(%v, %q) = %v; want %v", tc.v, tc.want, got, tc.ok)
		}
	}
}
