package httpgate_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/httpgate"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
)

const exampleManifest = `{"version":"1.0.0","actions":[{
  "intent":"order.update","entity":"order","action_type":"write","operation_id":"order_update",
  "description":"Change the quantity of an order",
  "required_parameters":[{"name":"order_id","type":"string","description":"Order"},
                         {"name":"quantity","type":"integer","description":"Quantity","min":1,"max":99}],
  "risk_level":"low","idempotent":true,"scope":"global"}]}`

// An existing handler gated by route: the arguments are the JSON body plus
// the path value, and a refusal never reaches the handler.
func ExampleNewMiddleware() {
	m, err := manifest.Parse([]byte(exampleManifest))
	if err != nil {
		log.Fatal(err)
	}
	enf, err := axgate.New(m)
	if err != nil {
		log.Fatal(err)
	}
	defer enf.Close()

	app := http.NewServeMux()
	app.HandleFunc("PUT /orders/{order_id}", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // the body, unchanged
		fmt.Fprintf(w, "updated %s with %s", r.PathValue("order_id"), body)
	})
	byUserHeader := func(r *http.Request) (middleware.Principal, error) {
		return middleware.Principal{ID: r.Header.Get("X-User")}, nil // your authentication here
	}
	gate, err := httpgate.NewMiddleware(enf,
		httpgate.WithPrincipal(byUserHeader),
		httpgate.WithRoute("PUT /orders/{order_id}", "order_update"),
	)
	if err != nil {
		log.Fatal(err) // a bad pattern, an unknown tool, an unchecked path value
	}
	h := gate(app)

	for _, body := range []string{`{"quantity":3}`, `{"quantity":300}`} {
		req := httptest.NewRequest("PUT", "/orders/o-7", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json") // a body on a gated route must be JSON
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		out := strings.TrimSpace(rec.Body.String())
		fmt.Println(rec.Code, out[:min(len(out), 37)])
	}
	// Output:
	// 200 updated o-7 with {"quantity":3}
	// 400 {"error":{"code":"AXAG_OUT_OF_RANGE",
}

// The pages for people under /people/ of a UI's server, with the operator's
// OpenID Connect provider: docs/human-pages.md.
func ExampleWithOIDCSignIn() {
	m, err := manifest.Parse([]byte(exampleManifest))
	if err != nil {
		log.Fatal(err)
	}
	secret := "the client's secret"
	mux := http.NewServeMux()
	enf, err := axgate.New(m, axgate.WithDecisionPages("https://axgate.example.com/people/"))
	if err != nil {
		log.Fatal(err)
	}
	people := httpgate.NewHumanHandler(enf, nil, httpgate.WithOIDCSignIn(httpgate.OIDCConfig{
		Issuer:       "https://login.example.com/realms/acme",
		ClientID:     "axgate-people",
		ClientSecret: secret, // "" for a public client
		RedirectURL:  "https://axgate.example.com/people/callback",
	}))
	mux.Handle("/people/", http.StripPrefix("/people", people))

	// Signed out, a request's page sends the person to sign in, under the
	// prefix.
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/people/requests/r1", nil))
	fmt.Println(rec.Code, rec.Header().Get("Location"))
	// Output: 303 /people/signin?next=%2Frequests%2Fr1
}
