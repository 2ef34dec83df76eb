package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/notify"
)

// The snippets of docs/tokens.md (Approval notifications): the enforcer's approval gate notifies the webhook
// and, for tenant acme, the Slack endpoint; the receiver's Verify accepts
// the webhook's signature.
func TestREADMENotify(t *testing.T) {
	m := parsed(t)
	verified := make(chan string, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := notify.Verify(secret, r.Header.Get(notify.SignatureHeader), body, 5*time.Minute, time.Now()); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		verified <- "hook"
	}))
	defer hook.Close()
	slack := newReceiver(t)
	hookURL, slackWebhookURL := hook.URL, slack.URL

	n, err := notify.New(notify.Options{
		Manifest: m,
		Routes: []notify.Route{
			{Endpoints: []notify.Endpoint{{URL: hookURL, Secret: secret}}},
			{Tenant: "acme", Endpoints: []notify.Endpoint{{URL: slackWebhookURL, Format: notify.FormatSlack}}},
		},
		Links: notify.HumanHandlerLinks("https://ops.example/axgate"),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()
	e, err := axgate.New(m, axgate.WithApprovals(axgate.ApprovalOptions{Notifier: n}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	tool := e.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{}, nil
	}))
	for _, tenant := range []string{"globex", "acme"} {
		call := middleware.NewCall("user_delete", json.RawMessage(`{"id":"u-9"}`), middleware.Principal{ID: "alice", Tenant: tenant})
		if _, err := tool.Invoke(t.Context(), call); err == nil {
			t.Fatal("allowed without approval")
		}
	}
	select {
	case <-verified:
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook got no verified delivery")
	}
	var msg map[string]string
	if err := json.Unmarshal(slack.next(t).body, &msg); err != nil || msg["text"] == "" {
		t.Fatalf("slack message %v: %v", msg, err)
	}
}
