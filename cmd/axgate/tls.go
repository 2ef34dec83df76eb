package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"
)

// tlsReloader holds the TLS configuration read from the certificate, key
// and client CA files, and reads them again on reload: a renewed
// certificate is served from the next handshake on, without a restart.
type tlsReloader struct {
	certFile, keyFile, clientCAFile string
	current                         atomic.Pointer[tls.Config]
}

// newTLSReloader reads the files once; an error means no TLS configuration
// could be made from them.
func newTLSReloader(certFile, keyFile, clientCAFile string) (*tlsReloader, error) {
	r := &tlsReloader{certFile: certFile, keyFile: keyFile, clientCAFile: clientCAFile}
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// reload reads the files again. On failure the configuration in use stays.
func (r *tlsReloader) reload() error {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	cfg := baseTLSConfig()
	cfg.Certificates = []tls.Certificate{cert}
	if r.clientCAFile != "" {
		pem, err := os.ReadFile(r.clientCAFile)
		if err != nil {
			return fmt.Errorf("TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("TLS client CA %s: no PEM certificate in it", r.clientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	r.current.Store(cfg)
	return nil
}

// baseTLSConfig is what every configuration of the gateway has: TLS 1.2 at
// least, and HTTP/2 offered before HTTP/1.1 (as net/http offers it).
func baseTLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
}

// serverConfig returns the configuration to give the server: each
// handshake takes the files' configuration as last read.
func (r *tlsReloader) serverConfig() *tls.Config {
	cfg := baseTLSConfig()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return r.current.Load(), nil }
	// Never used (GetConfigForClient answers first), but it tells net/http
	// that the configuration has a certificate.
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return &r.current.Load().Certificates[0], nil
	}
	return cfg
}
