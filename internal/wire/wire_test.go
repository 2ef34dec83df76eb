package wire_test

import (
	"errors"
	"net/http"
	"reflect"
	"testing"

	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/internal/wire"
	"github.com/axgate/axgate/middleware"
)

func TestFromHeader(t *testing.T) {
	h := http.Header{}
	h.Set(wire.HeaderConfirmation, "c")
	h.Add(wire.HeaderApproval, "a1, a2")
	h.Add(wire.HeaderApproval, "a3")
	h.Set(wire.HeaderIdempotencyKey, "k")
	h.Set(wire.HeaderTenant, "acme")
	got := wire.FromHeader(h)
	want := middleware.Credentials{Confirmation: "c", Approvals: []string{"a1", "a2", "a3"}, IdempotencyKey: "k", ClaimedTenant: "acme"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FromHeader = %+v", got)
	}
}

func TestFromMeta(t *testing.T) {
	cr, err := wire.FromMeta(map[string]any{
		wire.MetaConfirmation: "c", wire.MetaApprovals: []any{"a1", "a2"},
		wire.MetaIdempotencyKey: "k", "traceparent": "00-…",
	})
	if err != nil || cr.Confirmation != "c" || len(cr.Approvals) != 2 || cr.IdempotencyKey != "k" {
		t.Fatalf("FromMeta = %+v, %v", cr, err)
	}
	for name, meta := range map[string]map[string]any{
		"misspelled key":      {"axag/confirmaton": "c"},
		"token not a string":  {wire.MetaConfirmation: 7},
		"approvals not list":  {wire.MetaApprovals: map[string]any{}},
		"approval not string": {wire.MetaApprovals: []any{"a", 1}},
	} {
		if _, err := wire.FromMeta(meta); !errors.Is(err, axerr.CodeInvalidArguments) {
			t.Errorf("%s: err = %v; want AXGATE_INVALID_ARGUMENTS", name, err)
		}
	}
}

func TestMergeAndToMeta(t *testing.T) {
	meta := middleware.Credentials{Confirmation: "from-meta"}
	hdr := middleware.Credentials{Confirmation: "from-header", Approvals: []string{"a"}, ClaimedTenant: "t"}
	got := wire.Merge(meta, hdr)
	if got.Confirmation != "from-meta" || len(got.Approvals) != 1 || got.ClaimedTenant != "t" {
		t.Fatalf("Merge = %+v", got)
	}
	back, err := wire.FromMeta(wire.ToMeta(got))
	if err != nil || !reflect.DeepEqual(back, got) {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
}
