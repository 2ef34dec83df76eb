package redisstore_test

import (
	"context"
	"log"
	"os"
	"path/filepath"
	"testing"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/token"
)

// readmeDir runs the test in a temporary directory holding the root
// README's manifest, as the README's snippets expect.
func readmeDir(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "readme", "axag.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "axag.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
}

// TestREADMERedis runs docs/state.md's "Shared state across replicas (Redis)" against the
// Redis of AXGATE_REDIS_URL (the snippet's address).
func TestREADMERedis(t *testing.T) {
	if os.Getenv("AXGATE_REDIS_URL") == "" {
		t.Skip("AXGATE_REDIS_URL is not set")
	}
	readmeDir(t)
	signer, err := token.GenerateDevKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := signer.PublicJWKS()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("keys.jwks.json", jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := manifest.LoadFile("axag.json")
	if err != nil {
		t.Fatal(err)
	}

	stores, err := redisstore.Open(ctx, "redis://127.0.0.1:6379/0", redisstore.Options{})
	if err != nil {
		log.Fatal(err) // refuse to start rather than run with state the replicas do not share
	}
	defer stores.Close()
	enf, err := axgate.New(m,
		axgate.WithJWKSFile("keys.jwks.json"), // the same keys on every replica
		axgate.WithReplayStore(stores.Replay),
		axgate.WithLimiter(stores.Limiter),
		axgate.WithIdempotency(gates.IdempotencyOptions{Store: stores.Idempotency}),
		axgate.WithApprovalStore(stores.Approvals),
	)

	if err != nil {
		t.Fatal(err)
	}
	enf.Close()
}
