package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

//go:embed policy.rego
var regoPolicy string

// opaEngine is OPA's Go SDK with policy.rego, prepared once. Per call, the
// host decodes the arguments (encoding/json), computes their JCS digest when
// there is a token, and evaluates data.axgate.decision.
type opaEngine struct {
	q rego.PreparedEvalQuery
}

func newOPA(pub ed25519.PublicKey) (*opaEngine, error) {
	jwks := fmt.Sprintf(`{"keys":[{"kty":"OKP","crv":"Ed25519","alg":"EdDSA","kid":"bench","x":%q}]}`,
		base64.RawURLEncoding.EncodeToString(pub))
	store := inmem.NewFromObject(map[string]any{"jwks": jwks})
	q, err := rego.New(rego.Query("data.axgate.decision"), rego.Module("policy.rego", regoPolicy), rego.Store(store)).
		PrepareForEval(context.Background())
	if err != nil {
		return nil, err
	}
	return &opaEngine{q: q}, nil
}

func (e *opaEngine) name() string { return "opa" }

func (e *opaEngine) decide(r *request) (decision, error) {
	var args any
	if err := json.Unmarshal(r.Args, &args); err != nil {
		return decision{}, nil
	}
	roles := make([]any, len(r.Who.Roles))
	for i, role := range r.Who.Roles {
		roles[i] = role
	}
	input := map[string]any{
		"intent":    r.Intent,
		"principal": map[string]any{"id": r.Who.ID, "tenant": r.Who.Tenant, "roles": roles},
		"args":      args,
	}
	if r.Token != "" {
		canon, err := jcs.Transform(r.Args)
		if err != nil {
			return decision{}, nil
		}
		sum := sha256.Sum256(canon)
		input["token"] = r.Token
		input["args_sha256"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	rs, err := e.q.Eval(context.Background(), rego.EvalInput(input))
	if err != nil {
		return decision{}, err
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return decision{}, fmt.Errorf("opa: unexpected result %v", rs)
	}
	d, _ := rs[0].Expressions[0].Value.(map[string]any)
	allow, _ := d["allow"].(bool)
	vs, _ := d["violations"].([]any)
	return decision{Allow: allow, Violations: len(vs)}, nil
}
