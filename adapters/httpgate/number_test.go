package httpgate

import "testing"

// isNumber admits a path or query number only in its one canonical
// spelling (B4): every other spelling of the same value stays a string, so
// that the value the gates check is the text the handler parses.
func TestIsNumberCanonicalOnly(t *testing.T) {
	for _, s := range []string{"0", "7", "42", "-7", "1000", "9007199254740993", "0.5", "-1.5", "0.1", "1000.25", "123456.789", "0.0000001"} {
		if !isNumber(s) {
			t.Errorf("%q: not a number, want one", s)
		}
	}
	for _, s := range []string{"", "-", "-0", "00", "01000", "+1", "1e3", "1E3", "1.0e3", "10000e-1", "1000.0", "0.50", "1.", ".5", "-.5",
		"0x3e8", "1_000", " 1", "1 ", "NaN", "Inf", "-0.0", "1e-7"} {
		if isNumber(s) {
			t.Errorf("%q: a number, want a string", s)
		}
	}
}
