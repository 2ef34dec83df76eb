package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/notify"
)

const testManifest = `{
  "version": "1.0.0",
  "actions": [
    {"intent": "payout.send", "entity": "payout", "action_type": "write", "description": "Send a payout",
     "required_parameters": [{"name": "amount", "type": "number"}, {"name": "to", "type": "string"}],
     "risk_level": "low", "side_effects": ["money_moved"],
     "confirmation_message": "Send {{amount}} to {{to}}?",
     "approval_required": true, "approval_roles": ["finance"]},
    {"intent": "user.delete", "entity": "user", "action_type": "delete", "description": "Delete a user",
     "required_parameters": [{"name": "id", "type": "string"}],
     "risk_level": "medium", "approval_required": true, "approval_roles": ["admin"]}
  ]
}`

var secret = []byte("0123456789abcdef0123456789abcdef")

func parsed(t *testing.T) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse([]byte(testManifest))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// delivered is one request a receiver got.
type delivered struct {
	header http.Header
	body   []byte
}

// receiver is a real HTTP server that records deliveries on a channel and
// answers with the statuses it is given in turn (then 200).
type receiver struct {
	*httptest.Server
	got      chan delivered
	mu       sync.Mutex
	statuses []int
	hold     chan struct{} // when not nil, each request waits for it to close
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	t.Helper()
	r := &receiver{got: make(chan delivered, 100), statuses: statuses}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.got <- delivered{header: req.Header.Clone(), body: body}
		if r.hold != nil {
			<-r.hold
		}
		r.mu.Lock()
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) next(t *testing.T) delivered {
	t.Helper()
	select {
	case d := <-r.got:
		return d
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery within 30s")
		return delivered{}
	}
}

func newNotifier(t *testing.T, o notify.Options) *notify.Notifier {
	t.Helper()
	if o.Manifest == nil {
		o.Manifest = parsed(t)
	}
	if o.Backoff == 0 {
		o.Backoff = time.Millisecond
	}
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := notify.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func request(id, tenant, intent, args string) gates.ApprovalRequest {
	now := time.Now()
	return gates.ApprovalRequest{ID: id, Tool: strings.ReplaceAll(intent, ".", "_"), Intent: intent, Requester: "alice",
		Tenant: tenant, ArgsSHA256: "digest", Arguments: json.RawMessage(args), Roles: []string{"finance"}, Count: 1,
		State: gates.ApprovalPending, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
}

// eventually polls cond with generous bounds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// An enforcer's approval gate notifies through the webhook: the receiver
// gets a signed JSON body that says what waits for approval, with the
// confirmation message filled in and the human handler's links.
func TestWebhookFromTheApprovalGate(t *testing.T) {
	rcv := newReceiver(t)
	n := newNotifier(t, notify.Options{
		Routes: []notify.Route{{Endpoints: []notify.Endpoint{{URL: rcv.URL + "/hook", Secret: secret}}}},
		Links:  notify.HumanHandlerLinks("https://ops.example/axgate/"),
	})
	e, err := axgate.New(parsed(t), axgate.WithApprovals(axgate.ApprovalOptions{Notifier: n}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tool := e.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		t.Error("the tool ran without approval")
		return middleware.Result{}, nil
	}))
	call := middleware.NewCall("payout_send", json.RawMessage(`{"amount":250,"to":"<@channel> Bob"}`),
		middleware.Principal{ID: "alice", Tenant: "acme"})
	_, err = tool.Invoke(t.Context(), call)
	ae, ok := axerr.As(err)
	if !ok || ae.Code != axerr.CodeApprovalMissing || ae.Details["approvers_notified"] != true {
		t.Fatalf("err = %v (details %v); want AXAG_APPROVAL_MISSING with approvers_notified", err, ae.Details)
	}
	d := rcv.next(t)
	if err := notify.Verify(secret, d.header.Get(notify.SignatureHeader), d.body, time.Minute, time.Now()); err != nil {
		t.Fatalf("signature: %v (header %q)", err, d.header.Get(notify.SignatureHeader))
	}
	var p notify.Payload
	if err := json.Unmarshal(d.body, &p); err != nil {
		t.Fatal(err)
	}
	reqID := ae.Details["approval_request_id"]
	want := notify.Payload{Type: "approval.requested", RequestID: reqID.(string), Tenant: "acme", Intent: "payout.send",
		Tool: "payout_send", RiskLevel: "low", Requester: "alice", SideEffects: []string{"money_moved"},
		Message: "Send 250 to <@channel> Bob?", ApprovalsNeeded: 1, ApprovalRoles: []string{"finance"},
		ApproveURL: "https://ops.example/axgate/requests/" + reqID.(string), DenyURL: "https://ops.example/axgate/requests/" + reqID.(string)}
	p.ArgsSHA256, p.CreatedAt, p.ExpiresAt = "", time.Time{}, time.Time{}
	gotJSON, _ := json.Marshal(p)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("payload\n got %s\nwant %s", gotJSON, wantJSON)
	}
	if strings.Contains(string(d.body), `"arguments"`) {
		t.Errorf("payload carries the raw arguments: %s", d.body)
	}
}

