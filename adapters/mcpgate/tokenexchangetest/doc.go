// Package tokenexchangetest tests the MCP gateway's per-caller upstream
// credentials (RFC 8693 token exchange) against a real authorization
// server, zitadel/oidc's op package. It is a module of its own so that
// zitadel stays out of the published modules' dependencies.
package tokenexchangetest
