// Command peers-gateway runs the same MCP tool calls through direct, a TCP
// relay, httputil's ReverseProxy, ToolHive's authorization chain and
// "axgate mcp", one process each, in one run interleaved by rounds.
//
// It checks every engine before it times it (a read allowed for the role, a
// write refused by an argument rule, a read without the role refused: the
// same outcomes on every enforcing engine, else the run fails), then reports
// throughput ratios, added p50 and p99, CPU time per call and peak RSS of
// each hop's process. It also times "axgate serve" against ReverseProxy, and
// one serve replica against two sharing one Redis, with the Redis commands
// and round trips per call counted by a relay in front of Redis. Run it with
// .ci/peers-gateway.sh; bench/README.md says what each number means.
package main
