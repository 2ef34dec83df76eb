package httpgate

import (
	"testing"

	"github.com/axgate/axgate/middleware"
)

func TestSessionStoreIsBounded(t *testing.T) {
	s := newSessions()
	first, _ := s.start(middleware.Principal{ID: "p0"}, "")
	for i := range maxSessions + 10 {
		s.start(middleware.Principal{ID: "p"}, "")
		if len(s.byID) > maxSessions {
			t.Fatalf("%d sessions after %d sign-ins", len(s.byID), i+2)
		}
	}
	if _, ok := s.get(first); ok {
		t.Fatal("the oldest session was kept over the bound")
	}
	for range maxPendingSignIns + 10 {
		s.begin(&pendingSignIn{browser: "b"})
		if len(s.pending) > maxPendingSignIns {
			t.Fatalf("%d pending sign-ins", len(s.pending))
		}
	}
}

func TestPendingSignInIsBoundToItsBrowserAndUsedOnce(t *testing.T) {
	s := newSessions()
	state := s.begin(&pendingSignIn{browser: "mine"})
	if _, ok := s.finish(state, "theirs"); ok {
		t.Fatal("another browser finished the sign-in")
	}
	state = s.begin(&pendingSignIn{browser: "mine"})
	if _, ok := s.finish(state, "mine"); !ok {
		t.Fatal("the browser that began it could not finish it")
	}
	if _, ok := s.finish(state, "mine"); ok {
		t.Fatal("a sign-in finished twice")
	}
}
