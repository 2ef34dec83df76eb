package childproc

import (
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

func TestEnvPassesOnlyPathAndHomeUnlessInherited(t *testing.T) {
	t.Setenv("PATH", "/bin")
	t.Setenv("HOME", "/home/x")
	t.Setenv("AXGATE_CHILDPROC_SECRET", "s")
	got := Env(false, []string{"A=1"})
	if want := []string{"PATH=/bin", "HOME=/home/x", "A=1"}; !slices.Equal(got, want) {
		t.Errorf("Env(false) = %q, want %q", got, want)
	}
	if got := Env(true, []string{"A=1"}); !slices.Contains(got, "AXGATE_CHILDPROC_SECRET=s") || got[len(got)-1] != "A=1" {
		t.Errorf("Env(true) = %q, want the whole environment then A=1", got)
	}
}

func TestLineOverTheLimitCutsTheStream(t *testing.T) {
	var cut atomic.Bool
	killed := false
	b := &boundedLines{r: strings.NewReader("12345\n123456\n"), limit: 5, cut: &cut, kill: func() { killed = true }}
	_, err := io.ReadAll(b)
	if !errors.Is(err, ErrTooLarge) || !cut.Load() || !killed {
		t.Errorf("err %v, cut %v, killed %v: want ErrTooLarge, the cut flag set and the child killed", err, cut.Load(), killed)
	}
	cut.Store(false)
	b = &boundedLines{r: strings.NewReader("12345\n12345\n"), limit: 5, cut: &cut, kill: func() { t.Error("killed a child within the limit") }}
	if _, err := io.ReadAll(b); err != nil || cut.Load() {
		t.Errorf("lines within the limit: err %v, cut %v", err, cut.Load())
	}
}
