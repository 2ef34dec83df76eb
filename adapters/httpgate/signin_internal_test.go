package httpgate

import (
	"testing"
	"time"

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
	for range maxTakenSignIns + 10 {
		state, cookie, err := s.begin(&pendingSignIn{})
		if err != nil {
			t.Fatal(err)
		}
		s.finish(state, cookie)
		if len(s.used) > maxTakenSignIns {
			t.Fatalf("%d sign-in states kept", len(s.used))
		}
	}
}

func TestPendingSignInIsBoundToItsBrowserAndUsedOnce(t *testing.T) {
	s := newSessions()
	state, mine, err := s.begin(&pendingSignIn{nonce: "n"})
	if err != nil {
		t.Fatal(err)
	}
	_, theirs, _ := s.begin(&pendingSignIn{nonce: "n"})
	if _, ok := s.finish(state, theirs); ok {
		t.Fatal("another browser finished the sign-in")
	}
	if _, ok := s.finish(state, ""); ok {
		t.Fatal("a browser without the cookie finished the sign-in")
	}
	if _, ok := s.finish(state, mine+"x"); ok {
		t.Fatal("a cookie altered finished the sign-in")
	}
	if _, ok := newSessions().finish(state, mine); ok {
		t.Fatal("another handler's cookie finished the sign-in")
	}
	if p, ok := s.finish(state, mine); !ok || p.nonce != "n" {
		t.Fatal("the browser that began it could not finish it")
	}
	if _, ok := s.finish(state, mine); ok {
		t.Fatal("a sign-in finished twice")
	}
	state, late, _ := s.begin(&pendingSignIn{})
	s.now = func() time.Time { return time.Now().Add(signInLifetime + time.Minute) }
	if _, ok := s.finish(state, late); ok {
		t.Fatal("an expired sign-in finished")
	}
}
