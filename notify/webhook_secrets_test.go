package notify_test

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axgate/axgate/notify"
)

// syncBuffer is a log destination the notifier's workers and the test can share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Attack: the path of an incoming webhook is its secret, and the notifier
// logs only the endpoint's scheme and host — but a delivery that fails in
// the transport (receiver down) logs the HTTP client's error, which quotes
// the whole URL. The log must not hold the webhook's path or query.
func TestFailedDeliveryLogHidesWebhookPath(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens: every try fails in the transport
	const pathSecret = "T0000/B0000/XXXXsecretXXXX"
	const querySecret = "tok3nSECRET"
	var logs syncBuffer
	n, err := notify.New(notify.Options{
		Manifest: parsed(t),
		Attempts: 2,
		Backoff:  time.Millisecond,
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
		Routes: []notify.Route{{Endpoints: []notify.Endpoint{
			{URL: "http://" + addr + "/services/" + pathSecret + "?token=" + querySecret, Format: notify.FormatSlack},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.ApprovalRequested(t.Context(), request("r1", "acme", "payout.send", `{"amount":1,"to":"x"}`)); err != nil {
		t.Fatal(err)
	}
	// fail counts before it logs: wait for the log record itself.
	eventually(t, "the failure is logged", func() bool { return strings.Contains(logs.String(), "axgate notification failed") })
	out := logs.String()
	if strings.Contains(out, pathSecret) || strings.Contains(out, querySecret) {
		t.Errorf("the log holds the webhook's secret path or query:\n%s", out)
	}
}

// Attack: a receiver reads its key from a variable that is unset, so it
// calls Verify with an empty secret. Anyone can compute the HMAC with an
// empty key, so Verify must refuse rather than accept a forged body.
func TestVerifyWithEmptySecretRefusesForgery(t *testing.T) {
	forged := []byte(`{"request_id":"forged","intent":"payout.send"}`)
	now := time.Now()
	header := notify.Sign(nil, forged, now)
	for _, key := range [][]byte{nil, {}} {
		if err := notify.Verify(key, header, forged, time.Minute, now); err == nil {
			t.Errorf("Verify with an empty secret (%#v) accepted a body signed with the empty key", key)
		}
	}
	// A real key still verifies.
	if err := notify.Verify(secret, notify.Sign(secret, forged, now), forged, time.Minute, now); err != nil {
		t.Errorf("a real signature: %v", err)
	}
}
