package upcreds

import (
	"container/list"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// TestCacheBoundAndExpiry: the exchanged tokens kept are bounded, the
// least recently used going first, and none is kept past its own expiry
// or the caller's.
func TestCacheBoundAndExpiry(t *testing.T) {
	x := &exchanger{max: 2, byKey: map[string]*list.Element{}, order: list.New()}
	hour := time.Now().Add(time.Hour)
	tok := func(s string) *oauth2.Token { return &oauth2.Token{AccessToken: s, Expiry: hour} }
	x.keep("a", tok("A"), time.Time{})
	x.keep("b", tok("B"), time.Time{})
	if x.cached("a") == nil { // a is now the most recently used
		t.Fatal("a is not kept")
	}
	x.keep("c", tok("C"), time.Time{})
	if x.cached("b") != nil {
		t.Error("b, the least recently used, was kept past the bound")
	}
	if x.cached("a") == nil || x.cached("c") == nil {
		t.Error("a or c was dropped")
	}
	x.keep("d", tok("D"), time.Now().Add(-time.Second))
	if x.cached("d") != nil {
		t.Error("a token was kept past the caller's own expiry")
	}
	x.keep("e", &oauth2.Token{AccessToken: "E", Expiry: time.Now().Add(-time.Second)}, time.Time{})
	if x.cached("e") != nil {
		t.Error("an expired token was kept")
	}
}

// TestHeaderFileErrorsNameTheFileOnly: a header file of two lines, or
// missing, is refused with an error naming the file, not its content.
func TestHeaderFileErrorsNameTheFileOnly(t *testing.T) {
	dir := t.TempDir()
	two := filepath.Join(dir, "two")
	if err := os.WriteFile(two, []byte("key-one\nkey-two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{two, filepath.Join(dir, "missing")} {
		_, err := New(Config{HeaderFiles: map[string]string{"X-Api-Key": path}})
		if err == nil || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "key-") {
			t.Errorf("%s: %v, want an error naming the file only", path, err)
		}
	}
	if _, err := New(Config{HeaderFiles: map[string]string{"Bad Name": two}}); err == nil {
		t.Error("a header name with a space was accepted")
	}
}
