package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/memstore"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/token"
)

// enforcerConfig is what the flags that serve and mcp share say: how
// tokens are verified, where the state lives, and how the manifest's
// conditions are bound.
type enforcerConfig struct {
	jwks, jwksURL, signingKey        string
	issuer, audience                 string
	anonymous                        bool
	redis                            string
	preconditions, postconditions    conditionFlags
	allowUnbound, allowUnknownParams bool
}

// register adds the shared flags to fs. audience is the default of
// --audience, audienceUsage its help text.
func (c *enforcerConfig) register(fs *flag.FlagSet, audience, audienceUsage string) {
	fs.StringVar(&c.jwks, "jwks", "", "JWK Set file verifying bearer, confirmation and approval tokens (re-read on SIGHUP)")
	fs.StringVar(&c.jwksURL, "jwks-url", "", "JWK Set URL verifying bearer, confirmation and approval tokens (refreshed in the background)")
	fs.StringVar(&c.signingKey, "signing-key", "", "private key (PEM or JWK) whose public half also verifies confirmation and approval tokens")
	fs.StringVar(&c.issuer, "issuer", token.DefaultIssuer, "required iss of every token")
	fs.StringVar(&c.audience, "audience", audience, audienceUsage)
	fs.BoolVar(&c.anonymous, "anonymous", false, "accept calls without a bearer token, as the empty principal (development only)")
	fs.StringVar(&c.redis, "redis", "", "Redis URL for shared state across replicas (used tokens, rate limits, idempotency, approvals); default in memory")
	fs.Var(&c.preconditions, "precondition", "bind a manifest precondition to a CEL expression: NAME=EXPR (repeatable)")
	fs.Var(&c.postconditions, "postcondition", "bind a manifest postcondition to a CEL expression: NAME=EXPR (repeatable)")
	fs.BoolVar(&c.allowUnbound, "allow-unbound-conditions", false, "serve even though some conditions are bound to no check (each call records a warning)")
	fs.BoolVar(&c.allowUnknownParams, "allow-unknown-params", false, "accept arguments the manifest does not declare")
}

// checkKeys returns what is wrong with the key flags, or "". Callers must
// be authenticated (a key set, or --anonymous) when authenticated is true.
func (c *enforcerConfig) checkKeys(authenticated bool) string {
	switch {
	case c.jwks != "" && c.jwksURL != "":
		return "give --jwks or --jwks-url, not both"
	case authenticated && c.jwks == "" && c.jwksURL == "" && !c.anonymous:
		return "callers must be authenticated: give --jwks or --jwks-url (or --anonymous, for development)"
	case c.anonymous && (c.jwks != "" || c.jwksURL != ""):
		return "--anonymous and a key set exclude each other"
	}
	return ""
}

// checkFiles checks, before anything starts, that the manifest and the key
// files the flags name can be read; the error names the flag, the file and
// where it was looked for.
func (c *enforcerConfig) checkFiles(manifest string) error {
	for _, f := range []struct{ flag, path string }{{"manifest", manifest}, {"jwks", c.jwks}, {"signing-key", c.signingKey}} {
		if f.path == "" {
			continue
		}
		if err := fileFlag(f.flag, f.path); err != nil {
			return err
		}
	}
	return nil
}

// enforcerState is what lives as long as the process and is handed to every
// enforcer built from the manifest (serve builds one on each reload), so
// that a reload forgets nothing: used token ids, pending approvals,
// rate-limit counts and idempotency records stay, and a token signed before
// a reload still verifies after it.
type enforcerState struct {
	cfg       enforcerConfig
	log       *slog.Logger
	state     gatewayState
	redis     *redisstore.Stores // nil without --redis; closed by close
	remote    *token.RemoteKeySet
	devSigner *token.Signer // the ephemeral key when no key is configured
	inMemory  bool          // spent tokens are kept in memory (no --redis)
}

// gatewayState is the state the gates keep: in Redis with --redis, in
// memory otherwise.
type gatewayState struct {
	replay      token.ReplayStore
	approvals   gates.ApprovalStore
	limiter     gates.Limiter
	idempotency gates.IdempotencyStore
}

// options hands the state to a generation.
func (s gatewayState) options() []axgate.Option {
	return []axgate.Option{axgate.WithReplayStore(s.replay), axgate.WithApprovalStore(s.approvals),
		axgate.WithLimiter(s.limiter), axgate.WithIdempotency(gates.IdempotencyOptions{Store: s.idempotency})}
}

