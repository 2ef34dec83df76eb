package bench

import (
	"encoding/json"
	"testing"

	"github.com/axgate/axgate/internal/fixtures"
	"github.com/axgate/axgate/internal/gate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

// orderPlaceArgs is a realistic order.place call of about 200 bytes.
var orderPlaceArgs = []byte(`{"cart_id":"3fa85f64-5717-4562-b3fc-2c963f66afa6","shipping_address_id":"addr_9f8e7d6c5b4a","notes":"Leave the parcel at the back door and ring twice; gift wrap it, please. Thanks!"}`)

func loadFull(b *testing.B) *manifest.Manifest {
	b.Helper()
	m, err := manifest.LoadFile(fixtures.Manifest("shop-full.json"))
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkParams is the parameter gate on one call: a new Call, strict
// decoding (size, depth, UTF-8, duplicate keys) and the compiled schema.
func BenchmarkParams(b *testing.B) {
	m := loadFull(b)
	p, err := gate.NewParams(m, false)
	if err != nil {
		b.Fatal(err)
	}
	action := m.Tool("order_place")
	b.SetBytes(int64(len(orderPlaceArgs)))
	b.ReportAllocs()
	for b.Loop() {
		call := middleware.NewCall("order_place", orderPlaceArgs, middleware.Principal{ID: "u"})
		call.Action = action
		if err := p.Check(call); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeAndValidateOnly is the bare baseline: encoding/json into an
// any, and the same compiled schema's Validate.
func BenchmarkDecodeAndValidateOnly(b *testing.B) {
	m := loadFull(b)
	schema := m.Tool("order_place").ParamSchema()
	b.SetBytes(int64(len(orderPlaceArgs)))
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := json.Unmarshal(orderPlaceArgs, &v); err != nil {
			b.Fatal(err)
		}
		if err := schema.Validate(v); err != nil {
			b.Fatal(err)
		}
	}
}
