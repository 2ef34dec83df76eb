package token

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/axgate/axgate/internal/reasons"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// Signing algorithms (JWS "alg" values) a Key can be bound to; users name
// them by their strings (Key.Algorithm).
const (
	algEdDSA = "EdDSA"
	algES256 = "ES256"
	algES384 = "ES384"
	algES512 = "ES512"
	algRS256 = "RS256"
	algRS384 = "RS384"
	algRS512 = "RS512"
	algPS256 = "PS256"
	algPS384 = "PS384"
	algPS512 = "PS512"
	algHS256 = "HS256"
)

// DefaultAlgorithms is the default allow-list of token algorithms: asymmetric
// only. HS256 is accepted only when a shared secret is configured on purpose
// (HMACKey plus an allow-list naming it).
var DefaultAlgorithms = []string{algEdDSA, algES256, algRS256}

// minRSABits is the smallest RSA modulus accepted for verification or
// signing.
const minRSABits = 2048

// minHMACBytes is the shortest shared secret accepted for HS256 (RFC 7518
// §3.2: a key of the same size as the hash output or larger).
const minHMACBytes = 32

// ErrUnknownKey is returned by a KeySet for a key id it does not hold.
var ErrUnknownKey = errors.New("token: unknown key id")

// Key is a verification key bound to exactly one algorithm, so that a token's
// "alg" header never chooses how its key is used (RFC 8725 §3.1).
type Key struct {
	// ID is the key id tokens name in their "kid" header.
	ID string
	// Algorithm is the one JWS algorithm this key verifies: "EdDSA",
	// "ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256",
	// "PS384", "PS512" or "HS256".
	Algorithm string
	// Public is the verification key: ed25519.PublicKey, *ecdsa.PublicKey,
	// *rsa.PublicKey, or []byte for an HS256 shared secret.
	Public any
}

// Validate reports whether the key's material fits its algorithm.
func (k Key) Validate() error {
	if k.Algorithm == "" {
		return fmt.Errorf("token: key %q: no algorithm", k.ID)
	}
	if err := keyFitsAlgorithm(k.Algorithm, k.Public); err != nil {
		return fmt.Errorf("token: key %q: %w", k.ID, err)
	}
	return nil
}

func keyFitsAlgorithm(alg string, key any) error {
	switch alg {
	case algEdDSA:
		if k, ok := key.(ed25519.PublicKey); ok && len(k) == ed25519.PublicKeySize {
			return nil
		}
		return fmt.Errorf("%s needs an Ed25519 public key, not %T", alg, key)
	case algES256, algES384, algES512:
		k, ok := key.(*ecdsa.PublicKey)
		if !ok {
			return fmt.Errorf("%s needs an ECDSA public key, not %T", alg, key)
		}
		want := map[string]elliptic.Curve{algES256: elliptic.P256(), algES384: elliptic.P384(), algES512: elliptic.P521()}[alg]
		if k.Curve != want {
			return fmt.Errorf("%s needs curve %s", alg, want.Params().Name)
		}
		return nil
	case algRS256, algRS384, algRS512, algPS256, algPS384, algPS512:
		k, ok := key.(*rsa.PublicKey)
		if !ok {
			return fmt.Errorf("%s needs an RSA public key, not %T", alg, key)
		}
		if k.N.BitLen() < minRSABits {
			return fmt.Errorf("RSA key of %d bits is too short (at least %d)", k.N.BitLen(), minRSABits)
		}
		return nil
	case algHS256:
		k, ok := key.([]byte)
		if !ok {
			return fmt.Errorf("%s needs a shared secret ([]byte), not %T", alg, key)
		}
		if len(k) < minHMACBytes {
			return fmt.Errorf("shared secret of %d bytes is too short (at least %d)", len(k), minHMACBytes)
		}
		return nil
	}
	return fmt.Errorf("unsupported algorithm %q", alg)
}

