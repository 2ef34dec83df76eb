package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/manifest"
	axnotify "github.com/axgate/axgate/notify"
)

// opsFlags are the flags of running a gateway in production, shared by the
// commands that serve (serve, and mcp when the lead wires it): the
// configuration file, TLS, the admin server and the audit sink.
type opsFlags struct {
	config          string
	tlsCert, tlsKey string
	tlsClientCA     string
	admin           string
	pprof           bool
	audit           string
	auditMaxSize    int
	auditMaxBackups int
	// flushTimeout bounds the admin server's shutdown and the last export
	// of telemetry and audit records.
	flushTimeout time.Duration
}

// addOpsFlags declares the operations flags on fs.
func addOpsFlags(fs *flag.FlagSet) *opsFlags {
	o := &opsFlags{flushTimeout: 5 * time.Second}
	fs.StringVar(&o.config, configFlag, "", "YAML configuration file whose keys are these flags' names (flags given here win; AXGATE_* variables fill in the rest)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "serve HTTPS with this certificate chain (PEM; re-read on SIGHUP)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM; re-read on SIGHUP)")
	fs.StringVar(&o.tlsClientCA, "tls-client-ca", "", "require client certificates signed by these CAs (PEM; re-read on SIGHUP)")
	fs.StringVar(&o.admin, "admin", "", "address of the admin server: /metrics (Prometheus), /healthz, /readyz; off when empty")
	fs.BoolVar(&o.pprof, "pprof", false, "serve /debug/pprof/ on the admin server")
	fs.StringVar(&o.audit, "audit", "stderr", "where the audit log goes, one JSON line per decision: stdout, stderr, file:PATH, otlp or off")
	fs.IntVar(&o.auditMaxSize, "audit-max-size", 100, "with --audit file:PATH, rotate the file when it reaches this many megabytes")
	fs.IntVar(&o.auditMaxBackups, "audit-max-backups", 10, "with --audit file:PATH, keep this many rotated files (0: all)")
	return o
}

// opsRuntime is what the operations flags set up around a gateway: the
// OpenTelemetry SDK, the audit sink, TLS and the admin server.
type opsRuntime struct {
	flags     *opsFlags
	log       *slog.Logger
	telemetry *telemetry
	audit     *auditSink
	tls       *tlsReloader // nil without --tls-cert
	admin     *http.Server // nil without --admin
	adminLn   net.Listener
	// enforce is the configuration's enforce: section (shadow mode).
	enforce enforceSection
	// notify is the configuration's notify: section; routes are its
	// webhooks with their keys read (nil without webhooks).
	notify notifySection
	routes []axnotify.Route
	// notifierMu guards notifier, made by the first enforcerOptions (it
	// needs a manifest) and shared by every later one.
	notifierMu sync.Mutex
	notifier   *axnotify.Notifier
	// humanBase is the public URL of the pages for people (--human with a
	// sign-in): the notifications link to each request's page there.
	humanBase string
	// upstreams reports each upstream of a gateway with several, by name
	// (nil otherwise): /readyz shows them.
	upstreams func(context.Context) map[string]error
}

// startOps checks the operations flags and the configuration's enforce:
// and notify: sections, and sets up what they ask for. The caller closes it.
func startOps(ctx context.Context, e *env, o *opsFlags, conf configured, log *slog.Logger) (*opsRuntime, error) {
	rt := &opsRuntime{flags: o, log: log}
	rt.enforce, rt.notify = conf.sections()
	routes, err := notifyRoutes(e, rt.notify)
	if err != nil {
		return nil, err
	}
	rt.routes = routes
	switch {
	case (o.tlsCert == "") != (o.tlsKey == ""):
		return nil, errors.New("give --tls-cert and --tls-key together")
	case o.tlsClientCA != "" && o.tlsCert == "":
		return nil, errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	case o.pprof && o.admin == "":
		return nil, errors.New("--pprof is served on the admin server: give --admin too")
	}
	if o.tlsCert != "" {
		r, err := newTLSReloader(o.tlsCert, o.tlsKey, o.tlsClientCA)
		if err != nil {
			return nil, err
		}
		rt.tls = r
	}
	t, err := newTelemetry(ctx, o.admin != "")
	if err != nil {
		return nil, err
	}
	rt.telemetry = t
	a, err := openAudit(ctx, e, o, log)
	if err != nil {
		rt.close()
		return nil, err
	}
	rt.audit = a
	return rt, nil
}

// enforcerOptions are the options every enforcer of the process gets, for
// the manifest m it enforces: its telemetry providers (when the SDK is
// installed), its audit log, the shadow mode of the enforce: section and
// the webhooks of the notify: section. It fails when the configuration does
// not fit m (an intent m does not declare, shadow mode for a critical
// action): a reload then keeps the enforcer in use.
func (rt *opsRuntime) enforcerOptions(m *manifest.Manifest) ([]axgate.Option, error) {
	return rt.enforcerOptionsIn(m, m)
}

