package browsertest

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/axgate/axgate"
)

// decisionPages is the enforcer option that names the pages in refusals.
func decisionPages(pagesURL string) axgate.Option { return axgate.WithDecisionPages(pagesURL) }

// writeFile is carol's write_file call.
const writeFile = `{"path":"/srv/notes/plan.txt","content":"ship on Friday <b>not</b> Monday"}`

// refusedToPage makes carol's call, refused for confirmation, and returns
// the path of its page.
func (rg *rig) refusedToPage() string {
	rg.t.Helper()
	status, details := rg.call("carol", "write_file", writeFile)
	u, _ := details["decision_url"].(string)
	if status != http.StatusPreconditionRequired || !strings.HasPrefix(u, rg.pages.URL+"/requests/") {
		rg.t.Fatalf("the write was not refused with its page: %d %v", status, details)
	}
	if a, _ := details["agent_action"].(string); !strings.Contains(a, u) && !strings.Contains(a, "decision_url") {
		rg.t.Logf("agent_action %q does not name the page", a)
	}
	return strings.TrimPrefix(u, rg.pages.URL)
}

func TestBrowserConfirmThenTheRepeatRunsOnce(t *testing.T) {
	rg := newRig(t, decisionPages)
	path := rg.refusedToPage()
	carol := rg.person()
	// Her inbox lists her own call waiting for her confirmation.
	rg.visit(carol, "carol", "/")
	if inbox := rg.text(carol, "main"); !strings.Contains(inbox, "Confirmation: file.write") {
		t.Fatalf("carol's inbox:\n%s", inbox)
	}
	rg.visit(carol, "carol", path)
	if args := rg.text(carol, "#arguments"); !strings.Contains(args, `"/srv/notes/plan.txt"`) || !strings.Contains(args, `"ship on Friday <b>not</b> Monday"`) {
		t.Fatalf("the exact arguments are not shown:\n%s", args)
	}
	if msg := rg.text(carol, "#message"); msg != "Write ship on Friday <b>not</b> Monday to /srv/notes/plan.txt?" {
		t.Fatalf("message %q", msg)
	}
	if os.Getenv("AXGATE_SCREENSHOT") != "" {
		screenshot(t, carol)
	}
	if rg.ran.Load() != 0 {
		t.Fatal("the tool ran before the person confirmed")
	}
	rg.click(carol, "#confirm")
	if got := rg.text(carol, "#state"); got != "confirmed" {
		t.Fatalf("after confirming: state %q", got)
	}
	if status, details := rg.call("carol", "write_file", writeFile); status != http.StatusOK || rg.ran.Load() != 1 {
		t.Fatalf("the repeat after confirming: %d %v, ran %d", status, details, rg.ran.Load())
	}
	if status, _ := rg.call("carol", "write_file", writeFile); status != http.StatusPreconditionRequired || rg.ran.Load() != 1 {
		t.Fatalf("a second repeat: %d, ran %d", status, rg.ran.Load())
	}
}

func TestBrowserDenyThenNothingRuns(t *testing.T) {
	rg := newRig(t, decisionPages)
	path := rg.refusedToPage()
	carol := rg.person()
	rg.visit(carol, "carol", path)
	rg.click(carol, "#deny")
	if got := rg.text(carol, "#state"); got != "denied" {
		t.Fatalf("after denying: state %q", got)
	}
	if status, _ := rg.call("carol", "write_file", writeFile); status == http.StatusOK || rg.ran.Load() != 0 {
		t.Fatalf("the repeat after a denial: %d, ran %d", status, rg.ran.Load())
	}
}

func TestBrowserOnlyTheRequesterConfirms(t *testing.T) {
	rg := newRig(t, decisionPages)
	path := rg.refusedToPage()
	alice := rg.person()
	rg.visit(alice, "alice", path)
	if rg.has(alice, "#confirm") || rg.has(alice, "#arguments") {
		t.Fatalf("another person of the tenant sees or confirms carol's call:\n%s", rg.text(alice, "main"))
	}
}

// screenshot writes the page to docs/img/confirmation-page.png (for the
// README), small: the browser window, PNG.
func screenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join("..", "..", "..", "docs", "img", "confirmation-page.png")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", out, len(png))
}
