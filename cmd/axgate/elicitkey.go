package main

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"

	"github.com/axgate/axgate/adapters/mcpgate"
)

// elicitationKeyInfo is HKDF's info for the key of the elicitation state:
// a key of its own, never the signing key itself.
const elicitationKeyInfo = "axgate mcp elicitation state v1"

// elicitationKey derives mcpgate's elicitation key from the --signing-key file.
//
// The key signs the request state of the gateway's questions and decision
// pages (mcpgate.WithElicitationKey); it is HKDF-SHA256 over the private
// JWK: replicas given the same --signing-key accept each other's request
// state (an MCP 2026-07-28 retry that lands on another replica), and no
// other key does.
func elicitationKey(path string) ([]byte, error) {
	signer, err := loadSigner(path, "")
	if err != nil {
		return nil, err
	}
	secret, err := signer.MarshalPrivateJWK()
	if err != nil {
		return nil, fmt.Errorf("--signing-key: %w", err)
	}
	return hkdf.Key(sha256.New, secret, nil, elicitationKeyInfo, mcpgate.ElicitationKeySize)
}
