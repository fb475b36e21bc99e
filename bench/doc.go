// Package bench holds throughput benchmarks of the real runtime binary over HTTP: the harness
// in integration/harness starts the binary, and the benchmarks load it with a keep-alive
// client. Run them with make bench, which writes the results to bench/RESULTS.md.
package bench
