package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/axgate/axgate/adapters/httpgate"
)

// pagesFlags are the flags of the pages for people (--human), shared by
// serve and mcp: their public URL and the OpenID Connect sign-in.
type pagesFlags struct {
	human                                                  string // serve only: mcp has its own --human
	publicURL, oidcIssuer, oidcClientID, oidcClientSecretF string
}

// register adds the flags to fs; withHuman adds --human too (serve).
func (p *pagesFlags) register(fs *flag.FlagSet, withHuman bool) {
	if withHuman {
		fs.StringVar(&p.human, "human", "", "address of the pages where people sign in, confirm and approve (needs --oidc-issuer and --oidc-client-id); off by default")
	}
	fs.StringVar(&p.publicURL, "human-url", "", "with --human: the public URL of the pages, linked from refusals and notifications (default http(s)://HUMAN/)")
	fs.StringVar(&p.oidcIssuer, "oidc-issuer", "", "with --human: the OpenID Connect provider people sign in with (its issuer URL)")
	fs.StringVar(&p.oidcClientID, "oidc-client-id", "", "with --oidc-issuer: this gateway's client id at the provider (redirect URI: the --human-url plus \"callback\")")
	fs.StringVar(&p.oidcClientSecretF, "oidc-client-secret-file", "", "with --oidc-issuer: a file holding the client's secret (none: a public client, PKCE only)")
}

// check returns what is wrong with the flags, or "", for the pages served
// at human ("" when off).
func (p *pagesFlags) check(human string) string {
	switch {
	case human == "" && (p.publicURL != "" || p.oidcIssuer != "" || p.oidcClientID != "" || p.oidcClientSecretF != ""):
		return "--human-url and the --oidc-* flags are for the pages of --human: give --human too"
	case p.oidcIssuer != "" && p.oidcClientID == "":
		return "--oidc-issuer needs --oidc-client-id: the client registered for these pages at the provider"
	case p.oidcIssuer == "" && (p.oidcClientID != "" || p.oidcClientSecretF != ""):
		return "--oidc-client-id and --oidc-client-secret-file need --oidc-issuer"
	case p.oidcIssuer != "" && !isHTTPURL(p.oidcIssuer):
		return fmt.Sprintf("--oidc-issuer must be an http or https URL, not %q", redactURL(p.oidcIssuer))
	case p.publicURL != "" && !isHTTPURL(p.publicURL):
		return fmt.Sprintf("--human-url must be an http or https URL, not %q", redactURL(p.publicURL))
	}
	return ""
}

// baseURL is the pages' public URL, ending in "/": --human-url, or
// scheme://addr/ of the listener.
func (p *pagesFlags) baseURL(scheme, addr string) string {
	if p.publicURL != "" {
		return strings.TrimRight(p.publicURL, "/") + "/"
	}
	return scheme + "://" + addr + "/"
}

// options are the human handler's sign-in: OIDC with --oidc-issuer, none
// otherwise (the pages then say sign-in is not configured). With a
// --signing-key file, the pages' cookies are signed with a key derived from
// it (pagesCookieKey), so that replicas (and a reloaded serve) given the
// same file take each other's sign-ins; without, each handler signs with a
// random key of its own.
func (p *pagesFlags) options(base, signingKey string) ([]httpgate.Option, error) {
	if p.oidcIssuer == "" {
		return nil, nil
	}
	secret := ""
	if p.oidcClientSecretF != "" {
		b, err := os.ReadFile(p.oidcClientSecretF)
		if err != nil {
			return nil, fmt.Errorf("--oidc-client-secret-file: %w", err)
		}
		if secret = strings.TrimSpace(string(b)); secret == "" {
			return nil, errors.New("--oidc-client-secret-file: the file is empty")
		}
	}
	cb, err := url.JoinPath(base, "callback")
	if err != nil {
		return nil, fmt.Errorf("--human-url: %w", err)
	}
	var key []byte
	if signingKey != "" {
		if key, err = pagesCookieKey(signingKey); err != nil {
			return nil, err
		}
	}
	return []httpgate.Option{httpgate.WithOIDCSignIn(httpgate.OIDCConfig{
		Issuer: p.oidcIssuer, ClientID: p.oidcClientID, ClientSecret: secret, RedirectURL: cb, CookieKey: key,
	})}, nil
}

// mount serves h under the path of base (the pages' public URL), so that a
// proxy that forwards /people/… unchanged reaches the pages of
// https://host/people/ and their links keep the prefix.
func mount(h http.Handler, base string) http.Handler {
	u, err := url.Parse(base)
	if err != nil {
		return h
	}
	prefix := strings.TrimRight(u.Path, "/")
	if prefix == "" {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", http.StripPrefix(prefix, h))
	return mux
}
