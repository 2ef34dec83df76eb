package jsonx

import "testing"

// benchInputs are argument documents of the read path: the 182-byte
// order.place call of bench/params_test.go, one with numbers (integers,
// decimals, an exponent) and one whose keys have capitals, so that the slow
// paths of the number and case-folding checks are measured too.
var benchInputs = []struct {
	name string
	doc  []byte
}{
	{"strings", []byte(`{"cart_id":"3fa85f64-5717-4562-b3fc-2c963f66afa6","shipping_address_id":"addr_9f8e7d6c5b4a","notes":"Leave the parcel at the back door and ring twice; gift wrap it, please. Thanks!"}`)},
	{"numbers", []byte(`{"order_id":1234567,"amount":129.95,"quantity":3,"discount":0.1,"weight_kg":2.5e-1,"lines":[{"sku":"A-1","qty":2,"price":19.99},{"sku":"B-2","qty":1,"price":90}]}`)},
	{"capitals", []byte(`{"CartID":"3fa85f64-5717-4562-b3fc-2c963f66afa6","ShippingAddressID":"addr_9f8e7d6c5b4a","Notes":"Leave the parcel at the back door.","GiftWrap":true}`)},
}

// BenchmarkDecode is the strict decoder alone, with the limits the call
// arguments get.
func BenchmarkDecode(b *testing.B) {
	lim := Limits{MaxBytes: 1 << 20, MaxDepth: 64, MaxMembers: 1000, IJSON: true}
	for _, in := range benchInputs {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(in.doc, lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
