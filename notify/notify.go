package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
)

// SignatureHeader is the header that carries a delivery's signature.
const SignatureHeader = "X-Axgate-Signature"

// EventApprovalRequested is the Type of the payload of a new approval request.
const EventApprovalRequested = "approval.requested"

// errDropped is what ApprovalRequested returns when the queue is full and
// the notification was dropped.
var errDropped = errors.New("notify: the delivery queue is full; the notification was dropped")

// errClosed is what ApprovalRequested returns after Close.
var errClosed = errors.New("notify: the notifier is closed")

// Payload is the JSON body of a FormatJSON delivery.
type Payload struct {
	// Type is EventApprovalRequested.
	Type string `json:"type"`
	// Kind is "confirmation" for a confirmation request
	// (axgate.WithDecisionPages), which only its requester decides, with
	// no roles; absent for an approval request.
	Kind string `json:"kind,omitempty"`
	// RequestID identifies the approval request; receivers should treat it
	// as the delivery's idempotency key.
	RequestID string `json:"request_id"`
	Tenant    string `json:"tenant,omitempty"`
	Intent    string `json:"intent"`
	Tool      string `json:"tool"`
	RiskLevel string `json:"risk_level"`
	// Requester is the principal whose call waits for approval.
	Requester string `json:"requester"`
	// SideEffects are the action's declared side effects.
	SideEffects []string `json:"side_effects"`
	// Message is the action's confirmation message with the call's
	// arguments filled in (as the confirmation message is: values escaped
	// and cut, never parsed again). It is plain text: escape it for HTML.
	Message string `json:"message"`
	// ApprovalsNeeded and ApprovalRoles say who may approve, and how many.
	ApprovalsNeeded int      `json:"approvals_needed"`
	ApprovalRoles   []string `json:"approval_roles"`
	// ArgsSHA256 is the digest the approval tokens must be bound to.
	ArgsSHA256 string    `json:"args_sha256"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	// ApproveURL and DenyURL are Options.Links's, when set.
	ApproveURL string `json:"approve_url,omitempty"`
	DenyURL    string `json:"deny_url,omitempty"`
	// Coalesced counts the notifications of the tenant held back by the
	// gate's per-tenant cap since the last one sent.
	Coalesced int `json:"coalesced_notifications,omitempty"`
}

// Stats count the deliveries of a Notifier since New.
type Stats struct {
	// Sent were answered with a 2xx status.
	Sent uint64
	// Failed ran out of attempts or got a status that is not retried.
	Failed uint64
	// Dropped found the queue full (or the notifier closed).
	Dropped uint64
	// Retried counts the tries after a first failed one.
	Retried uint64
}

// Notifier sends approval notifications to webhooks. It implements gates.Notifier.
//
// Create it with New, hand it to axgate.ApprovalOptions.Notifier, and Close
// it when the enforcer is done.
type Notifier struct {
	o      Options
	routes []Route
	// lanes holds a queue and its workers for each endpoint, so that a
	// receiver that is down (each try waiting out Timeout, then the
	// back-off) holds back only its own notifications, never another
	// endpoint's.
	lanes map[endpointKey]*lane
	done  chan struct{}
	wg    sync.WaitGroup

	// pending counts each tenant's deliveries queued or being sent, so that
	// one tenant's flood of approval requests fills only its share
	// (Options.PerTenant) and never drops another tenant's notifications.
	pmu     sync.Mutex
	pending map[string]int

	closeOnce sync.Once
	mu        sync.RWMutex // guards closed against sends on queue
	closed    bool

	sent, failed, dropped, retried atomic.Uint64
	counter                        metric.Int64Counter
	outcomes                       map[string]metric.AddOption
}

// delivery is one notification to one endpoint.
type delivery struct {
	ep        Endpoint
	body      []byte
	requestID string
	tenant    string
}

// lane is the queue of one endpoint.
type lane struct {
	queue chan delivery
}

// endpointKey identifies an endpoint: two routes naming the same receiver
// share its lane.
type endpointKey struct {
	url, secret string
	format      Format
}

func keyOf(ep Endpoint) endpointKey {
	return endpointKey{url: ep.URL, secret: string(ep.Secret), format: ep.Format}
}

// New returns a Notifier and starts its workers.
func New(o Options) (*Notifier, error) {
	if o.Manifest == nil {
		return nil, errors.New("notify: no manifest")
	}
	if len(o.Routes) == 0 {
		return nil, errors.New("notify: no routes")
	}
	var errs []error
	for i, r := range o.Routes {
		if len(r.Endpoints) == 0 {
			errs = append(errs, fmt.Errorf("route %d has no endpoints", i))
		}
		if r.Intent != "" && o.Manifest.Action(r.Intent) == nil {
			errs = append(errs, fmt.Errorf("route %d: the manifest declares no action %q", i, r.Intent))
		}
		for j, ep := range r.Endpoints {
			u, err := url.Parse(ep.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("route %d endpoint %d: URL %q is not an http(s) URL", i, j, ep.URL))
			}
			if ep.Format == FormatJSON && len(ep.Secret) == 0 {
				errs = append(errs, fmt.Errorf("route %d endpoint %d: a JSON endpoint needs a Secret to sign with", i, j))
			}
			if ep.Format != FormatJSON && ep.Format != FormatSlack {
				errs = append(errs, fmt.Errorf("route %d endpoint %d: unknown format %d", i, j, ep.Format))
			}
		}
	}
	for _, d := range []struct {
		name string
		v    int64
	}{{"Queue", int64(o.Queue)}, {"PerTenant", int64(o.PerTenant)}, {"Workers", int64(o.Workers)}, {"Attempts", int64(o.Attempts)},
		{"Backoff", int64(o.Backoff)}, {"MaxBackoff", int64(o.MaxBackoff)}, {"Timeout", int64(o.Timeout)}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("Options.%s is negative", d.name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("notify: %w", err)
	}
	o.Queue = orDefault(o.Queue, defaultQueue)
	o.PerTenant = orDefault(o.PerTenant, defaultPerTenant)
	o.Workers = orDefault(o.Workers, defaultWorkers)
	o.Attempts = orDefault(o.Attempts, defaultAttempts)
	o.Backoff = orDefault(o.Backoff, defaultBackoff)
	o.MaxBackoff = orDefault(o.MaxBackoff, defaultMaxBackoff)
	o.Timeout = orDefault(o.Timeout, defaultTimeout)
	if o.Client == nil {
		o.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	mp := o.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	n := &Notifier{o: o, routes: o.Routes, lanes: map[endpointKey]*lane{}, pending: map[string]int{}, done: make(chan struct{})}
	for _, r := range o.Routes {
		for _, ep := range r.Endpoints {
			if _, ok := n.lanes[keyOf(ep)]; !ok {
				n.lanes[keyOf(ep)] = &lane{queue: make(chan delivery, o.Queue)}
			}
		}
	}
	var err error
	n.counter, err = mp.Meter("github.com/axgate/axgate/notify").Int64Counter("axag.notifications",
		metric.WithDescription("Approval notifications, by outcome: sent, failed, dropped, retried."), metric.WithUnit("{notification}"))
	if err != nil {
		return nil, fmt.Errorf("notify: axag.notifications: %w", err)
	}
	n.outcomes = make(map[string]metric.AddOption, 4)
	for _, k := range []string{"sent", "failed", "dropped", "retried"} {
		n.outcomes[k] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", k)))
	}
	for _, l := range n.lanes {
		for range o.Workers {
			n.wg.Add(1)
			go n.work(l)
		}
	}
	return n, nil
}

func orDefault[T int | time.Duration](v, d T) T {
	if v == 0 {
		return d
	}
	return v
}

// ApprovalRequested queues the notification of req to every endpoint of its
// routes and returns at once. It implements gates.Notifier: it returns
// an error when the queue was full for some endpoint (the others are
// still sent), nil when every delivery was queued or no route matches.
func (n *Notifier) ApprovalRequested(_ context.Context, req gates.ApprovalRequest) error {
	return n.notify(n.o.Manifest, req)
}

// For returns a gates.Notifier that describes requests with m, for the
// enforcer of another manifest (a reloaded one). It shares n's routes,
// queue and workers: a reload loses no delivery. Closing n closes it too.
// For fails when a route names an intent m does not declare.
func (n *Notifier) For(m *manifest.Manifest) (gates.Notifier, error) {
	if m == nil {
		return nil, errors.New("notify: no manifest")
	}
	var errs []error
	for i, r := range n.routes {
		if r.Intent != "" && m.Action(r.Intent) == nil {
			errs = append(errs, fmt.Errorf("route %d: the manifest declares no action %q", i, r.Intent))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("notify: %w", err)
	}
	return gate.NotifierFunc(func(_ context.Context, req gates.ApprovalRequest) error {
		return n.notify(m, req)
	}), nil
}

// notify queues the notification of req, described with m.
func (n *Notifier) notify(m *manifest.Manifest, req gates.ApprovalRequest) error {
	eps := n.match(req.Tenant, req.Intent)
	if len(eps) == 0 {
		return nil
	}
	p := n.payload(m, req)
	var dropped error
	for _, ep := range eps {
		body, err := encode(p, ep.Format)
		if err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		if err := n.enqueue(delivery{ep: ep, body: body, requestID: req.ID, tenant: req.Tenant}); err != nil {
			dropped = err
		}
	}
	return dropped
}

func (n *Notifier) enqueue(d delivery) error {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		n.count(&n.dropped, "dropped")
		return errClosed
	}
	if !n.take(d.tenant) {
		n.count(&n.dropped, "dropped")
		n.o.Logger.Warn("axgate notification dropped: the tenant's share of the queue is full",
			slog.String("request_id", d.requestID), slog.String("tenant", d.tenant),
			slog.String("endpoint", redactURL(d.ep.URL)), slog.Int("per_tenant", n.o.PerTenant))
		return errDropped
	}
	select {
	case n.lanes[keyOf(d.ep)].queue <- d:
		return nil
	default:
		n.put(d.tenant)
		n.count(&n.dropped, "dropped")
		n.o.Logger.Warn("axgate notification dropped: the endpoint's queue is full",
			slog.String("request_id", d.requestID), slog.String("endpoint", redactURL(d.ep.URL)), slog.Int("queue", n.o.Queue))
		return errDropped
	}
}

// take counts one more delivery of tenant, unless its share is full.
func (n *Notifier) take(tenant string) bool {
	n.pmu.Lock()
	defer n.pmu.Unlock()
	if n.pending[tenant] >= n.o.PerTenant {
		return false
	}
	n.pending[tenant]++
	return true
}

// put ends one delivery of tenant (sent, failed or dropped).
func (n *Notifier) put(tenant string) {
	n.pmu.Lock()
	defer n.pmu.Unlock()
	if n.pending[tenant]--; n.pending[tenant] <= 0 {
		delete(n.pending, tenant)
	}
}

func (n *Notifier) count(c *atomic.Uint64, outcome string) {
	c.Add(1)
	n.counter.Add(context.Background(), 1, n.outcomes[outcome])
}

// match returns the endpoints of the most specific routes that match.
func (n *Notifier) match(tenant, intent string) []Endpoint {
	best := -1
	var out []Endpoint
	for _, r := range n.routes {
		if (r.Tenant != "" && r.Tenant != tenant) || (r.Intent != "" && r.Intent != intent) {
			continue
		}
		score := 0
		if r.Intent != "" {
			score += 2
		}
		if r.Tenant != "" {
			score++
		}
		switch {
		case score > best:
			best, out = score, append([]Endpoint(nil), r.Endpoints...)
		case score == best:
			out = append(out, r.Endpoints...)
		}
	}
	return out
}

// payload describes req with what the manifest says of its action.
func (n *Notifier) payload(m *manifest.Manifest, req gates.ApprovalRequest) Payload {
	p := Payload{
		Type: EventApprovalRequested, Kind: req.Kind, RequestID: req.ID, Tenant: req.Tenant, Intent: req.Intent,
		Tool: req.Tool, Requester: req.Requester, ApprovalsNeeded: req.Count,
		ApprovalRoles: nonNil(req.Roles), ArgsSHA256: req.ArgsSHA256,
		CreatedAt: req.CreatedAt, ExpiresAt: req.ExpiresAt, Coalesced: req.Coalesced,
		SideEffects: []string{}, RiskLevel: string(manifest.RiskNone),
	}
	if a := m.Action(req.Intent); a != nil {
		if a.RiskLevel != "" {
			p.RiskLevel = string(a.RiskLevel)
		}
		p.SideEffects = nonNil(a.SideEffects)
		var args map[string]any
		_ = json.Unmarshal(req.Arguments, &args)
		p.Message = gate.RenderConfirmationMessage(a, args)
	}
	if n.o.Links != nil {
		p.ApproveURL, p.DenyURL = n.o.Links(req)
	}
	return p
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return append([]string(nil), s...)
}

// HumanHandlerLinks returns links to the decision endpoint of the human handler mounted at base.
//
// That is httpgate.NewHumanHandler's POST {base}/approvals/{id}, which
// takes {"approve": true} or {"approve": false} from an authenticated
// approver: both links are that URL, for a UI or a chat integration that
// posts the decision on the person's behalf.
func HumanHandlerLinks(base string) LinksFunc {
	base = strings.TrimRight(base, "/")
	return func(req gates.ApprovalRequest) (string, string) {
		u := base + "/approvals/" + url.PathEscape(req.ID)
		return u, u
	}
}

// encode writes p in format f.
func encode(p Payload, f Format) ([]byte, error) {
	if f == FormatSlack {
		return json.Marshal(map[string]string{"text": slackText(p)})
	}
	return json.Marshal(p)
}

// slackText is the Slack message of p. Slack's mrkdwn needs &, < and >
// escaped in text that is not markup, so that a value in the message
// cannot forge a link or a mention.
func slackText(p Payload) string {
	var b strings.Builder
	what := "Approval"
	if p.Kind == "confirmation" {
		what = "Confirmation"
	}
	fmt.Fprintf(&b, "*%s requested* for `%s` (risk %s) by %s", what, slackEscape(p.Intent), slackEscape(p.RiskLevel), slackEscape(p.Requester))
	if p.Tenant != "" {
		fmt.Fprintf(&b, " in tenant %s", slackEscape(p.Tenant))
	}
	fmt.Fprintf(&b, "\n>%s", slackEscape(p.Message))
	if len(p.SideEffects) > 0 {
		fmt.Fprintf(&b, "\nSide effects: %s", slackEscape(strings.Join(p.SideEffects, ", ")))
	}
	if p.Kind == "confirmation" {
		fmt.Fprintf(&b, "\nNeeds the confirmation of %s. Request %s, expires %s.", slackEscape(p.Requester),
			slackEscape(p.RequestID), p.ExpiresAt.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintf(&b, "\nNeeds %d approval(s) from: %s. Request %s, expires %s.", p.ApprovalsNeeded,
			slackEscape(strings.Join(p.ApprovalRoles, ", ")), slackEscape(p.RequestID), p.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if p.ApproveURL != "" {
		fmt.Fprintf(&b, "\n<%s|Approve>", slackEscape(p.ApproveURL))
	}
	if p.DenyURL != "" {
		fmt.Fprintf(&b, " · <%s|Deny>", slackEscape(p.DenyURL))
	}
	return b.String()
}

var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func slackEscape(s string) string { return slackEscaper.Replace(s) }

// work sends the deliveries of one lane until Close.
func (n *Notifier) work(l *lane) {
	defer n.wg.Done()
	for {
		select {
		case <-n.done:
			return
		case d := <-l.queue:
			n.deliver(d)
			n.put(d.tenant)
		}
	}
}

// deliver tries d until it is answered with a 2xx, gets a status that is not
// retried, or runs out of attempts, waiting Backoff, doubled each time, in
// between. Close cuts the waits short.
func (n *Notifier) deliver(d delivery) {
	wait := n.o.Backoff
	var last string
	for attempt := 1; attempt <= n.o.Attempts; attempt++ {
		if attempt > 1 {
			n.count(&n.retried, "retried")
			t := time.NewTimer(wait)
			select {
			case <-n.done:
				t.Stop()
				n.fail(d, "the notifier was closed while retrying; last: "+last)
				return
			case <-t.C:
			}
			wait = min(2*wait, n.o.MaxBackoff)
		}
		status, err := n.try(d)
		switch {
		case err == nil && status/100 == 2:
			n.count(&n.sent, "sent")
			return
		case err != nil:
			last = err.Error()
		default:
			last = "status " + strconv.Itoa(status)
			if status != http.StatusTooManyRequests && status < 500 {
				n.fail(d, last+" (not retried)")
				return
			}
		}
	}
	n.fail(d, fmt.Sprintf("%d attempts; last: %s", n.o.Attempts, last))
}

func (n *Notifier) fail(d delivery, why string) {
	n.count(&n.failed, "failed")
	n.o.Logger.Warn("axgate notification failed", slog.String("request_id", d.requestID),
		slog.String("endpoint", redactURL(d.ep.URL)), slog.String("error", why))
}

// try POSTs d once, signed with the current time.
func (n *Notifier) try(d delivery) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), n.o.Timeout)
	defer cancel()
	go func() {
		select {
		case <-n.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.ep.URL, bytes.NewReader(d.body))
	if err != nil {
		return 0, withoutURL(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "axgate-notify")
	if len(d.ep.Secret) > 0 {
		req.Header.Set(SignatureHeader, Sign(d.ep.Secret, d.body, n.o.Now()))
	}
	resp, err := n.o.Client.Do(req)
	if err != nil {
		return 0, withoutURL(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// withoutURL is err without the URL the HTTP client quotes in it (a
// *url.Error's "Post \"URL\": …"): the failure is logged, and the path or
// query of an incoming webhook is its secret.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s %s: %w", ue.Op, redactURL(ue.URL), ue.Err)
	}
	return err
}

// redactURL keeps a URL's scheme and host for a log: the path of an
// incoming webhook is its secret.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(invalid URL)"
	}
	return u.Scheme + "://" + u.Host
}

// Stats returns the counts of deliveries since New.
func (n *Notifier) Stats() Stats {
	return Stats{Sent: n.sent.Load(), Failed: n.failed.Load(), Dropped: n.dropped.Load(), Retried: n.retried.Load()}
}

// Close stops the workers: deliveries still queued are dropped (and
// counted), one being sent is cut short. Later notifications are refused
// with an error.
func (n *Notifier) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.closed = true
		n.mu.Unlock()
		close(n.done)
		n.wg.Wait()
		for _, l := range n.lanes {
			for drained := false; !drained; {
				select {
				case d := <-l.queue:
					n.put(d.tenant)
					n.count(&n.dropped, "dropped")
				default:
					drained = true
				}
			}
		}
	})
	return nil
}

// Sign returns the X-Axgate-Signature header value of body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>".
func Sign(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Errors of Verify.
var (
	ErrNoSignature  = errors.New("notify: no valid signature header")
	ErrBadSignature = errors.New("notify: the signature does not match the body")
	ErrStale        = errors.New("notify: the signature's timestamp is outside the tolerance")
	// ErrNoSecret is Verify's answer to an empty secret (a key read from
	// a variable that is not set): anyone can sign with the empty key.
	ErrNoSecret = errors.New("notify: no secret to verify with (the key is empty)")
)

// Verify checks the X-Axgate-Signature header value of a delivery against its raw body.
//
// It succeeds when one v1 of the header is the HMAC-SHA256 of "<t>.<body>"
// with secret (compared in constant time) and t is within tolerance of now
// (either way, so that clocks may differ a little). Pass the body exactly
// as received, before any JSON decoding. A tolerance of zero or less is
// taken as five minutes. An empty secret verifies nothing (ErrNoSecret).
func Verify(secret []byte, header string, body []byte, tolerance time.Duration, now time.Time) error {
	if len(secret) == 0 {
		return ErrNoSecret
	}
	if tolerance <= 0 {
		tolerance = 5 * time.Minute
	}
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrNoSignature
	}
	want := mac(secret, ts, body)
	matched := false
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			matched = true
		}
	}
	if !matched {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	return nil
}
