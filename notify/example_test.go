package notify_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/axgate/axgate/notify"
)

// A receiver verifies each delivery's signature over the raw body before it
// decodes it, and refuses stale timestamps.
func ExampleVerify() {
	secret := []byte("0123456789abcdef0123456789abcdef")
	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable", http.StatusBadRequest)
			return
		}
		if err := notify.Verify(secret, r.Header.Get(notify.SignatureHeader), body, 5*time.Minute, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		// Decode body as a notify.Payload; request_id is the idempotency key.
		fmt.Println("verified:", string(body))
	})

	body := `{"type":"approval.requested","request_id":"r1"}`
	for _, sent := range []time.Time{time.Now(), time.Now().Add(-time.Hour)} {
		req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
		req.Header.Set(notify.SignatureHeader, notify.Sign(secret, []byte(body), sent))
		w := httptest.NewRecorder()
		receiver.ServeHTTP(w, req)
		fmt.Println(w.Code)
	}
	// Output:
	// verified: {"type":"approval.requested","request_id":"r1"}
	// 200
	// 401
}
