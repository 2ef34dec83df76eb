package redisstore

import (
	"strings"
	"testing"
)

// TestPersistenceRisk is the decision of Open's persistence check on the
// answers CONFIG GET may give.
func TestPersistenceRisk(t *testing.T) {
	for _, tc := range []struct {
		appendonly, save string
		warn             string // a word of the warning, "" for none
	}{
		{"yes", "", ""},
		{"yes", "3600 1 300 100", ""},
		{"YES", "", ""},
		{"no", "", "persists nothing"},
		{"no", "  ", "persists nothing"},
		{"no", "3600 1 300 100 60 10000", "since the last snapshot"},
	} {
		got := persistenceRisk(tc.appendonly, tc.save)
		if (got == "") != (tc.warn == "") || !strings.Contains(got, tc.warn) {
			t.Errorf("persistenceRisk(%q, %q) = %q; want a warning with %q", tc.appendonly, tc.save, got, tc.warn)
		}
		if got != "" && !strings.Contains(got, "spent confirmation and approval tokens") {
			t.Errorf("persistenceRisk(%q, %q) = %q; it must name the risk", tc.appendonly, tc.save, got)
		}
	}
}
