package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"golang.org/x/oauth2/clientcredentials"

	mcpgw "github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// upstreamCreds are the flags of the gateway's own credentials to its
// upstream (mcpgw.UpstreamCredentials): never the caller's.
type upstreamCreds struct {
	headerFiles, envFiles fileFlags
	clientCredentials     string // token URL of the client credentials grant
	tokenExchange         string // token URL of the RFC 8693 token exchange
	clientID, secretFile  string
	scopes                string
	audience              string
	exchangeScopes        string
}

func (u *upstreamCreds) register(fs *flag.FlagSet) {
	fs.Var(&u.headerFiles, "upstream-header-file", "with --upstream-url: send the header NAME with the content of the file PATH (an API key) on every upstream request: NAME=PATH (repeatable; read at start, never logged)")
	fs.Var(&u.envFiles, "upstream-env-file", "with --upstream-command: give the child the environment variable NAME with the content of the file PATH: NAME=PATH (repeatable; read at start, never logged)")
	fs.StringVar(&u.clientCredentials, "upstream-client-credentials", "", "with --upstream-url: the token endpoint `URL` of an OAuth 2.0 client credentials grant whose token the gateway sends upstream (needs --upstream-client-id, --upstream-client-secret-file)")
	fs.StringVar(&u.tokenExchange, "upstream-token-exchange", "", "with --upstream-url and --jwks/--jwks-url: the token endpoint `URL` where each caller's token is exchanged (RFC 8693) for one of --upstream-token-exchange-audience (needs --upstream-client-id, --upstream-client-secret-file)")
	fs.StringVar(&u.clientID, "upstream-client-id", "", "the gateway's client id at the token endpoint of --upstream-client-credentials and --upstream-token-exchange")
	fs.StringVar(&u.secretFile, "upstream-client-secret-file", "", "the file holding the gateway's client secret at that token endpoint")
	fs.StringVar(&u.scopes, "upstream-client-scopes", "", "the scopes asked for by --upstream-client-credentials, space-separated")
	fs.StringVar(&u.audience, "upstream-token-exchange-audience", "", "the audience of the tokens --upstream-token-exchange asks for: the upstream's")
	fs.StringVar(&u.exchangeScopes, "upstream-token-exchange-scopes", "", "the scopes asked for by --upstream-token-exchange, space-separated")
}

// build is the credentials the flags give, or nil without any.
func (u *upstreamCreds) build() (*mcpgw.UpstreamCredentials, error) {
	if len(u.headerFiles) == 0 && len(u.envFiles) == 0 && u.clientCredentials == "" && u.tokenExchange == "" {
		if u.clientID != "" || u.secretFile != "" || u.scopes != "" || u.audience != "" || u.exchangeScopes != "" {
			return nil, errors.New("--upstream-client-id, --upstream-client-secret-file and the scopes and audience go with --upstream-client-credentials or --upstream-token-exchange")
		}
		return nil, nil
	}
	c := &mcpgw.UpstreamCredentials{HeaderFiles: u.headerFiles.m(), EnvFiles: u.envFiles.m()}
	if u.clientCredentials == "" && u.tokenExchange == "" {
		return c, nil
	}
	if u.clientID == "" || u.secretFile == "" {
		return nil, errors.New("--upstream-client-credentials and --upstream-token-exchange need --upstream-client-id and --upstream-client-secret-file")
	}
	raw, err := os.ReadFile(u.secretFile)
	if err != nil {
		return nil, fmt.Errorf("--upstream-client-secret-file: the file %s cannot be read", u.secretFile)
	}
	secret := strings.TrimRight(string(raw), "\r\n")
	if u.clientCredentials != "" {
		if !isHTTPURL(u.clientCredentials) {
			return nil, errors.New("--upstream-client-credentials must be an http or https URL")
		}
		c.ClientCredentials = &clientcredentials.Config{TokenURL: u.clientCredentials, ClientID: u.clientID, ClientSecret: secret, Scopes: strings.Fields(u.scopes)}
	}
	if u.tokenExchange != "" {
		if !isHTTPURL(u.tokenExchange) {
			return nil, errors.New("--upstream-token-exchange must be an http or https URL")
		}
		if u.audience == "" {
			return nil, errors.New("--upstream-token-exchange needs --upstream-token-exchange-audience (the upstream's)")
		}
		c.TokenExchange = &mcpgw.TokenExchange{TokenURL: u.tokenExchange, ClientID: u.clientID, ClientSecret: secret,
			Audience: u.audience, Scopes: strings.Fields(u.exchangeScopes)}
	}
	return c, nil
}

// fileFlags collects repeated NAME=PATH flags.
type fileFlags []string

func (f *fileFlags) String() string { return strings.Join(*f, " ") }

// repeatable lets a configuration file give a list (config.go).
func (*fileFlags) repeatable() {}

func (f *fileFlags) Set(v string) error {
	k, path, ok := strings.Cut(v, "=")
	if !ok || k == "" || path == "" || strings.ContainsAny(k, " \t\n") {
		return errors.New(`want NAME=PATH, e.g. "X-Api-Key=/run/secrets/api-key"`)
	}
	*f = append(*f, v)
	return nil
}

func (f fileFlags) m() map[string]string {
	if len(f) == 0 {
		return nil
	}
	out := make(map[string]string, len(f))
	for _, v := range f {
		k, path, _ := strings.Cut(v, "=")
		out[k] = path
	}
	return out
}