func TestVerify(t *testing.T) {
	body := []byte(`{"request_id":"r1"}`)
	now := time.Unix(1_800_000_000, 0)
	h := notify.Sign(secret, body, now)
	cases := []struct {
		name   string
		secret []byte
		header string
		body   []byte
		now    time.Time
		want   error
	}{
		{"valid", secret, h, body, now, nil},
		{"valid, clock a little behind", secret, h, body, now.Add(-time.Minute), nil},
		{"tampered body", secret, h, []byte(`{"request_id":"r2"}`), now, notify.ErrBadSignature},
		{"other secret", []byte("another secret of thirty-two byt"), h, body, now, notify.ErrBadSignature},
		{"replayed later", secret, h, body, now.Add(6 * time.Minute), notify.ErrStale},
		{"timestamp moved", secret, strings.Replace(h, "t=1800000000", "t=1800000300", 1), body, now.Add(5 * time.Minute), notify.ErrBadSignature},
		{"no header", secret, "", body, now, notify.ErrNoSignature},
		{"no v1", secret, "t=1800000000", body, now, notify.ErrNoSignature},
		{"rotated: a second v1 matches", secret, "t=1800000000,v1=00ff," + strings.Split(h, ",")[1], body, now, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := notify.Verify(tc.secret, tc.header, tc.body, 5*time.Minute, tc.now); !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v; want %v", err, tc.want)
			}
		})
	}
}

// A receiver that answers 500 gets the delivery again, each try signed
// anew; a 400 is not retried; past Attempts the delivery fails.
func TestRetries(t *testing.T) {
	rcv := newReceiver(t, 500, 503, 200)
	n := newNotifier(t, notify.Options{Routes: []notify.Route{{Endpoints: []notify.Endpoint{{URL: rcv.URL, Secret: secret}}}}})
	if err := n.ApprovalRequested(t.Context(), request("r1", "acme", "payout.send", `{"amount":1,"to":"x"}`)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		d := rcv.next(t)
		if err := notify.Verify(secret, d.header.Get(notify.SignatureHeader), d.body, time.Minute, time.Now()); err != nil {
			t.Errorf("try %d: %v", i+1, err)
		}
	}
	eventually(t, "sent after two retries", func() bool { return n.Stats().Sent == 1 })
	if s := n.Stats(); s.Retried != 2 || s.Failed != 0 {
		t.Errorf("stats = %+v; want 2 retries", s)
	}

	bad := newReceiver(t, 400)
	n2 := newNotifier(t, notify.Options{Routes: []notify.Route{{Endpoints: []notify.Endpoint{{URL: bad.URL, Secret: secret}}}}})
	_ = n2.ApprovalRequested(t.Context(), request("r2", "acme", "payout.send", `{}`))
	bad.next(t)
	eventually(t, "a 400 fails the delivery", func() bool { return n2.Stats().Failed == 1 })
	if s := n2.Stats(); s.Retried != 0 {
		t.Errorf("a 400 was retried: %+v", s)
	}

	down := newReceiver(t, 500, 500, 500)
	n3 := newNotifier(t, notify.Options{Attempts: 3, Routes: []notify.Route{{Endpoints: []notify.Endpoint{{URL: down.URL, Secret: secret}}}}})
	_ = n3.ApprovalRequested(t.Context(), request("r3", "acme", "payout.send", `{}`))
	for range 3 {
		down.next(t)
	}
	eventually(t, "fails after 3 attempts", func() bool { return n3.Stats().Failed == 1 })
	if s := n3.Stats(); s.Retried != 2 || s.Sent != 0 {
		t.Errorf("stats = %+v", s)
	}
}

