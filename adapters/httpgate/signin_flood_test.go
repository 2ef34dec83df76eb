package httpgate_test

import (
	"net/http"
	"testing"

	"github.com/axgate/axgate/adapters/httpgate"
)

// TestPagesSignInInProgressSurvivesAFloodOfSignInsStarted: a thousand and
// one sign-ins started by others (no cookie, no account) leave a
// person's sign-in in progress able to finish: nothing of a started
// sign-in is kept by the server for them to evict.
func TestPagesSignInInProgressSurvivesAFloodOfSignInsStarted(t *testing.T) {
	op := newOIDCProvider(t)
	rig := newPagesRig(t, nil, httpgate.WithOIDCSignIn(httpgate.OIDCConfig{Issuer: op.URL, ClientID: "pages", RedirectURL: "http://pages.invalid/callback"}))
	per := rig.newPerson(t)
	cb := signInVia(t, per, op, "/")
	flood := rig.newPerson(t)
	for range 1001 {
		flood.client.Jar = nil
		flood.do("GET", "/signin", nil)
	}
	if r := per.do("GET", cb, nil); r.status != http.StatusSeeOther {
		t.Errorf("after 1001 anonymous GET /signin, the person's sign-in: %d", r.status)
	}
}