// enforcerOptionsIn is enforcerOptions for m, the manifest of one upstream
// of a gateway with several whose manifests together are union: the
// enforce: and notify: intents are checked against union, each upstream's
// enforcer is in shadow mode for its own intents, and the notifications
// describe a request with union.
func (rt *opsRuntime) enforcerOptionsIn(m, union *manifest.Manifest) ([]axgate.Option, error) {
	var opts []axgate.Option
	if tc, ok := rt.telemetry.config(); ok {
		opts = append(opts, axgate.WithTelemetry(tc))
	}
	if _, err := shadowOptions(rt.enforce, union); err != nil {
		return nil, err
	}
	own := enforceSection{}
	for intent, mode := range rt.enforce.Intents {
		if intent == "*" || m.Action(intent) != nil {
			if own.Intents == nil {
				own.Intents = map[string]string{}
			}
			own.Intents[intent] = mode
		}
	}
	shadow, err := shadowOptions(own, m)
	if err != nil {
		return nil, err
	}
	if shadow != nil {
		shadow.Logger = rt.log
		opts = append(opts, axgate.WithShadow(*shadow))
	}
	if err := checkNotifyIntents(rt.notify, union); err != nil {
		return nil, err
	}
	n, err := rt.notifierFor(union)
	if err != nil {
		return nil, err
	}
	if n != nil {
		// The approval workflow's other settings keep their defaults.
		opts = append(opts, axgate.WithApprovals(axgate.ApprovalOptions{Notifier: n}))
	}
	// After serve's own WithLogger: the audit goes where --audit says, and
	// nowhere with off.
	return append(opts, axgate.WithLogger(rt.audit.logger)), nil
}

// notifierFor returns the notifier of the enforcer of m (nil without
// webhooks). Every manifest shares one queue, closed by close: a reload
// drops no delivery in flight.
func (rt *opsRuntime) notifierFor(m *manifest.Manifest) (gates.Notifier, error) {
	if len(rt.routes) == 0 {
		return nil, nil
	}
	rt.notifierMu.Lock()
	defer rt.notifierMu.Unlock()
	if rt.notifier != nil {
		return rt.notifier.For(m)
	}
	o := axnotify.Options{Routes: rt.routes, Manifest: m, Logger: rt.log}
	if rt.humanBase != "" {
		o.Links = axnotify.HumanHandlerLinks(rt.humanBase)
	}
	if rt.telemetry != nil && rt.telemetry.mp != nil {
		o.MeterProvider = rt.telemetry.mp
	}
	n, err := axnotify.New(o)
	if err != nil {
		return nil, err
	}
	rt.notifier = n
	return n, nil
}

// scheme is the URL scheme of the gateway's listener.
func (rt *opsRuntime) scheme() string {
	if rt.tls != nil {
		return "https"
	}
	return "http"
}

// serve serves srv on ln, over TLS when it is configured (HTTP/2 then
// negotiated as net/http does).
func (rt *opsRuntime) serve(srv *http.Server, ln net.Listener) error {
	if rt.tls == nil {
		return srv.Serve(ln)
	}
	srv.TLSConfig = rt.tls.serverConfig()
	return srv.ServeTLS(ln, "", "")
}

// reload re-reads what SIGHUP re-reads: the TLS files. A failed reload keeps
// what was loaded before, and the log says why.
func (rt *opsRuntime) reload() {
	if rt.tls == nil {
		return
	}
	if err := rt.tls.reload(); err != nil {
		rt.log.Error("axgate: TLS reload failed; keeping the certificate in use", "cert", rt.flags.tlsCert, "err", err)
		return
	}
	rt.log.Info("axgate: TLS certificate reloaded", "cert", rt.flags.tlsCert)
}

// close stops the admin server and flushes the telemetry and the audit.
func (rt *opsRuntime) close() {
	ctx, cancel := context.WithTimeout(context.Background(), rt.flags.flushTimeout)
	defer cancel()
	if rt.admin != nil {
		if err := rt.admin.Shutdown(ctx); err != nil {
			rt.log.Warn("axgate: admin server shutdown", "err", err)
		}
	}
	if rt.telemetry != nil {
		if err := rt.telemetry.shutdown(ctx); err != nil {
			rt.log.Warn("axgate: telemetry flush", "err", err)
		}
	}
	rt.notifierMu.Lock()
	if rt.notifier != nil {
		// Deliveries still queued are dropped, and counted.
		_ = rt.notifier.Close()
		rt.notifier = nil
	}
	rt.notifierMu.Unlock()
	if rt.audit != nil {
		if err := rt.audit.close(ctx); err != nil {
			rt.log.Warn("axgate: audit close", "err", err)
		}
	}
}