// A receiver that does not answer delays no call, and the queue stays
// bounded: past it notifications are dropped and counted.
func TestSlowReceiverNeverBlocksAndQueueIsBounded(t *testing.T) {
	rcv := newReceiver(t)
	rcv.hold = make(chan struct{})
	n := newNotifier(t, notify.Options{Queue: 2, Workers: 1,
		Routes: []notify.Route{{Endpoints: []notify.Endpoint{{URL: rcv.URL, Secret: secret}}}}})
	if err := n.ApprovalRequested(t.Context(), request("first", "acme", "payout.send", `{}`)); err != nil {
		t.Fatal(err)
	}
	rcv.next(t) // the one worker is now stuck on the receiver
	var dropped int
	for i := range 10 {
		// Each call returns although the receiver holds the worker: were
		// it to wait, this loop would never end.
		err := n.ApprovalRequested(t.Context(), request("r"+string(rune('a'+i)), "acme", "payout.send", `{}`))
		if errors.Is(err, notify.ErrDropped) {
			dropped++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if dropped != 8 || n.Stats().Dropped != 8 {
		t.Errorf("dropped %d (stats %+v); want 8 past a queue of 2", dropped, n.Stats())
	}
	close(rcv.hold)
	eventually(t, "the queued two sent", func() bool { return n.Stats().Sent == 3 })
}

// Routes: the most specific match wins (tenant and intent, intent, tenant,
// catch-all); Slack endpoints get an incoming-webhook message with the
// values escaped.
func TestRoutingAndSlack(t *testing.T) {
	all, acme, payouts, acmePayouts := newReceiver(t), newReceiver(t), newReceiver(t), newReceiver(t)
	n := newNotifier(t, notify.Options{Routes: []notify.Route{
		{Endpoints: []notify.Endpoint{{URL: all.URL, Secret: secret}}},
		{Tenant: "acme", Endpoints: []notify.Endpoint{{URL: acme.URL, Format: notify.FormatSlack}}},
		{Intent: "payout.send", Endpoints: []notify.Endpoint{{URL: payouts.URL, Secret: secret}}},
		{Tenant: "acme", Intent: "payout.send", Endpoints: []notify.Endpoint{{URL: acmePayouts.URL, Secret: secret}}},
	}})
	send := func(id, tenant, intent string) {
		if err := n.ApprovalRequested(t.Context(), request(id, tenant, intent, `{"amount":5,"to":"<!here> & co"}`)); err != nil {
			t.Fatal(err)
		}
	}
	send("1", "acme", "payout.send")
	send("2", "acme", "user.delete")
	send("3", "globex", "payout.send")
	send("4", "globex", "user.delete")
	idOf := func(d delivered) string {
		var p notify.Payload
		_ = json.Unmarshal(d.body, &p)
		return p.RequestID
	}
	if id := idOf(acmePayouts.next(t)); id != "1" {
		t.Errorf("tenant+intent route got %q", id)
	}
	if id := idOf(payouts.next(t)); id != "3" {
		t.Errorf("intent route got %q", id)
	}
	if id := idOf(all.next(t)); id != "4" {
		t.Errorf("catch-all route got %q", id)
	}
	slack := acme.next(t)
	var msg map[string]string
	if err := json.Unmarshal(slack.body, &msg); err != nil || len(msg) != 1 {
		t.Fatalf("slack body %s: %v", slack.body, err)
	}
	text := msg["text"]
	if !strings.Contains(text, "`user.delete`") || !strings.Contains(text, "Request 2") {
		t.Errorf("slack text = %q", text)
	}
	if slack.header.Get(notify.SignatureHeader) != "" {
		t.Errorf("an unsigned Slack endpoint got a signature")
	}
	eventually(t, "4 sent", func() bool { return n.Stats().Sent == 4 })
	for _, r := range []*receiver{all, acme, payouts, acmePayouts} {
		select {
		case d := <-r.got:
			t.Errorf("extra delivery %s", d.body)
		default:
		}
	}
}

func TestSlackEscapesValues(t *testing.T) {
	rcv := newReceiver(t)
	n := newNotifier(t, notify.Options{
		Routes: []notify.Route{{Endpoints: []notify.Endpoint{{URL: rcv.URL, Format: notify.FormatSlack}}}},
		Links:  notify.HumanHandlerLinks("https://ops.example"),
	})
	_ = n.ApprovalRequested(t.Context(), request("r1", "acme", "payout.send", `{"amount":5,"to":"<!here|x> & <https://evil|click>"}`))
	var msg map[string]string
	_ = json.Unmarshal(rcv.next(t).body, &msg)
	text := msg["text"]
	if strings.Contains(text, "<!here") || strings.Contains(text, "<https://evil") {
		t.Errorf("slack text lets a value forge markup: %q", text)
	}
	if !strings.Contains(text, "&lt;!here|x&gt; &amp; &lt;https://evil|click&gt;") || !strings.Contains(text, "<https://ops.example/requests/r1|Approve>") {
		t.Errorf("slack text = %q", text)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	m := parsed(t)
	for _, tc := range []struct {
		name string
		o    notify.Options
		want string
	}{
		{"no routes", notify.Options{Manifest: m}, "no routes"},
		{"no manifest", notify.Options{Routes: []notify.Route{{Endpoints: []notify.Endpoint{{URL: "https://x", Secret: secret}}}}}, "no manifest"},
		{"unsigned JSON", notify.Options{Manifest: m, Routes: []notify.Route{{Endpoints: []notify.Endpoint{{URL: "https://x"}}}}}, "Secret"},
		{"bad URL", notify.Options{Manifest: m, Routes: []notify.Route{{Endpoints: []notify.Endpoint{{URL: "ftp://x", Secret: secret}}}}}, "http(s)"},
		{"unknown intent", notify.Options{Manifest: m, Routes: []notify.Route{{Intent: "payout.sned", Endpoints: []notify.Endpoint{{URL: "https://x", Secret: secret}}}}}, "payout.sned"},
		{"negative queue", notify.Options{Manifest: m, Queue: -1, Routes: []notify.Route{{Endpoints: []notify.Endpoint{{URL: "https://x", Secret: secret}}}}}, "Queue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := notify.New(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v; want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range []notify.Format{notify.FormatJSON, notify.FormatSlack} {
		if got, err := notify.ParseFormat(f.String()); err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %v, %v", f.String(), got, err)
		}
	}
	if f, err := notify.ParseFormat(""); err != nil || f != notify.FormatJSON {
		t.Errorf(`ParseFormat("") = %v, %v; want json`, f, err)
	}
	if _, err := notify.ParseFormat("teams"); err == nil {
		t.Error(`ParseFormat("teams") accepted`)
	}
}

// When the queue is full the gate's refusal says so: approvers_notified is
// false, and the call is refused as ever.
func TestGateReportsDroppedNotification(t *testing.T) {
	rcv := newReceiver(t)
	rcv.hold = make(chan struct{})
	defer close(rcv.hold)
	n := newNotifier(t, notify.Options{Queue: 1, Workers: 1,
		Routes: []notify.Route{{Endpoints: []notify.Endpoint{{URL: rcv.URL, Secret: secret}}}}})
	e, err := axgate.New(parsed(t), axgate.WithApprovals(axgate.ApprovalOptions{Notifier: n}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tool := e.Wrap(middleware.InvokerFunc(func(context.Context, *middleware.Call) (middleware.Result, error) {
		return middleware.Result{}, nil
	}))
	notified := func(id string) any {
		call := middleware.NewCall("user_delete", json.RawMessage(`{"id":"`+id+`"}`), middleware.Principal{ID: "alice", Tenant: "acme"})
		_, err := tool.Invoke(t.Context(), call)
		ae, ok := axerr.As(err)
		if !ok || ae.Code != axerr.CodeApprovalMissing {
			t.Fatalf("err = %v", err)
		}
		return ae.Details["approvers_notified"]
	}
	if got := notified("u1"); got != true {
		t.Fatalf("first: approvers_notified = %v", got)
	}
	rcv.next(t) // the worker holds the first; the queue has room for one
	if got := notified("u2"); got != true {
		t.Fatalf("second: approvers_notified = %v", got)
	}
	if got := notified("u3"); got != false {
		t.Errorf("third, queue full: approvers_notified = %v; want false", got)
	}
	if s := n.Stats(); s.Dropped != 1 {
		t.Errorf("stats = %+v; want 1 dropped", s)
	}
}

// For describes a request with the manifest it is given (a reloaded one),
// through the same queue; it refuses a manifest that lacks a route's
// intent, and Close of the notifier closes it too.
func TestForAnotherManifest(t *testing.T) {
	rcv := newReceiver(t)
	n := newNotifier(t, notify.Options{Routes: []notify.Route{{Intent: "payout.send", Endpoints: []notify.Endpoint{{URL: rcv.URL, Secret: secret}}}}})
	v2, err := manifest.Parse([]byte(strings.Replace(testManifest, `"risk_level": "low"`, `"risk_level": "high"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	view, err := n.For(v2)
	if err != nil {
		t.Fatal(err)
	}
	if err := view.ApprovalRequested(context.Background(), request("r-1", "", "payout.send", `{"amount":5,"to":"bob"}`)); err != nil {
		t.Fatal(err)
	}
	var p notify.Payload
	if err := json.Unmarshal(rcv.next(t).body, &p); err != nil {
		t.Fatal(err)
	}
	if p.RiskLevel != "high" || p.Message != "Send 5 to bob?" {
		t.Errorf("payload described with the first manifest, not For's: %+v", p)
	}

	without, err := manifest.Parse([]byte(`{"version": "1.0.0", "actions": [
    {"intent": "user.delete", "entity": "user", "action_type": "delete", "description": "Delete a user",
     "required_parameters": [{"name": "id", "type": "string"}], "risk_level": "medium"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.For(without); err == nil || !strings.Contains(err.Error(), `"payout.send"`) {
		t.Errorf("For(a manifest without payout.send) = %v, want an error naming it", err)
	}
	if _, err := n.For(nil); err == nil {
		t.Error("For(nil) succeeded")
	}

	n.Close()
	if err := view.ApprovalRequested(context.Background(), request("r-2", "", "payout.send", `{"amount":5,"to":"bob"}`)); !errors.Is(err, notify.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

// One tenant's flood of approval requests fills only its own share: another
// tenant's notification on the same endpoint is still queued and sent.
func TestTenantFloodDropsOnlyItsOwn(t *testing.T) {
	rcv := newReceiver(t)
	rcv.hold = make(chan struct{})
	n := newNotifier(t, notify.Options{Queue: 64, PerTenant: 4, Workers: 1,
		Routes: []notify.Route{{Endpoints: []notify.Endpoint{{URL: rcv.URL, Secret: secret}}}}})
	var dropped int
	for i := range 50 {
		err := n.ApprovalRequested(t.Context(), request("flood"+string(rune('a'+i)), "mallory", "payout.send", `{}`))
		if errors.Is(err, notify.ErrDropped) {
			dropped++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if dropped != 46 {
		t.Errorf("mallory: %d of 50 dropped; want 46 past a share of 4", dropped)
	}
	if err := n.ApprovalRequested(t.Context(), request("honest", "acme", "payout.send", `{}`)); err != nil {
		t.Fatalf("acme's notification behind mallory's flood: %v", err)
	}
	close(rcv.hold)
	eventually(t, "mallory's 4 and acme's one sent", func() bool { return n.Stats().Sent == 5 })
	// The share frees as deliveries end.
	if err := n.ApprovalRequested(t.Context(), request("later", "mallory", "payout.send", `{}`)); err != nil {
		t.Fatalf("mallory after its deliveries ended: %v", err)
	}
}

// A receiver that does not answer holds back only its own endpoint's
// notifications: another endpoint's are sent at once.
func TestDeadReceiverDelaysOnlyItsOwn(t *testing.T) {
	dead, alive := newReceiver(t), newReceiver(t)
	dead.hold = make(chan struct{})
	t.Cleanup(func() { close(dead.hold) })
	n := newNotifier(t, notify.Options{Workers: 1, Timeout: time.Minute,
		Routes: []notify.Route{
			{Tenant: "globex", Endpoints: []notify.Endpoint{{URL: dead.URL, Secret: secret}}},
			{Tenant: "acme", Endpoints: []notify.Endpoint{{URL: alive.URL, Secret: secret}}},
		}})
	for _, id := range []string{"g1", "g2", "g3"} {
		if err := n.ApprovalRequested(t.Context(), request(id, "globex", "payout.send", `{}`)); err != nil {
			t.Fatal(err)
		}
	}
	dead.next(t) // globex's receiver now holds a worker for up to a minute
	if err := n.ApprovalRequested(t.Context(), request("a1", "acme", "payout.send", `{}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-alive.got:
		if !bytes.Contains(d.body, []byte(`"a1"`)) {
			t.Errorf("acme's receiver got %s", d.body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("acme's notification waited behind globex's dead receiver")
	}
}
