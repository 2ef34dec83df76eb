package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestLibraryQuickStartRuns runs the README's library program in a folder
// holding the README's axag.json (testdata/readme, which the README shows):
// it prints the refusal the README's comments describe.
func TestLibraryQuickStartRuns(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "readme", "axag.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "axag.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	out := filepath.Join(dir, "stdout")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = f
	main()
	os.Stdout = stdout
	f.Close()
	printed, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		Error struct {
			Code    string
			Details struct {
				Violations []struct{ Path, Code string }
			}
		}
	}
	if err := json.Unmarshal(printed, &env); err != nil {
		t.Fatalf("the program printed %q: %v", printed, err)
	}
	v := env.Error.Details.Violations
	if env.Error.Code != "AXAG_INVALID_FORMAT" || len(v) != 2 || v[0].Path != "/cart_id" || v[0].Code != "AXAG_INVALID_FORMAT" ||
		v[1].Path != "/shipping_address_id" || v[1].Code != "AXAG_MISSING_PARAM" {
		t.Errorf("the program printed %s; want the README's AXAG_INVALID_FORMAT with /cart_id and /shipping_address_id", printed)
	}
}
