package axgate_test

import "github.com/axgate/axgate"

// coreTestOptions are the options the core tests need on shop-full.json (testdata/axag)
// once the policy gates exist: its preconditions are prose with no checker.
func coreTestOptions() []axgate.Option { return []axgate.Option{axgate.WithUnboundConditions()} }
