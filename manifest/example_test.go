package manifest_test

import (
	"fmt"

	"github.com/axgate/axgate/manifest"
)

// Parse reads the reference form from YAML; a misspelled safety field is
// refused with its path.
func ExampleParse() {
	m, err := manifest.Parse([]byte(`
version: "1.0.0"
entities:
  - name: order
    actions:
      - intent: order.cancel
        action_type: write
        description: Cancel an order
        risk_level: high
        confirmation_required: true
        parameters:
          order_id: {type: string, required: true, format: uuid}
`))
	if err != nil {
		panic(err)
	}
	a := m.Action("order.cancel")
	fmt.Println(a.ToolName(), a.RiskLevel, a.Param("order_id").Required)

	_, err = manifest.Parse([]byte(`{"version":"1.0.0","actions":[{"intent":"order.cancel","entity":"order",
	  "action_type":"write","description":"Cancel","confirmation_requried":true}]}`))
	fmt.Println(err)
	// Output:
	// order_cancel high true
	// invalid AXAG manifest: 1 problem(s)
	//   /actions/0/confirmation_requried: unknown field "confirmation_requried" (did you mean "confirmation_required"?)
}
