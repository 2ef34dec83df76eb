// Command thvgate is ToolHive's gateway as bench/peers-gateway runs it:
// ToolHive's transparent proxy (pkg/transport/proxy/transparent, what
// "thv proxy" serves) with the middlewares "thv run --authz-config" puts in
// front of a server: the request body limit, OIDC bearer validation
// (pkg/auth), the MCP parser (pkg/mcp) and Cedar authorization (pkg/authz),
// then ToolHive's panic recovery. "thv proxy" itself has no authorization
// flag, and "thv run" needs a container runtime even for a remote URL, so
// the benchmark assembles the same chain in this process.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/stacklok/toolhive/pkg/auth"
	"github.com/stacklok/toolhive/pkg/authz"
	_ "github.com/stacklok/toolhive/pkg/authz/authorizers/cedar" // the cedarv1 authorizer
	"github.com/stacklok/toolhive/pkg/bodylimit"
	"github.com/stacklok/toolhive/pkg/mcp"
	"github.com/stacklok/toolhive/pkg/recovery"
	"github.com/stacklok/toolhive/pkg/transport/proxy/transparent"
	"github.com/stacklok/toolhive/pkg/transport/types"
)

func main() {
	port := flag.Int("port", 0, "port to listen on (127.0.0.1)")
	target := flag.String("target", "", "the upstream MCP server's base URL")
	jwks := flag.String("jwks", "", "JWK Set file verifying the bearer tokens")
	issuer := flag.String("issuer", "axgate", "required iss")
	audience := flag.String("audience", "axgate", "required aud")
	authzFile := flag.String("authz", "", "ToolHive authorization configuration (Cedar)")
	flag.Parse()
	if *port == 0 || *target == "" || *jwks == "" || *authzFile == "" {
		log.Fatal("thvgate: -port, -target, -jwks and -authz are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// ToolHive reads keys from a JWKS URL only: serve the file on loopback.
	set, err := os.ReadFile(*jwks)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(set)
	}))

	authMW, authInfo, err := auth.GetAuthenticationMiddleware(ctx, &auth.TokenValidatorConfig{
		Issuer:            *issuer,
		Audience:          *audience,
		JWKSURL:           "http://" + ln.Addr().String() + "/jwks.json",
		AllowPrivateIP:    true,
		InsecureAllowHTTP: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	authzMW, err := authz.GetMiddlewareFromFile("bench", *authzFile, nil)
	if err != nil {
		log.Fatal(err)
	}
	// The order of "thv run": the first is the outermost.
	mws := []types.NamedMiddleware{
		{Name: bodylimit.MiddlewareType, Function: bodylimit.Middleware(0)},
		{Name: auth.MiddlewareType, Function: authMW},
		{Name: mcp.ParserMiddlewareType, Function: mcp.ParsingMiddleware},
		{Name: authz.MiddlewareType, Function: authzMW},
		{Name: recovery.MiddlewareType, Function: recovery.Middleware},
	}
	p := transparent.NewTransparentProxy("127.0.0.1", *port, *target, nil, authInfo, nil,
		false, false, "streamable-http", nil, nil, "", false, mws...)
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("thvgate listening on 127.0.0.1:%d -> %s\n", *port, *target)
	<-ctx.Done()
	p.Stop(context.Background())
}
