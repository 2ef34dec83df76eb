package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/middleware"
)

// TestStatelessFirstRequestsTogetherAreOneCallerNotTwoSessions: two first
// stateless requests of one caller that both find no link yet (held
// together here, between looking for the caller's link and starting one,
// by the principal function) start one link: the second uses it rather
// than being counted as a second session and refused past the caller's
// bound of one; likewise they never take two of the gateway's sessions.
func TestStatelessFirstRequestsTogetherAreOneCallerNotTwoSessions(t *testing.T) {
	t.Parallel()
	_, up := httpUpstream(t)
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token":"upstream-token","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(tokens.Close)
	// The first four principal lookups (each request's before it looks for
	// the link, then each request's after) go two by two.
	var (
		mu      sync.Mutex
		calls   int
		waiting []chan struct{}
	)
	barrier := func(ctx context.Context, req *mcp.CallToolRequest) (middleware.Principal, error) {
		mu.Lock()
		calls++
		if calls <= 4 {
			ch := make(chan struct{})
			waiting = append(waiting, ch)
			if len(waiting) == 2 {
				for _, c := range waiting {
					close(c)
				}
				waiting = nil
			}
			mu.Unlock()
			<-ch
		} else {
			mu.Unlock()
		}
		return mcpgate.BearerPrincipal(ctx, req)
	}
	url := serve(t, newGateway(t, gateway.Upstream{URL: up, Credentials: &gateway.UpstreamCredentials{
		TokenExchange: &gateway.TokenExchange{TokenURL: tokens.URL, ClientID: "gw", ClientSecret: "s", Audience: "notes"},
	}}, "", gateway.WithMaxSessions(2, 1), gateway.WithPrincipal(barrier)))
	a1, a2 := connectStateless(t, url, "alice-token", nil), connectStateless(t, url, "alice-token", nil)
	errs := make(chan error, 2)
	for _, cs := range []*mcp.ClientSession{a1, a2} {
		go func() {
			_, err := cs.ListTools(context.Background(), nil)
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("one of alice's first requests: %v", err)
		}
	}
	// bob has the gateway's other session.
	if _, err := connectStateless(t, url, "bob-token", nil).ListTools(context.Background(), nil); err != nil {
		t.Errorf("bob's first request: %v", err)
	}
}
