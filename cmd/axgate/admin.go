package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readinessTimeout bounds each dependency check of /readyz.
const readinessTimeout = 2 * time.Second

// serveAdmin starts the admin server when --admin is given: /metrics,
// /healthz, /readyz (ready reports what is unreachable) and, with --pprof,
// /debug/pprof/. The log says its address.
func (rt *opsRuntime) serveAdmin(ready func(context.Context) []error) error {
	if rt.flags.admin == "" {
		return nil
	}
	ln, err := net.Listen("tcp", rt.flags.admin)
	if err != nil {
		return fmt.Errorf("admin server: %w", err)
	}
	rt.adminLn = ln
	rt.admin = &http.Server{
		Handler:           adminHandler(rt, ready),
		ReadHeaderTimeout: serverReadHeaderTimeout,
		ReadTimeout:       serverReadTimeout,
		// pprof's profile and trace run as long as ?seconds= says (30 s by
		// default); they write after that.
		WriteTimeout:   2 * time.Minute,
		IdleTimeout:    serverIdleTimeout,
		MaxHeaderBytes: serverMaxHeaderBytes,
	}
	go func() {
		if err := rt.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			rt.log.Error("axgate: admin server stopped", "err", err)
		}
	}()
	rt.log.Info("axgate: admin server listening", "addr", "http://"+ln.Addr().String(), "pprof", rt.flags.pprof)
	return nil
}

// adminHandler routes the admin server's requests.
func adminHandler(rt *opsRuntime, ready func(context.Context) []error) http.Handler {
	mux := http.NewServeMux()
	if rt.telemetry != nil && rt.telemetry.registry != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(rt.telemetry.registry, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		var problems []string
		for _, err := range ready(r.Context()) {
			problems = append(problems, err.Error())
		}
		body := map[string]any{"status": "ready"}
		if rt.upstreams != nil {
			// A gateway with several upstreams: each one's state by name.
			body["upstreams"], _ = upstreamsReport(rt.upstreams(r.Context()))
		}
		if len(problems) > 0 {
			body["status"], body["problems"] = "not ready", problems
			writeStatus(w, http.StatusServiceUnavailable, body)
			return
		}
		writeStatus(w, http.StatusOK, body)
	})
	if rt.flags.pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func writeStatus(w http.ResponseWriter, status int, body map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// ready checks, at once, that the gateway can reach what it needs: the
// upstream (a TCP connection to its host) and Redis (a PING) with --redis.
// It returns what is unreachable.
func (g *gateway) ready(ctx context.Context) []error {
	return checkReady(ctx, g.upstream.base, g.shared)
}

// checkReady checks, at once, that the upstream at up takes a TCP
// connection (when up is not nil) and that Redis answers a PING (when the
// shared state is in Redis). It returns what is unreachable.
func checkReady(ctx context.Context, up *url.URL, shared *enforcerState) []error {
	ctx, cancel := context.WithTimeout(ctx, readinessTimeout)
	defer cancel()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	report := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	if up != nil {
		wg.Go(func() {
			host := up.Host
			if up.Port() == "" {
				port := "80"
				if up.Scheme == "https" {
					port = "443"
				}
				host = net.JoinHostPort(up.Hostname(), port)
			}
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", host)
			if err != nil {
				report(fmt.Errorf("upstream %s unreachable: %w", host, err))
				return
			}
			conn.Close()
		})
	}
	if shared != nil && shared.redis != nil {
		r := shared.redis
		wg.Go(func() {
			if err := r.Client().Ping(ctx).Err(); err != nil {
				report(fmt.Errorf("redis unreachable: %w", err))
			}
		})
	}
	wg.Wait()
	return errs
}
