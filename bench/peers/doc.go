// Command peers measures axgate's decisions beside the same decisions written
// for OPA, for Cedar and by hand.
//
// Each engine decides the same calls on the manifest testdata/docs.json
// (roles, tenant, parameter validation, a cross-field constraint and an
// EdDSA confirmation token bound to the arguments); every engine is checked
// to give the expected decision before it is timed. The engines then run
// interleaved, round by round (the order rotates each round), and the table
// gives, per case, each engine's median CPU time per call and the median of
// the per-round ratios peer/axgate.
//
// It is a module of its own, outside go.work, so that OPA and cedar-go do not
// raise the workspace's dependency versions:
//
//	cd bench/peers && GOWORK=off go run . -rounds 8
//
// -benchtime is the wall time of one engine on one case in one round.
package main
