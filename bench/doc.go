// Package bench holds benchmarks that compare axgate with its bare
// baselines in one run. See README.md for the commands and the results.
package bench
