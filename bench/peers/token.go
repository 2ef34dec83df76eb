package main

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gowebpki/jcs"

	"github.com/axgate/axgate/token"
)

// tokenCheck verifies a confirmation token the way a hand-written check
// would: golang-jwt into a fixed claims struct (EdDSA only, issuer,
// audience, exp and iat required, typ checked) and the JCS + SHA-256 digest of
// the arguments, for the caller to compare with the claims.
type tokenCheck struct {
	pub    ed25519.PublicKey
	parser *jwt.Parser
}

type claims struct {
	jwt.RegisteredClaims
	Intent     string `json:"intent"`
	Tenant     string `json:"tenant"`
	ArgsSHA256 string `json:"args_sha256"`
}

func newTokenCheck(pub ed25519.PublicKey) *tokenCheck {
	return &tokenCheck{pub: pub, parser: jwt.NewParser(jwt.WithValidMethods([]string{"EdDSA"}),
		jwt.WithIssuer(token.DefaultIssuer), jwt.WithAudience(token.DefaultAudience),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt())}
}

// verify returns the token's claims and the arguments' digest, or false.
func (t *tokenCheck) verify(tok string, args []byte) (*claims, string, bool) {
	var c claims
	if _, err := t.parser.ParseWithClaims(tok, &c, t.key); err != nil || c.ID == "" {
		return nil, "", false
	}
	canon, err := jcs.Transform(args)
	if err != nil {
		return nil, "", false
	}
	sum := sha256.Sum256(canon)
	return &c, base64.RawURLEncoding.EncodeToString(sum[:]), true
}

func (t *tokenCheck) key(tk *jwt.Token) (any, error) {
	if typ, _ := tk.Header["typ"].(string); typ != token.TypConfirmation {
		return nil, jwt.ErrTokenUnverifiable
	}
	return t.pub, nil
}
