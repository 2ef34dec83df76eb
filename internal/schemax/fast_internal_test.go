package schemax

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestFormatFloatIsFmtV: the fast path's number messages print as v5's
// fmt "%v" does.
func TestFormatFloatIsFmtV(t *testing.T) {
	fs := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e6, 1e20, 1e21, 123456789, 1e-4, 1e-5, 2.5,
		1 << 53, -(1 << 60), math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1), math.NaN()}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		fs = append(fs, math.Float64frombits(rng.Uint64()), float64(rng.Int64N(1<<40))/float64(rng.IntN(1000)+1))
	}
	for i := -1_000_010; i <= 1_000_010; i += 7 {
		fs = append(fs, float64(i), float64(i)+0.5)
	}
	for _, f := range fs {
		if got, want := formatFloat(f), fmt.Sprintf("%v", f); got != want {
			t.Fatalf("formatFloat(%b) = %q, fmt %%v %q", f, got, want)
		}
	}
}
