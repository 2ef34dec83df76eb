// Package tokenexchangetest tests the MCP gateway against a real authorization server and real upstreams.
//
// The gateway's per-caller upstream credentials (RFC 8693 token exchange)
// are exchanged at zitadel/oidc's op package. It is a module of its own so
// that zitadel stays out of the published modules' dependencies.
//
// It also holds the end-to-end test of one gateway in front of three
// upstreams (TestOneGatewayThreeUpstreams): two third-party MCP servers
// from npm as command upstreams, one sandboxed, and a Go upstream that
// takes only exchanged tokens, called by the official TypeScript SDK
// clients. testdata/node/package-lock.json pins them; the test installs
// them with npm ci, and skips, saying why, without node or npm.
package tokenexchangetest
