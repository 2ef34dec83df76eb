package main

import (
	"crypto/ed25519"
	_ "embed"

	"github.com/cedar-policy/cedar-go"
)

//go:embed policy.cedar
var cedarPolicy []byte

// cedarEngine is cedar-go with the policies of policy.cedar, parsed once.
// Per call, the host decodes the arguments into a Cedar record, builds the
// caller's entity (its roles as parents, its tenant as an attribute) and,
// for a token, verifies it in Go (golang-jwt, as the floor does) and hands
// its claims and the arguments' JCS digest to the policy as context.
type cedarEngine struct {
	ps  *cedar.PolicySet
	tok *tokenCheck
}

func newCedar(pub ed25519.PublicKey) (*cedarEngine, error) {
	ps, err := cedar.NewPolicySetFromBytes("policy.cedar", cedarPolicy)
	if err != nil {
		return nil, err
	}
	return &cedarEngine{ps: ps, tok: newTokenCheck(pub)}, nil
}

func (e *cedarEngine) name() string { return "cedar" }

func (e *cedarEngine) decide(r *request) (decision, error) {
	var args cedar.Record
	if err := args.UnmarshalJSON(r.Args); err != nil {
		return decision{}, nil
	}
	ctx := cedar.RecordMap{"args": args}
	if r.Token != "" {
		c, digest, ok := e.tok.verify(r.Token, r.Args)
		if !ok {
			return decision{}, nil
		}
		ctx["args_sha256"] = cedar.String(digest)
		ctx["confirmation"] = cedar.NewRecord(cedar.RecordMap{
			"intent": cedar.String(c.Intent), "sub": cedar.String(c.Subject),
			"tenant": cedar.String(c.Tenant), "args_sha256": cedar.String(c.ArgsSHA256),
		})
	}
	uid := cedar.NewEntityUID("User", cedar.String(r.Who.ID))
	parents := make([]cedar.EntityUID, len(r.Who.Roles))
	for i, role := range r.Who.Roles {
		parents[i] = cedar.NewEntityUID("Role", cedar.String(role))
	}
	entities := cedar.EntityMap{uid: cedar.Entity{
		UID:     uid,
		Parents: cedar.NewEntityUIDSet(parents...),
		Attributes: cedar.NewRecord(cedar.RecordMap{
			"id": cedar.String(r.Who.ID), "tenant": cedar.String(r.Who.Tenant),
		}),
	}}
	d, _ := cedar.Authorize(e.ps, entities, cedar.Request{
		Principal: uid,
		Action:    cedar.NewEntityUID("Action", cedar.String(r.Intent)),
		Resource:  cedar.NewEntityUID("Tenant", cedar.String(r.Who.Tenant)),
		Context:   cedar.NewRecord(ctx),
	})
	return decision{Allow: d == cedar.Allow}, nil
}
