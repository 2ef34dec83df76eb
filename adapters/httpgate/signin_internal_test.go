package httpgate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// finish is the callback's pending then take.
func (s *sessions) finish(ctx context.Context, state, cookie string) (*pendingSignIn, error) {
	p := s.pending(state, cookie)
	if p == nil {
		return nil, nil
	}
	if ok, err := s.take(ctx, p); !ok {
		return nil, err
	}
	return p, nil
}

func TestPendingSignInIsBoundToItsBrowserAndUsedOnce(t *testing.T) {
	ctx := context.Background()
	s := newSessions(nil, nil)
	state, mine, err := s.begin(&pendingSignIn{nonce: "n"})
	if err != nil {
		t.Fatal(err)
	}
	_, theirs, _ := s.begin(&pendingSignIn{nonce: "n"})
	if p, _ := s.finish(ctx, state, theirs); p != nil {
		t.Fatal("another browser finished the sign-in")
	}
	if p, _ := s.finish(ctx, state, ""); p != nil {
		t.Fatal("a browser without the cookie finished the sign-in")
	}
	if p, _ := s.finish(ctx, state, mine+"x"); p != nil {
		t.Fatal("a cookie altered finished the sign-in")
	}
	if p, _ := newSessions(nil, nil).finish(ctx, state, mine); p != nil {
		t.Fatal("another handler's cookie finished the sign-in")
	}
	if p, err := s.finish(ctx, state, mine); err != nil || p == nil || p.nonce != "n" {
		t.Fatalf("the browser that began it could not finish it: %v", err)
	}
	if p, _ := s.finish(ctx, state, mine); p != nil {
		t.Fatal("a sign-in finished twice")
	}
	state, late, _ := s.begin(&pendingSignIn{})
	s.now = func() time.Time { return time.Now().Add(signInLifetime + time.Minute) }
	if p, _ := s.finish(ctx, state, late); p != nil {
		t.Fatal("an expired sign-in finished")
	}
}

// TestSessionCookieExpiresAndEndsEverywhere: a session cookie is taken
// until its lifetime is over, by a handler of the same key and store, and
// not after it ended on either.
func TestSessionCookieExpiresAndEndsEverywhere(t *testing.T) {
	ctx := context.Background()
	key := []byte(strings.Repeat("k", cookieKeySize))
	store := token.NewMemoryReplayStore(token.MemoryReplayOptions{})
	a, b := newSessions(key, store), newSessions(key, store)
	cookie, _, err := a.start(ctx, middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"finance"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.get(ctx, cookie)
	if err != nil || s == nil || s.person.ID != "alice" || s.person.Tenant != "acme" || len(s.person.Roles) != 1 {
		t.Fatalf("the other handler did not take the session: %+v %v", s, err)
	}
	b.now = func() time.Time { return time.Now().Add(sessionLifetime + time.Minute) }
	if s, _ := b.get(ctx, cookie); s != nil {
		t.Fatal("a session was taken after its lifetime")
	}
	b.now = time.Now
	if err := b.end(ctx, s); err != nil {
		t.Fatal(err)
	}
	if s, _ := a.get(ctx, cookie); s != nil {
		t.Fatal("a session ended on one handler was taken by the other")
	}
	// A new sign-in ends the session the browser brought.
	first, _, _ := a.start(ctx, middleware.Principal{ID: "bob"}, "")
	if _, _, err := b.start(ctx, middleware.Principal{ID: "bob"}, first); err != nil {
		t.Fatal(err)
	}
	if s, _ := a.get(ctx, first); s != nil {
		t.Fatal("the session a new sign-in replaced was still taken")
	}
}

// TestCookiesOfAStoreThatForgotAreRefused: a store that forgets on
// restart (memory) could not tell an ended session from a live one, so
// cookies issued before it began to remember are refused.
func TestCookiesOfAStoreThatForgotAreRefused(t *testing.T) {
	ctx := context.Background()
	key := []byte(strings.Repeat("k", cookieKeySize))
	before := newSessions(key, nil)
	before.now = func() time.Time { return time.Now().Add(-time.Hour) }
	cookie, _, err := before.start(ctx, middleware.Principal{ID: "alice"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := newSessions(key, token.NewMemoryReplayStore(token.MemoryReplayOptions{})).get(ctx, cookie); s != nil {
		t.Fatal("a session cookie older than the store was taken")
	}
}

func TestShortCookieKeySignsNothing(t *testing.T) {
	s := newSessions([]byte("short"), nil)
	if _, _, err := s.begin(&pendingSignIn{}); err == nil {
		t.Fatal("a sign-in began with a 5-byte key")
	}
	if _, _, err := s.start(context.Background(), middleware.Principal{ID: "a"}, ""); err == nil {
		t.Fatal("a session was signed with a 5-byte key")
	}
}

// BenchmarkSessionCookieCheck is what each page view costs to find its
// person: the session cookie's signature and claims checked, and the
// session looked up among the ended ones (a memory replay store; Redis adds
// one round trip).
func BenchmarkSessionCookieCheck(b *testing.B) {
	ctx := context.Background()
	s := newSessions([]byte(strings.Repeat("k", cookieKeySize)), nil)
	cookie, _, err := s.start(ctx, middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"finance", "admin"}}, "")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if sess, err := s.get(ctx, cookie); sess == nil || err != nil {
			b.Fatal("no session")
		}
	}
}