// algorithmFor is the one algorithm a key type is bound to when a JWK does
// not name it.
func algorithmFor(key any) (string, error) {
	switch k := key.(type) {
	case ed25519.PublicKey, ed25519.PrivateKey:
		return algEdDSA, nil
	case *ecdsa.PublicKey:
		return ecdsaAlgorithm(k.Curve)
	case *ecdsa.PrivateKey:
		return ecdsaAlgorithm(k.Curve)
	case *rsa.PublicKey, *rsa.PrivateKey:
		return algRS256, nil
	case []byte:
		return algHS256, nil
	}
	return "", fmt.Errorf("unsupported key type %T", key)
}

func ecdsaAlgorithm(c elliptic.Curve) (string, error) {
	switch c {
	case elliptic.P256():
		return algES256, nil
	case elliptic.P384():
		return algES384, nil
	case elliptic.P521():
		return algES512, nil
	}
	return "", errors.New("unsupported ECDSA curve")
}

// HMACKey returns an HS256 key for a shared secret of at least 32 bytes. A
// verifier accepts it only when its allow-list names HS256 too: a shared
// secret is a deliberate choice, never a default.
func HMACKey(id string, secret []byte) (Key, error) {
	k := Key{ID: id, Algorithm: algHS256, Public: append([]byte(nil), secret...)}
	return k, k.Validate()
}

// KeySet finds verification keys by id. Implementations answer from memory:
// a lookup never makes a network call.
type KeySet interface {
	// Key returns the key named kid, or an error wrapping ErrUnknownKey. An
	// empty kid selects the only key of a set that holds exactly one.
	Key(kid string) (Key, error)
}

// StaticKeySet is a fixed set of keys.
type StaticKeySet struct {
	byID map[string]Key
	only *Key
}

// NewKeySet returns a set of the keys; each must fit its algorithm and ids
// must be unique.
func NewKeySet(keys ...Key) (*StaticKeySet, error) {
	s := &StaticKeySet{byID: make(map[string]Key, len(keys))}
	for _, k := range keys {
		if err := k.Validate(); err != nil {
			return nil, err
		}
		if _, dup := s.byID[k.ID]; dup {
			return nil, fmt.Errorf("token: key id %q appears twice", k.ID)
		}
		s.byID[k.ID] = k
	}
	if len(keys) == 1 {
		k := keys[0]
		s.only = &k
	}
	return s, nil
}

// Key implements KeySet.
func (s *StaticKeySet) Key(kid string) (Key, error) {
	if k, ok := s.byID[kid]; ok {
		return k, nil
	}
	if kid == "" && s.only != nil {
		return *s.only, nil
	}
	return Key{}, ErrUnknownKey
}

