package main

import (
	"context"
	"path/filepath"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// axgateEngine is Enforcer.Check with the default options (no OpenTelemetry
// SDK installed) and the signing key's public key for tokens.
type axgateEngine struct {
	enf *axgate.Enforcer
}

func newAxgate(signer *token.Signer) (*axgateEngine, error) {
	m, err := manifest.LoadFile(filepath.Join("testdata", "docs.json"))
	if err != nil {
		return nil, err
	}
	enf, err := axgate.New(m, axgate.WithSigningKey(signer))
	if err != nil {
		return nil, err
	}
	return &axgateEngine{enf: enf}, nil
}

func (e *axgateEngine) name() string { return "axgate" }

func (e *axgateEngine) decide(r *request) (decision, error) {
	call := middleware.NewCall(r.Tool, r.Args, middleware.Principal{ID: r.Who.ID, Tenant: r.Who.Tenant, Roles: r.Who.Roles})
	call.Credentials.Confirmation = r.Token
	err := e.enf.Check(context.Background(), call)
	if err == nil {
		return decision{Allow: true}, nil
	}
	if ae, ok := axerr.As(err); ok {
		return decision{Violations: len(ae.Violations)}, nil
	}
	return decision{}, err
}
