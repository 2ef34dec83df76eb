package token

import (
	"os"
	"strings"
	"testing"
)

// readmeErrorTable returns the first cells (without backticks) of the table
// in docs/errors.md whose header row starts with header.
func readmeErrorTable(t *testing.T, header string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(b)
	rows := map[string]bool{}
	in := false
	for line := range strings.Lines(sec) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			in = false
			continue
		}
		first := strings.TrimSpace(strings.Split(strings.Trim(line, "|"), "|")[0])
		switch {
		case first == header:
			in = true
		case in && !strings.HasPrefix(first, "---"):
			rows[strings.Trim(first, "`")] = true
		}
	}
	if len(rows) == 0 {
		t.Fatalf("docs/errors.md has no table headed %q", header)
	}
	return rows
}

// TestTokenReasonsInErrorsDoc: token reasons are a set of their own (the
// verifier's vocabulary, with Describe texts) but reach agents in
// details.reason and rejected_tokens, so docs/errors.md's token table lists
// every one (reasonText is the catalogue Describe reads), and none shares a
// value with an axerr.Reason: one value, one meaning.
func TestTokenReasonsInErrorsDoc(t *testing.T) {
	tokens := readmeErrorTable(t, "token reason")
	reasons := readmeErrorTable(t, "reason")
	for r := range reasonText {
		if !tokens[string(r)] {
			t.Errorf("token reason %q is not in docs/errors.md's token reason table", r)
		}
		if reasons[string(r)] {
			t.Errorf("token reason %q is also an axerr.Reason", r)
		}
	}
	for v := range tokens {
		if _, ok := reasonText[Reason(v)]; !ok {
			t.Errorf("docs/errors.md's token reason table lists %q, which is no TokenReason", v)
		}
	}
}
