// Package browsertest holds the browser tests of httpgate's pages for people.
//
// They run in a real browser (Debian's Chromium, driven by chromedp)
// against a real OpenID Connect provider (oauth2-proxy/mockoidc) started by
// the test. It is a module of its own, so that the browser driver and the
// provider are no dependencies of the core. The tests skip, saying so in one
// line, when /usr/bin/chromium is missing; .ci/run installs it.
package browsertest
