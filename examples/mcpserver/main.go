// Command mcpserver serves the tools of the shop manifest as an MCP server,
// over stdio (the default) or streamable HTTP (-http 127.0.0.1:8081), with
// axgate enforcing the manifest on every call.
//
// With no key flags it generates development keys at start and prints, on
// standard error, a bearer token for the agent, and for the person-facing
// endpoints a token of the agent's user and one of an approver, of an
// audience of their own (-human-audience): those endpoints refuse the
// agent's token, so an agent cannot confirm for the person. They are served
// in that development mode only; in production a host mounts
// httpgate.NewHumanHandler on its UI backend, behind the UI's own (session)
// authentication, which agents never hold. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, nil)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}

// The development principals: the person on whose behalf the agent acts,
// and an approver.
var (
	devAgent    = middleware.Principal{ID: "alice", Tenant: "acme", Roles: []string{"customer", "account_owner"}}
	devApprover = middleware.Principal{ID: "bob", Tenant: "acme", Roles: []string{"admin", "finance_manager"}}
)

// ready tells what the server listens on, once it does.
type ready struct {
	// MCPURL is the streamable HTTP endpoint ("" on stdio).
	MCPURL string
	// HumanURL serves POST /confirmations and the approval inbox ("" when off).
	HumanURL string
	// AgentToken is the agent's development bearer token; PersonToken
	// (its user's) and ApproverToken are those of the person-facing
	// endpoints, of -human-audience ("" when the keys come from
	// -principal-jwks).
	AgentToken, PersonToken, ApproverToken string
}

func run(ctx context.Context, args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer, onReady func(ready)) error {
	fs := flag.NewFlagSet("mcpserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http", os.Getenv("AXGATE_HTTP"), "serve streamable HTTP on this address, at /mcp (default: stdio)")
	humanAddr := fs.String("human", os.Getenv("AXGATE_HUMAN"), "development keys only: serve the person-facing token endpoints on this address (default with -http: 127.0.0.1:8082; \"off\": none); never give an agent this address")
	manifestPath := fs.String("manifest", envOr("AXGATE_MANIFEST", defaultManifest()), "the AXAG manifest (JSON or YAML)")
	principalJWKS := fs.String("principal-jwks", os.Getenv("AXGATE_PRINCIPAL_JWKS"), "public JWKS file that verifies bearer tokens (default: generated dev key)")
	tokenJWKS := fs.String("token-jwks", os.Getenv("AXGATE_TOKEN_JWKS"), "public JWKS file that verifies confirmation and approval tokens (default: the process's own key)")
	issuer := fs.String("issuer", envOr("AXGATE_ISSUER", "axgate-dev"), "iss of bearer tokens")
	audience := fs.String("audience", envOr("AXGATE_AUDIENCE", "shop-mcp"), "aud of bearer tokens")
	humanAudience := fs.String("human-audience", envOr("AXGATE_HUMAN_AUDIENCE", "shop-mcp-people"), "aud of the people's tokens at -human (distinct from -audience: the agent's tokens are refused there)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The person-facing endpoints take bearer tokens of -human-audience
	// only, never the agent's: a demo on generated dev keys and nothing
	// else. With real keys a host mounts httpgate.NewHumanHandler on its UI
	// backend with the UI's own session authenticator.
	devKeys := *principalJWKS == ""
	switch {
	case *humanAddr == "off":
		*humanAddr = ""
	case *humanAddr != "" && !devKeys:
		return errors.New("-human is for development keys only: mount httpgate.NewHumanHandler on your UI backend behind the UI's own authentication instead, where no agent reaches it")
	case *humanAddr == "" && *httpAddr != "" && devKeys:
		*humanAddr = "127.0.0.1:8082"
	}

	m, err := manifest.LoadFile(*manifestPath)
	if err != nil {
		return err
	}
	opts := []axgate.Option{
		// The example's handlers keep a toy shop in memory with nothing to
		// check the manifest's prose conditions against; a real server binds
		// each one (axgate.WithPrecondition, WithPreconditionExpr).
		axgate.WithUnboundConditions(),
	}
	if *tokenJWKS != "" {
		opts = append(opts, axgate.WithJWKSFile(*tokenJWKS))
	}
	enf, err := axgate.New(m, opts...)
	if err != nil {
		return err
	}
	defer enf.Close()

	server := mcp.NewServer(&mcp.Implementation{Name: "axgate-shop", Version: "v0.1.0"}, nil)
	shop := newShop()
	var info ready
	if *httpAddr == "" {
		// stdio serves the one local user who started the process.
		err = mcpgate.AddTools(server, enf, shop.handlers(enf), mcpgate.WithPrincipal(mcpgate.StaticPrincipal(devAgent)))
	} else {
		err = mcpgate.AddTools(server, enf, shop.handlers(enf))
	}
	if err != nil {
		return err
	}

	// Bearer tokens: dev keys, or the public keys of -principal-jwks.
	var keys token.KeySet
	if *principalJWKS != "" {
		if keys, err = token.LoadJWKSFile(*principalJWKS); err != nil {
			return err
		}
	} else {
		signer, err := token.GenerateDevKey("dev-principal")
		if err != nil {
			return err
		}
		if keys, err = token.NewKeySet(signer.PublicKey()); err != nil {
			return err
		}
		if info.AgentToken, err = devBearer(signer, *issuer, *audience, devAgent); err != nil {
			return err
		}
		if info.PersonToken, err = devBearer(signer, *issuer, *humanAudience, devAgent); err != nil {
			return err
		}
		if info.ApproverToken, err = devBearer(signer, *issuer, *humanAudience, devApprover); err != nil {
			return err
		}
	}
	bearer, err := httpgate.JWTBearer(httpgate.BearerConfig{
		Keyfunc: token.Keyfunc(keys), Issuer: *issuer, Audience: *audience,
	})
	if err != nil {
		return err
	}

	serveCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	var servers []*http.Server
	listen := func(addr string, h http.Handler) (string, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return "", err
		}
		srv := newServer(h)
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
		return "http://" + ln.Addr().String(), nil
	}
	defer func() {
		for _, s := range servers {
			shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
			s.Shutdown(shutdown)
			done()
		}
	}()

	if *humanAddr != "" {
		// Development keys only (checked above): see devKeys. People's
		// tokens only: the agent's (of -audience) are refused.
		people, err := httpgate.HumanBearer(httpgate.BearerConfig{
			Keyfunc: token.Keyfunc(keys), Issuer: *issuer, Audience: *humanAudience,
		}, *audience)
		if err != nil {
			return err
		}
		if info.HumanURL, err = listen(*humanAddr, httpgate.NewHumanHandler(enf, people)); err != nil {
			return err
		}
	}
	if *httpAddr != "" {
		mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
		mux := http.NewServeMux()
		mux.Handle("/mcp", auth.RequireBearerToken(mcpgate.BearerVerifier(bearer), nil)(mcpHandler))
		url, err := listen(*httpAddr, mux)
		if err != nil {
			return err
		}
		info.MCPURL = url + "/mcp"
	}

	if onReady != nil {
		onReady(info)
	} else {
		printWelcome(stderr, m, info)
	}

	if *httpAddr == "" {
		go func() {
			errc <- server.Run(serveCtx, &mcp.IOTransport{Reader: stdin, Writer: stdout})
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
}

// devBearer signs a development bearer token for p, valid for 12 hours.
// newServer is the example's HTTP server (MCP and the person's endpoints):
// headers bounded in size (64 KiB, 431 beyond; net/http's default of 1 MiB
// let a few hundred connections with a 1 MB header hold over a gigabyte) and
// in time (10 s to arrive), idle connections closed after 2 minutes. There
// is no ReadTimeout or WriteTimeout: a streamable HTTP session holds its
// response open for server-to-client messages.
func newServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10, IdleTimeout: 2 * time.Minute}
}

