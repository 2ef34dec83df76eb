package gateway

import (
	"testing"

	"github.com/axgate/axgate/manifest"
)

// TestResourcesOverlap: two resource entries overlap when one URI
// matches both (a template's variable is one segment, without '/').
func TestResourcesOverlap(t *testing.T) {
	tmpl := func(s string) *manifest.Resource { return &manifest.Resource{URITemplate: s} }
	prefix := func(s string) *manifest.Resource { return &manifest.Resource{URIPrefix: s} }
	for _, c := range []struct {
		a, b *manifest.Resource
		want bool
	}{
		{tmpl("notes://{name}"), prefix("notes://"), true},
		{tmpl("notes://docs/{name}"), prefix("notes://"), true},
		{tmpl("notes://{name}"), prefix("notes://docs/"), false},
		{tmpl("notes://{a}/{b}"), prefix("notes://docs/"), true},
		{tmpl("docs://{id}"), tmpl("docs://{id}.md"), true},
		{tmpl("docs://{id}"), tmpl("docs://team/{id}"), false},
		{tmpl("payroll://employees/{id}"), tmpl("payroll://teams/{team}"), false},
		{tmpl("a://{x}/y"), tmpl("a://z/{w}"), true},
		{tmpl("a://{x}/y"), tmpl("b://{x}/y"), false},
	} {
		if got := overlap(uriPattern(c.a), uriPattern(c.b)); got != c.want {
			t.Errorf("%s and %s: overlap %v, want %v", c.a.URITemplate, c.b.URITemplate+c.b.URIPrefix, got, c.want)
		}
		if got := overlap(uriPattern(c.b), uriPattern(c.a)); got != c.want {
			t.Errorf("%s and %s (swapped): overlap %v, want %v", c.a.URITemplate, c.b.URITemplate+c.b.URIPrefix, got, c.want)
		}
	}
}
