package main

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkShopRead is one product_search call through the whole server
// (bearer verification, chain, handler, JSON) against the bare handler.
func BenchmarkShopRead(b *testing.B) {
	gated, err := newShop(b.Context(), config{issuer: "axgate-shop", audience: "axgate-shop"})
	if err != nil {
		b.Fatal(err)
	}
	defer gated.close()
	bare, err := newShop(b.Context(), config{bare: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		s    *shop
	}{{"bare", bare}, {"axgate", gated}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("POST", "/tools/product_search/call", strings.NewReader(`{"query":"lamp"}`))
				req.Header.Set("Authorization", "Bearer "+gated.tokens["alice"])
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				c.s.handler.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatal(rec.Code, rec.Body)
				}
			}
		})
	}
}
