// Command hello is one Go program that answers "Hello, world" both ways a worker may run: as a
// WebAssembly worker (built with GOOS=wasip1 GOARCH=wasm: a CGI program run for each request,
// cgi_wasip1.go) and as a process worker (an HTTP server on $HOST:$PORT, server.go), so
// benchmarks compare the two on the same code. The WebAssembly build leaves net/http out, as a
// small worker would: it is about 2 MB.
package main

// greeting is the answer's body, the same both ways.
func greeting() string { return "Hello, world\n" }
