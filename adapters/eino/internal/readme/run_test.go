package main

import (
	"bytes"
	"log"
	"os"
	"strings"
	"testing"
)

// TestREADMEProgramRuns runs the README's program on a manifest that
// declares product_search: the call it makes is refused as the README says.
func TestREADMEProgramRuns(t *testing.T) {
	t.Chdir(t.TempDir())
	m := `{"version":"1.0.0","actions":[{"intent":"product.search","entity":"product","action_type":"read","description":"Search the catalogue",
	  "required_parameters":[{"name":"query","type":"string"}],"risk_level":"none"}]}`
	if err := os.WriteFile("axag.json", []byte(m), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	log.SetOutput(&out)
	defer log.SetOutput(os.Stderr)
	main()
	if !strings.Contains(out.String(), "AXAG_INVALID_TYPE") || !strings.Contains(out.String(), "/query") {
		t.Fatalf("the program logged %q; want the AXAG_INVALID_TYPE refusal of /query", out.String())
	}
}
