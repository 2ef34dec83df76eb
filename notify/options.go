package notify

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/manifest"
)

// Format is how a delivery's body is written.
type Format int

const (
	// FormatJSON is the Payload as JSON. It is the default.
	FormatJSON Format = iota
	// FormatSlack is a Slack-compatible incoming-webhook message:
	// {"text": …} with the request's summary and its links, escaped as
	// Slack's mrkdwn requires.
	FormatSlack
)

// Endpoint is one receiver of notifications.
type Endpoint struct {
	// URL is where the notification is POSTed (http or https).
	URL string
	// Secret signs the body (X-Axgate-Signature). Required for FormatJSON,
	// whose receivers act on what it says; optional for FormatSlack, whose
	// incoming-webhook URL is itself the secret.
	Secret []byte
	// Format is the body's format (FormatJSON when zero).
	Format Format
}

// Route sends the requests of a tenant, an intent or both to its endpoints.
// An empty Tenant or Intent matches any.
type Route struct {
	Tenant    string
	Intent    string
	Endpoints []Endpoint
}

// LinksFunc returns the links a person follows to approve or deny a request.
type LinksFunc func(req gates.ApprovalRequest) (approve, deny string)

// Options configure a Notifier. A zero field keeps its default.
type Options struct {
	// Routes say who is told of which requests. New fails without any.
	Routes []Route
	// Manifest is the enforced manifest: it gives each request's risk
	// level, declared side effects and confirmation message. Required.
	Manifest *manifest.Manifest
	// Links gives the approve and deny URLs of the payload (for example
	// HumanHandlerLinks); nil leaves them out.
	Links LinksFunc
	// Queue bounds the deliveries waiting to be sent to one endpoint
	// (default 256); past it a notification is dropped. Each endpoint has
	// a queue and workers of its own, so a receiver that is down delays
	// only its own notifications.
	Queue int
	// PerTenant bounds one tenant's deliveries queued or being sent, over
	// every endpoint (default 32); past it that tenant's notifications are
	// dropped, and no other tenant's are. A request with no tenant counts
	// as the tenant "".
	PerTenant int
	// Workers is how many deliveries are sent at once to one endpoint
	// (default 2).
	Workers int
	// Attempts bounds the tries of one delivery (default 5).
	Attempts int
	// Backoff is the wait after the first failed try, doubled after each
	// (default 1s), at most MaxBackoff (default 1 minute).
	Backoff, MaxBackoff time.Duration
	// Timeout bounds one try (default 10s).
	Timeout time.Duration
	// Client sends the requests (default: a client with no redirects
	// followed, so that a receiver cannot bounce the signed body
	// elsewhere).
	Client *http.Client
	// Logger receives a record per dropped or failed delivery
	// (slog.Default() when nil).
	Logger *slog.Logger
	// MeterProvider makes the axag.notifications counter (default: the
	// global provider).
	MeterProvider metric.MeterProvider
	// Now is the clock of the signatures (time.Now when nil).
	Now func() time.Time
}

// Defaults of Options.
const (
	defaultQueue      = 256
	defaultPerTenant  = 32
	defaultWorkers    = 2
	defaultAttempts   = 5
	defaultBackoff    = time.Second
	defaultMaxBackoff = time.Minute
	defaultTimeout    = 10 * time.Second
)

// String returns the format's name as a configuration names it: "json" or "slack".
func (f Format) String() string {
	switch f {
	case FormatJSON:
		return "json"
	case FormatSlack:
		return "slack"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// parseFormat reads a format's name from a configuration file: "json" (or
// "", the default) or "slack".
func parseFormat(s string) (Format, error) {
	switch s {
	case "", "json":
		return FormatJSON, nil
	case "slack":
		return FormatSlack, nil
	}
	return 0, fmt.Errorf("notify: unknown format %q (want json or slack)", s)
}
