package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/axgate/axgate/middleware"
)

// auditScope is the instrumentation scope of the audit records sent as
// OTLP logs.
const auditScope = "github.com/axgate/axgate/cmd/axgate/audit"

// auditSink is where --audit sends the audit log. Its logger is nil with
// --audit off. A record holds the parameters' names, never their values:
// serve records no arguments (middleware.SlogAudit's fields).
type auditSink struct {
	logger *slog.Logger
	close  func(context.Context) error
}

// openAudit opens the sink --audit names: stdout, stderr, file:PATH (JSON
// lines, rotated by size), otlp (OTLP logs through the standard OTEL_*
// variables) or off.
func openAudit(ctx context.Context, e *env, o *opsFlags, log *slog.Logger) (*auditSink, error) {
	noClose := func(context.Context) error { return nil }
	switch spec := o.audit; {
	case spec == "off":
		return &auditSink{close: noClose}, nil
	case spec == "stdout":
		return &auditSink{logger: jsonAudit(e.stdout), close: noClose}, nil
	case spec == "stderr":
		return &auditSink{logger: jsonAudit(e.stderr), close: noClose}, nil
	case strings.HasPrefix(spec, "file:"):
		path := strings.TrimPrefix(spec, "file:")
		if path == "" {
			return nil, fmt.Errorf("--audit file:PATH needs a path")
		}
		if o.auditMaxSize < 1 {
			return nil, fmt.Errorf("--audit-max-size must be at least 1 (megabyte), not %d", o.auditMaxSize)
		}
		if o.auditMaxBackups < 0 {
			return nil, fmt.Errorf("--audit-max-backups must not be negative, not %d", o.auditMaxBackups)
		}
		// Opened here, once, so that a path that cannot be written stops
		// the start rather than every audit record.
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("--audit: %w", err)
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("--audit: %w", err)
		}
		f.Close()
		lj := &lumberjack.Logger{Filename: path, MaxSize: o.auditMaxSize, MaxBackups: o.auditMaxBackups}
		w := &reportingWriter{w: lj, log: log, what: path}
		return &auditSink{logger: jsonAudit(w), close: func(context.Context) error { return lj.Close() }}, nil
	case spec == "otlp":
		exp, err := autoexport.NewLogExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("--audit otlp: %w", err)
		}
		res, err := otelResource(ctx)
		if err != nil {
			return nil, fmt.Errorf("--audit otlp: %w", err)
		}
		lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(exp)), sdklog.WithResource(res))
		return &auditSink{logger: slog.New(otelslog.NewHandler(auditScope, otelslog.WithLoggerProvider(lp))), close: lp.Shutdown}, nil
	default:
		return nil, fmt.Errorf("--audit must be stdout, stderr, file:PATH, otlp or off, not %q", spec)
	}
}

// jsonAudit writes audit records to w, one JSON object a line.
func jsonAudit(w io.Writer) *slog.Logger {
	// slog's JSON lines, the audit record's written directly.
	return slog.New(middleware.NewJSONAuditHandler(w))
}

// reportingWriter logs when writing the audit starts failing and when it
// works again — once each, not once a record: the call was decided before
// its record is written, so a full disk must not fail calls, but it must
// not go unnoticed either.
type reportingWriter struct {
	w       io.Writer
	log     *slog.Logger
	what    string
	failing atomic.Bool
}

func (r *reportingWriter) Write(p []byte) (int, error) {
	n, err := r.w.Write(p)
	switch {
	case err != nil && !r.failing.Swap(true):
		r.log.Error("axgate: writing the audit log failed; records are lost until it works again", "audit", r.what, "err", err)
	case err == nil && r.failing.Swap(false):
		r.log.Info("axgate: writing the audit log works again", "audit", r.what)
	}
	return n, err
}