func devBearer(s *token.Signer, iss, aud string, p middleware.Principal) (string, error) {
	now := time.Now()
	return s.Sign("JWT", jwt.MapClaims{
		"iss": iss, "aud": aud, "sub": p.ID, "tenant": p.Tenant, "roles": p.Roles,
		"iat": now.Unix(), "exp": now.Add(12 * time.Hour).Unix(),
	})
}

func printWelcome(w io.Writer, m *manifest.Manifest, info ready) {
	fmt.Fprintf(w, "axgate MCP server: %d tools of the shop manifest, every call checked by axgate\n", len(m.Actions))
	if info.MCPURL == "" {
		fmt.Fprintf(w, "serving MCP on stdio as %s (tenant %s)\n", devAgent.ID, devAgent.Tenant)
	} else {
		fmt.Fprintf(w, "serving MCP (streamable HTTP) on %s\n", info.MCPURL)
	}
	if info.AgentToken != "" {
		fmt.Fprintf(w, "\ndev bearer tokens (generated keys, valid 12 h):\n")
		fmt.Fprintf(w, "  export AGENT_TOKEN=%s     # %s, the agent's user\n", info.AgentToken, devAgent.ID)
		fmt.Fprintf(w, "  export PERSON_TOKEN=%s    # %s, the person, for the person-facing endpoints only\n", info.PersonToken, devAgent.ID)
		fmt.Fprintf(w, "  export APPROVER_TOKEN=%s  # %s, an approver, for the person-facing endpoints only\n", info.ApproverToken, devApprover.ID)
	}
	if info.HumanURL != "" {
		fmt.Fprintf(w, "\nperson-facing endpoints on %s (development only: they mint tokens and take the people's dev tokens, never the agent's; never give an agent this address)\n", info.HumanURL)
		fmt.Fprintf(w, "  confirm one exact call:  curl -s -X POST %s/confirmations -H \"Authorization: Bearer $PERSON_TOKEN\" -H \"Content-Type: application/json\" \\\n", info.HumanURL)
		fmt.Fprintf(w, "                             -d '{\"tool\":\"order_place\",\"arguments\":{…the exact arguments…}}'\n")
		fmt.Fprintf(w, "  then call the tool again with _meta {\"axag/confirmation\":\"<token>\"} (or header X-AXAG-Confirmation)\n")
		fmt.Fprintf(w, "  approval inbox:          curl -s %s/approvals -H \"Authorization: Bearer $APPROVER_TOKEN\"\n", info.HumanURL)
	}
	fmt.Fprintln(w, "\nclients that support elicitation are asked inline instead of needing a confirmation token.")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// defaultManifest finds the shop manifest whether the server runs from the
// repository root or from this folder.
func defaultManifest() string {
	for _, p := range []string{
		filepath.Join("examples", "shop", "shop.json"),
		filepath.Join("..", "shop", "shop.json"),
		"shop.json",
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return filepath.Join("..", "shop", "shop.json")
}
