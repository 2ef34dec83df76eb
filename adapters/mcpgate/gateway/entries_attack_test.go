package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate/gateway"
)

// TestResourcePrefixEmptySegmentNeverForwarded: a read under a declared
// prefix whose rest starts with "/" (payroll://files//etc/passwd, the
// absolute path /etc/passwd to an upstream that joins it to its folder as
// os.path.join does) is refused with AXAG_INTENT_NOT_FOUND and never
// reaches the upstream.
func TestResourcePrefixEmptySegmentNeverForwarded(t *testing.T) {
	up, upURL := payrollUpstream(t)
	doc := strings.Replace(string(payrollManifest), `"resources": [`,
		`"resources": [{"intent": "payroll.files", "entity": "payroll", "description": "Payroll files.", "uri_prefix": "payroll://files/", "required_roles": ["hr"]},`, 1)
	g := newGatewayFor(t, []byte(doc), gateway.Upstream{URL: upURL})
	hana := connect(t, serve(t, g), "hana-token", nil)
	for _, uri := range []string{"payroll://files//etc/passwd", "payroll://files/a//etc/passwd"} {
		_, err := hana.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if err == nil || axagData(t, err).Code != "AXAG_INTENT_NOT_FOUND" {
			t.Errorf("read %s: %v; want AXAG_INTENT_NOT_FOUND", uri, err)
		}
	}
	if got := up.saw("resources/read"); len(got) != 0 {
		t.Errorf("the upstream received %v", got)
	}
}
