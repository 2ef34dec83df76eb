package gateway

// WithoutDirect turns the direct path off (withoutDirect): the benchmark's
// path=gateway-sdk and TestDirectConformance's baseline.
var WithoutDirect = withoutDirect
