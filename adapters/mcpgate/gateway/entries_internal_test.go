package gateway

import (
	"testing"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// TestResourceUpdatesFiltered: the upstream's notifications about
// resources reach a client only for what it may read: an update only for a
// declared URI that the session's subscriber may read (none before it
// subscribed), a list change only of a kind the manifest declares.
func TestResourceUpdatesFiltered(t *testing.T) {
	t.Parallel()
	m, err := manifest.Parse([]byte(`{"version": "1.0.0", "actions": [],
	 "resources": [{"intent": "payroll.file", "entity": "payroll", "description": "d", "uri": "payroll://all", "required_roles": ["hr"]},
	               {"intent": "docs.read", "entity": "docs", "description": "d", "uri_prefix": "docs://"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{}
	b.policy.Store(&policy{m: m, access: gate.NewAccess(m, gates.AccessOptions{})})
	l := &link{b: b}
	const updated = "notifications/resources/updated"
	if l.passesNotification(updated, "docs://a") {
		t.Error("an update reached a session that subscribed to nothing")
	}
	l.subscriber.Store(&middleware.Principal{ID: "eve"})
	for uri, want := range map[string]bool{"docs://a": true, "payroll://all": false, "secret://keys": false, "docs://../x": false} {
		if got := l.passesNotification(updated, uri); got != want {
			t.Errorf("eve: update of %s passes %v; want %v", uri, got, want)
		}
	}
	l.subscriber.Store(&middleware.Principal{ID: "hana", Roles: []string{"hr"}})
	if !l.passesNotification(updated, "payroll://all") || l.passesNotification(updated, "secret://keys") {
		t.Error("hana: the updates are not filtered by what she may read")
	}
	if !l.passesNotification("notifications/resources/list_changed", "") || l.passesNotification("notifications/prompts/list_changed", "") {
		t.Error("list changes pass for the kinds the manifest does not declare, or not for those it does")
	}
}
