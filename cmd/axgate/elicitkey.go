package main

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"

	"github.com/axgate/axgate/adapters/mcpgate"
)

// HKDF's infos of the keys derived from the --signing-key file: each use a
// key of its own, never the signing key itself, nor another use's.
const (
	elicitationKeyInfo = "axgate mcp elicitation state v1"
	pagesCookieKeyInfo = "axgate human pages cookies v1"
)

// pagesCookieKeySize is the length of the pages' cookie key
// (httpgate.OIDCConfig.CookieKey needs at least 32 bytes).
const pagesCookieKeySize = 32

// elicitationKey derives mcpgate's elicitation key from the --signing-key file.
//
// The key signs the request state of the gateway's questions and decision
// pages (mcpgate.WithElicitationKey); it is HKDF-SHA256 over the private
// JWK: replicas given the same --signing-key accept each other's request
// state (an MCP 2026-07-28 retry that lands on another replica), and no
// other key does.
func elicitationKey(path string) ([]byte, error) {
	return derivedKey(path, elicitationKeyInfo, mcpgate.ElicitationKeySize)
}

// pagesCookieKey derives the key of the pages' cookies (--human with
// --oidc-*: the sign-in in progress and the session;
// httpgate.OIDCConfig.CookieKey) from the --signing-key file, as
// elicitationKey does under an info of its own: replicas given the same
// --signing-key take each other's sign-ins.
func pagesCookieKey(path string) ([]byte, error) {
	return derivedKey(path, pagesCookieKeyInfo, pagesCookieKeySize)
}

// derivedKey is HKDF-SHA256 over the private JWK of the --signing-key file,
// with info, of size bytes.
func derivedKey(path, info string, size int) ([]byte, error) {
	signer, err := loadSigner(path, "")
	if err != nil {
		return nil, err
	}
	secret, err := signer.MarshalPrivateJWK()
	if err != nil {
		return nil, fmt.Errorf("--signing-key: %w", err)
	}
	return hkdf.Key(sha256.New, secret, nil, info, size)
}
