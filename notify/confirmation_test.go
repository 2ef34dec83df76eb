package notify_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/notify"
)

// A confirmation request (axgate.WithDecisionPages) is notified as an
// approval request is, marked kind "confirmation", with no roles; Slack
// says whose confirmation it needs.
func TestConfirmationRequestNotified(t *testing.T) {
	m, err := manifest.Parse([]byte(`{"version":"1.0.0","actions":[
	 {"intent":"file.write","entity":"file","action_type":"write","description":"Write a file",
	  "required_parameters":[{"name":"path","type":"string"}],
	  "risk_level":"medium","confirmation_required":true,"confirmation_message":"Write {{path}}?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	hook, slack := newReceiver(t), newReceiver(t)
	n := newNotifier(t, notify.Options{Manifest: m, Routes: []notify.Route{{Endpoints: []notify.Endpoint{
		{URL: hook.URL, Secret: secret}, {URL: slack.URL, Format: notify.FormatSlack}}}}})
	e, err := axgate.New(m, axgate.WithDecisionPages("https://ops.example/axgate/"), axgate.WithApprovals(axgate.ApprovalOptions{Notifier: n}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	call := middleware.NewCall("file_write", json.RawMessage(`{"path":"/etc/motd"}`), middleware.Principal{ID: "alice", Tenant: "acme"})
	_, err = e.Wrap(middleware.InvokerFunc(nil)).Invoke(t.Context(), call)
	if !axerr.Is(err, axerr.CodeConfirmationMissing) {
		t.Fatalf("err = %v", err)
	}
	var p notify.Payload
	if err := json.Unmarshal(hook.next(t).body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Kind != "confirmation" || p.Requester != "alice" || len(p.ApprovalRoles) != 0 || p.Message != "Write /etc/motd?" || !strings.HasPrefix(p.RequestID, "cnf_") {
		t.Fatalf("payload %+v", p)
	}
	var s struct{ Text string }
	if err := json.Unmarshal(slack.next(t).body, &s); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Text, "*Confirmation requested*") || !strings.Contains(s.Text, "Needs the confirmation of alice") {
		t.Fatalf("slack text %q", s.Text)
	}
}
