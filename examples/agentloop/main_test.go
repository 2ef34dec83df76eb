package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

var shopManifest = filepath.Join("..", "shop", "shop.json")

// steps are the lines of the transcript that must appear, in this order.
func inOrder(t *testing.T, transcript string, steps ...string) {
	t.Helper()
	rest := transcript
	for _, s := range steps {
		i := strings.Index(rest, s)
		if i < 0 {
			t.Fatalf("transcript lacks %q after the earlier steps:\n%s", s, transcript)
		}
		rest = rest[i+len(s):]
	}
}

func TestTranscriptCorrectsConfirmsAndSucceeds(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-manifest", shopManifest}, &out); err != nil {
		t.Fatal(err)
	}
	inOrder(t, out.String(),
		`agent   → product_search {"category":"lighting","query":"desk lamp"}`,
		"axgate  ✗ AXAG_INVALID_ENUM",
		`agent   picks category="home"`,
		`agent   → product_search {"category":"home","query":"desk lamp"}`,
		"axgate  ✓ ",
		`agent   → order_place {"cart":"my cart","shipping_address_id":42}`,
		"axgate  ✗ AXGATE_UNKNOWN_PARAM: 3 invalid arguments",
		"/cart_id: missing properties",
		"agent   drops cart",
		"agent   sets cart_id",
		"agent   sets shipping_address_id",
		"axgate  ✗ AXAG_CONFIRMATION_MISSING",
		`agent   asks the person: "Allow order.place`,
		"person  yes",
		"host    signs a single-use confirmation token",
		"+ confirmation token",
		`axgate  ✓ {"cart_id":"3f0c2a8e-9b1d-4c56-8f3e-2a1b0c9d8e7f","order_id":"ord-0001","status":"placed"}`,
		"the order is placed",
	)
}

func TestTranscriptPersonDeclines(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-manifest", shopManifest, "-decline"}, &out); err != nil {
		t.Fatal(err)
	}
	inOrder(t, out.String(), "axgate  ✗ AXAG_CONFIRMATION_MISSING", "person  no", "the order was not placed (AXAG_CONFIRMATION_MISSING)")
	if strings.Contains(out.String(), `"status":"placed"`) {
		t.Errorf("the order was placed without confirmation:\n%s", out.String())
	}
}