// openEnforcerState connects to Redis (--redis), starts fetching a remote
// JWK Set (--jwks-url) or makes the ephemeral signing key; cmd names the
// command in the log. Close releases it all.
//
// mustSign makes the ephemeral key also when verification keys are given
// but no --signing-key: mcp mints tokens itself (the confirmations a person
// gives by elicitation, the tokens of --human), which serve does not.
func openEnforcerState(ctx context.Context, c enforcerConfig, cmd string, mustSign bool, log *slog.Logger) (*enforcerState, error) {
	s := &enforcerState{cfg: c, log: log}
	if c.redis != "" {
		r, err := redisstore.Open(ctx, c.redis, redisstore.Options{})
		if err != nil {
			return nil, err
		}
		s.redis = r
		s.state = gatewayState{replay: r.Replay, approvals: r.Approvals, limiter: r.Limiter, idempotency: r.Idempotency}
	} else {
		// Made once, not by each axgate.New: a reload that made new ones
		// would let a confirmation token be used again after every SIGHUP.
		// A restart makes new ones: the gates then refuse every token
		// issued before it (issued_before_start), which the operator
		// should hear of before a person does (logNotes, once started).
		s.inMemory = true
		// The gates compare iat, which has whole seconds, with the second
		// the store was made in: a token the process before minted and
		// spent in that very second (a crash, an immediate restart) would
		// pass again. Made in a second that began after this process did,
		// the store takes only the tokens minted since.
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
		s.state = gatewayState{
			replay:      token.NewMemoryReplayStore(token.MemoryReplayOptions{}),
			approvals:   memstore.NewApprovalStore(memstore.ApprovalOptions{}),
			limiter:     memstore.NewLimiter(0),
			idempotency: memstore.NewIdempotencyStore(0),
		}
	}
	if c.signingKey == "" && (mustSign || c.jwks == "" && c.jwksURL == "") {
		// axgate.New would make an ephemeral key of its own on each load;
		// one for the life of the process keeps the tokens signed with it
		// (approval tokens, IssueConfirmation's) valid across reloads.
		signer, err := token.GenerateDevKey(axgate.DevKeyID)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("ephemeral signing key: %w", err)
		}
		s.devSigner = signer
	}
	if c.jwksURL != "" {
		ks, err := token.NewRemoteKeySet(c.jwksURL, token.RemoteKeySetOptions{
			OnRefreshError: func(err error) {
				log.Warn("axgate "+cmd+": JWK Set refresh failed; keeping the keys fetched before", "url", c.jwksURL, "err", err)
			},
		})
		if err != nil {
			s.close()
			return nil, err
		}
		s.remote = ks
	}
	return s, nil
}

// keys returns the key set that verifies tokens as it is now (a --jwks
// file is read again), or nil when none is configured.
func (s *enforcerState) keys() (token.KeySet, error) {
	switch {
	case s.cfg.jwks != "":
		ks, err := loadJWKS(s.cfg.jwks)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
			return nil, fileFlag("jwks", s.cfg.jwks)
		case err != nil:
			return nil, fmt.Errorf("--jwks %w", err) // the error begins with the path
		case len(ks.Keys()) == 0:
			return nil, fmt.Errorf("--jwks %s: the key set holds no public key: no token could be verified (axgate keys gen writes one)", s.cfg.jwks)
		}
		return ks, nil
	case s.remote != nil:
		return s.remote, nil
	}
	return nil, nil
}

// options returns the options of an enforcer that verifies tokens with
// keys: the token settings, the signing key, the shared state and the
// conditions the flags bind.
func (s *enforcerState) options(keys token.KeySet) ([]axgate.Option, error) {
	c := s.cfg
	opts := []axgate.Option{
		axgate.WithTokens(axgate.TokenOptions{Issuer: c.issuer, Audience: c.audience, Keys: keys}),
		axgate.WithLogger(s.log),
	}
	switch {
	case c.signingKey != "":
		signer, err := loadSigner(c.signingKey, "")
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
			return nil, fileFlag("signing-key", c.signingKey)
		case err != nil:
			return nil, fmt.Errorf("--signing-key %w", err) // the error begins with the path
		}
		opts = append(opts, axgate.WithSigningKey(signer))
	case s.devSigner != nil:
		opts = append(opts, axgate.WithSigningKey(s.devSigner))
	}
	opts = append(opts, s.state.options()...)
	for _, p := range c.preconditions {
		name, expr, _ := strings.Cut(p, "=")
		opts = append(opts, axgate.WithPreconditionExpr(strings.TrimSpace(name), strings.TrimSpace(expr)))
	}
	for _, p := range c.postconditions {
		name, expr, _ := strings.Cut(p, "=")
		opts = append(opts, axgate.WithPostconditionExpr(strings.TrimSpace(name), strings.TrimSpace(expr)))
	}
	if c.allowUnbound {
		opts = append(opts, axgate.WithUnboundConditions())
	}
	if c.allowUnknownParams {
		opts = append(opts, axgate.WithUnknownParams())
	}
	return opts, nil
}

// close releases the Redis connection and stops the JWK Set refresh. The
// memory stores hold no resources: nothing to close.
// logNotes logs, once the command has started, what the operator should
// know of the state: that spent tokens are kept in memory. Not at open: a
// start that then fails (a bad manifest or key file) shows its error first.
func (s *enforcerState) logNotes(cmd string) {
	if s.inMemory {
		s.log.Info("axgate " + cmd + ": spent confirmation and approval tokens are kept in memory, so a restart voids the outstanding ones; --redis (with persistence) keeps them across restarts")
	}
}

func (s *enforcerState) close() {
	if s.remote != nil {
		s.remote.Close()
	}
	if s.redis != nil {
		s.redis.Close()
	}
}
