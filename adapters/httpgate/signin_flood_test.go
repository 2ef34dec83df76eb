package httpgate_test

import (
	"context"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/token"
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

// countingReplay is a memory replay store that counts what it recorded.
type countingReplay struct {
	token.ReplayStore
	recorded atomic.Int64
}

func (c *countingReplay) Consume(ctx context.Context, uses []token.Use) error {
	err := c.ReplayStore.Consume(ctx, uses)
	if err == nil {
		c.recorded.Add(int64(len(uses)))
	}
	return err
}

// TestPagesCallbacksMadeUpRecordNothing: callbacks made up by someone
// without an account (a sign-in cookie of their own, a code the provider
// never issued) record nothing in the replay store (Redis, for replicas):
// a sign-in is recorded only once the provider confirmed it.
func TestPagesCallbacksMadeUpRecordNothing(t *testing.T) {
	op := newOIDCProvider(t)
	store := &countingReplay{ReplayStore: token.NewMemoryReplayStore(token.MemoryReplayOptions{})}
	rig := newPagesRig(t, []axgate.Option{axgate.WithReplayStore(store)},
		httpgate.WithOIDCSignIn(httpgate.OIDCConfig{Issuer: op.URL, ClientID: "pages", RedirectURL: "http://pages.invalid/callback"}))
	for range 50 {
		flood := rig.newPerson(t)
		r := flood.do("GET", "/signin", nil)
		u, _ := url.Parse(r.header.Get("Location"))
		state := u.Query().Get("state")
		if r := flood.do("GET", "/callback?"+url.Values{"state": {state}, "code": {"made-up"}}.Encode(), nil); r.status != http.StatusUnauthorized {
			t.Fatalf("a made-up code: %d", r.status)
		}
	}
	if n := store.recorded.Load(); n != 0 {
		t.Fatalf("50 made-up callbacks recorded %d ids", n)
	}
	per := rig.newPerson(t)
	if r := per.do("GET", signInVia(t, per, op, "/"), nil); r.status != http.StatusSeeOther || store.recorded.Load() != 1 {
		t.Fatalf("a good sign-in: %d, %d ids recorded", r.status, store.recorded.Load())
	}
}