// Keys returns the keys of the set, ordered by id.
func (s *StaticKeySet) Keys() []Key {
	out := make([]Key, 0, len(s.byID))
	for _, k := range s.byID {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// JoinKeySets returns a set that asks each set in turn; nil sets are skipped.
func JoinKeySets(sets ...KeySet) KeySet {
	var nonNil joinedKeySets
	for _, s := range sets {
		if s != nil {
			nonNil = append(nonNil, s)
		}
	}
	if len(nonNil) == 1 {
		return nonNil[0]
	}
	return nonNil
}

type joinedKeySets []KeySet

func (j joinedKeySets) Key(kid string) (Key, error) {
	if kid == "" {
		// The only-key shortcut holds only when the union has one key;
		// with several sets, a token must name its key.
		return Key{}, ErrUnknownKey
	}
	for _, s := range j {
		if k, err := s.Key(kid); err == nil {
			return k, nil
		}
	}
	return Key{}, ErrUnknownKey
}

// ParseJWKS reads a JWK Set (RFC 7517) of public keys.
//
// Each key is bound to its "alg" member or, when absent, to the one
// algorithm its type implies (OKP Ed25519 → EdDSA, EC P-256 → ES256, RSA →
// RS256). Keys whose "use" is not "sig" are skipped; symmetric ("oct") keys
// are refused, since a shared secret does not belong in a published key
// set.
func ParseJWKS(data []byte) (*StaticKeySet, error) {
	keys, err := parseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("token: jwks: %w", err)
	}
	return NewKeySet(keys...)
}

// parseJWKS returns the keys of a JWK Set; its errors have no prefix.
func parseJWKS(data []byte) ([]Key, error) {
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	keys := make([]Key, 0, len(set.Keys))
	for i, m := range set.Keys {
		if m.KTY == jwkset.KtyOct {
			return nil, fmt.Errorf("key %d (%q): symmetric key", i, m.KID)
		}
		jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			return nil, fmt.Errorf("key %d (%q): %w", i, m.KID, err)
		}
		k, ok, err := keyFromJWK(jwk)
		if err != nil {
			return nil, fmt.Errorf("key %d (%q): %w", i, m.KID, err)
		}
		if ok {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// keyFromJWK binds a JWK's public key to one algorithm. ok is false for a key
// not meant for signatures.
func keyFromJWK(jwk jwkset.JWK) (k Key, ok bool, err error) {
	m := jwk.Marshal()
	if m.USE != "" && m.USE != jwkset.UseSig {
		return Key{}, false, nil
	}
	pub := jwk.Key()
	if p, isPriv := pub.(interface{ Public() crypto.PublicKey }); isPriv {
		pub = p.Public()
	}
	if _, isSecret := pub.([]byte); isSecret {
		return Key{}, false, errors.New("symmetric key")
	}
	alg := m.ALG.String()
	if alg == "" {
		if alg, err = algorithmFor(pub); err != nil {
			return Key{}, false, err
		}
	}
	return Key{ID: m.KID, Algorithm: alg, Public: pub}, true, keyFitsAlgorithm(alg, pub)
}

// LoadJWKSFile reads a JWK Set from a file once; see ParseJWKS.
func LoadJWKSFile(path string) (*StaticKeySet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("token: jwks: %w", err)
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("token: jwks %s: %w", path, err)
	}
	return NewKeySet(keys...)
}

// RemoteKeySetOptions tune a RemoteKeySet.
type RemoteKeySetOptions struct {
	// RefreshInterval is how often the set is fetched again in the
	// background (default 5 minutes).
	RefreshInterval time.Duration
	// Timeout bounds each fetch (default 10 seconds).
	Timeout time.Duration
	// Client makes the requests (default http.DefaultClient).
	Client *http.Client
	// OnRefreshError hears failed background refreshes; the previous keys
	// stay in use. Default: ignored.
	OnRefreshError func(err error)
}

// RemoteKeySet is a JWK Set fetched from a URL and refreshed in the
// background with github.com/MicahParks/keyfunc/v3. Lookups read the last
// fetched keys from memory: a token naming an unknown key is refused at once,
// never by fetching the set on the request path.
type RemoteKeySet struct {
	kf     keyfunc.Keyfunc
	cancel context.CancelFunc
}

// NewRemoteKeySet fetches the JWK Set at url once, failing if that fetch
// fails, then keeps refreshing it until Close.
func NewRemoteKeySet(url string, o RemoteKeySetOptions) (*RemoteKeySet, error) {
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = 5 * time.Minute
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	noLenience := false
	onErr := o.OnRefreshError
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{url}, keyfunc.Override{
		Client:                    o.Client,
		HTTPTimeout:               o.Timeout,
		RefreshInterval:           o.RefreshInterval,
		NoErrorReturnFirstHTTPReq: &noLenience,
		// A limiter that never allows: an unknown kid is not a reason to
		// fetch on the request path.
		RefreshUnknownKID: rate.NewLimiter(0, 0),
		RefreshErrorHandlerFunc: func(string) func(context.Context, error) {
			return func(_ context.Context, err error) {
				if onErr != nil {
					onErr(err)
				}
			}
		},
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("token: jwks %s: %w", url, err)
	}
	return &RemoteKeySet{kf: kf, cancel: cancel}, nil
}

// Key implements KeySet. A kid is required.
func (r *RemoteKeySet) Key(kid string) (Key, error) {
	if kid == "" {
		return Key{}, ErrUnknownKey
	}
	jwk, err := r.kf.Storage().KeyRead(context.Background(), kid)
	if err != nil {
		return Key{}, fmt.Errorf("%w: %v", ErrUnknownKey, err)
	}
	k, ok, err := keyFromJWK(jwk)
	if err != nil || !ok {
		return Key{}, fmt.Errorf("%w: key %q is not usable for signatures", ErrUnknownKey, kid)
	}
	return k, nil
}

// Close stops the background refresh.
func (r *RemoteKeySet) Close() error {
	r.cancel()
	return nil
}

// Signer signs tokens with one private key bound to one algorithm.
type Signer struct {
	kid    string
	alg    string
	method jwt.SigningMethod
	key    any // crypto.Signer or []byte
	public Key
}

// NewSigner returns a signer for a private key: ed25519.PrivateKey (EdDSA),
// *ecdsa.PrivateKey (ES256/384/512 by curve), *rsa.PrivateKey (RS256, at
// least 2048 bits), or a []byte shared secret (HS256, at least 32 bytes).
// kid names the key in the tokens' header.
func NewSigner(kid string, private any) (*Signer, error) {
	alg, err := algorithmFor(private)
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	var pub any
	switch k := private.(type) {
	case ed25519.PrivateKey:
		if len(k) != ed25519.PrivateKeySize {
			return nil, errors.New("token: malformed Ed25519 private key")
		}
		pub = k.Public()
	case *ecdsa.PrivateKey:
		pub = &k.PublicKey
	case *rsa.PrivateKey:
		pub = &k.PublicKey
	case []byte:
		private = append([]byte(nil), k...)
		pub = private
	case ed25519.PublicKey, *ecdsa.PublicKey, *rsa.PublicKey:
		return nil, fmt.Errorf("token: a signer needs a private key, not %T", private)
	}
	public := Key{ID: kid, Algorithm: alg, Public: pub}
	if err := public.Validate(); err != nil {
		return nil, err
	}
	m := jwt.GetSigningMethod(alg)
	if m == nil {
		return nil, fmt.Errorf("token: unsupported algorithm %q", alg)
	}
	return &Signer{kid: kid, alg: alg, method: m, key: private, public: public}, nil
}

// KeyID returns the kid the signer puts in its tokens.
func (s *Signer) KeyID() string { return s.kid }

// Algorithm returns the signer's algorithm.
func (s *Signer) Algorithm() string { return s.alg }

// PublicKey returns the verification key for the signer's tokens.
func (s *Signer) PublicKey() Key { return s.public }

// Sign signs claims as a JWT with the "typ" header typ and the signer's kid.
func (s *Signer) Sign(typ string, claims jwt.Claims) (string, error) {
	t := jwt.NewWithClaims(s.method, claims)
	t.Header["typ"] = typ
	if s.kid != "" {
		t.Header["kid"] = s.kid
	}
	return t.SignedString(s.key)
}

// GenerateDevKey generates a fresh Ed25519 signing key named kid, for
// development and tests. Its public half is PublicKey; PublicJWKS publishes
// it.
func GenerateDevKey(kid string) (*Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return NewSigner(kid, priv)
}

// PublicJWKS returns a JWK Set holding the signer's public key, for a
// verifier's JWKS file or URL. A shared-secret signer has nothing to
// publish and returns an error.
func (s *Signer) PublicJWKS() ([]byte, error) { return MarshalJWKS(s.public) }

// MarshalJWKS renders public keys as a JWK Set (RFC 7517) with their kid,
// alg and use "sig". Shared secrets are refused.
func MarshalJWKS(keys ...Key) ([]byte, error) {
	set := jwkset.JWKSMarshal{Keys: make([]jwkset.JWKMarshal, 0, len(keys))}
	for _, k := range keys {
		if _, secret := k.Public.([]byte); secret {
			return nil, fmt.Errorf("token: key %q is a shared secret and cannot be published", k.ID)
		}
		jwk, err := jwkset.NewJWKFromKey(k.Public, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{
			ALG: jwkset.ALG(k.Algorithm), KID: k.ID, USE: jwkset.UseSig,
		}})
		if err != nil {
			return nil, fmt.Errorf("token: key %q: %w", k.ID, err)
		}
		set.Keys = append(set.Keys, jwk.Marshal())
	}
	return json.MarshalIndent(set, "", "  ")
}

// MarshalPrivateJWK renders the signer's private key as a JWK (with kid and
// alg), for a development key file that ParseSigningKey reads back. Keep the
// output secret.
func (s *Signer) MarshalPrivateJWK() ([]byte, error) {
	jwk, err := jwkset.NewJWKFromKey(s.key, jwkset.JWKOptions{
		Marshal:  jwkset.JWKMarshalOptions{Private: true},
		Metadata: jwkset.JWKMetadataOptions{ALG: jwkset.ALG(s.alg), KID: s.kid, USE: jwkset.UseSig},
	})
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(jwk.Marshal(), "", "  ")
}

// ParseSigningKey reads a private key: a JWK (as MarshalPrivateJWK writes;
// its kid is used unless kid is set) or a PEM block (PKCS #8, or "EC PRIVATE
// KEY" / "RSA PRIVATE KEY"; kid names it).
func ParseSigningKey(data []byte, kid string) (*Signer, error) {
	trimmed := strings.TrimSpace(string(data))
	if strings.HasPrefix(trimmed, "{") {
		var m jwkset.JWKMarshal
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("token: private JWK is not valid JSON: %w", err)
		}
		jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{Private: true}, jwkset.JWKValidateOptions{})
		if err != nil {
			return nil, fmt.Errorf("token: private JWK: %w", err)
		}
		if kid == "" {
			kid = m.KID
		}
		s, err := NewSigner(kid, jwk.Key())
		if err != nil {
			return nil, err
		}
		if m.ALG != "" && m.ALG.String() != s.alg {
			return nil, fmt.Errorf("token: JWK alg %q does not fit its %s key", m.ALG, s.alg)
		}
		return s, nil
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("token: signing key is neither a JWK nor PEM")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("token: unsupported PEM block %q", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	return NewSigner(kid, key)
}

// LoadSigningKeyFile reads a private key file; see ParseSigningKey.
func LoadSigningKeyFile(path, kid string) (*Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	s, err := ParseSigningKey(data, kid)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return s, nil
}

// Keyfunc returns a jwt.Keyfunc that picks the key named by a token's "kid" from keys.
//
// It hands the key over only if the token's "alg" is in algorithms
// (DefaultAlgorithms when none are given) and is the one algorithm the key is
// bound to. It refuses any "crit" header, which golang-jwt v5 does not check
// on its own. Use it for any JWT verified "with keys as for tokens", such as
// bearer authentication:
//
//	jwt.Parse(raw, token.Keyfunc(keys), jwt.WithExpirationRequired())
//
// Errors are *Error values (errors.As) whose Reason tells unknown key,
// algorithm and critical header apart.
func Keyfunc(keys KeySet, algorithms ...string) jwt.Keyfunc {
	if len(algorithms) == 0 {
		algorithms = DefaultAlgorithms
	}
	allowed := make(map[string]bool, len(algorithms))
	for _, a := range algorithms {
		allowed[a] = true
	}
	return func(t *jwt.Token) (any, error) {
		k, terr := selectKey(t, keys, allowed)
		if terr != nil {
			return nil, terr
		}
		return k.Public, nil
	}
}

// selectKey applies the header rules shared by Keyfunc and Verifier.
func selectKey(t *jwt.Token, keys KeySet, allowed map[string]bool) (Key, *Error) {
	if _, ok := t.Header["crit"]; ok {
		// No extension is understood, so any critical one is refused
		// (RFC 7515 §4.1.11).
		return Key{}, newError(reasons.TokenCriticalHeader, nil)
	}
	alg := t.Method.Alg()
	if !allowed[alg] {
		return Key{}, newError(reasons.TokenAlgorithm, nil)
	}
	var kid string
	if v, present := t.Header["kid"]; present {
		s, ok := v.(string)
		if !ok {
			return Key{}, newError(reasons.TokenMalformed, nil)
		}
		kid = s
	}
	k, err := keys.Key(kid)
	if err != nil {
		return Key{}, newError(reasons.TokenUnknownKey, err)
	}
	if k.Algorithm != alg {
		return Key{}, newError(reasons.TokenAlgorithm, nil)
	}
	return k, nil
}
