package harness

import "github.com/caddy-runtime/runtime/internal/testkit"

// The test kit's pieces under the names the integration tests and benchmarks have always
// used; the kit itself serves the engine's unit tests too.
type (
	// File is one entry of a test archive.
	File = testkit.File
	// Buffer collects a process's output; it is safe for concurrent writes.
	Buffer = testkit.Buffer
)

var (
	TarGz         = testkit.TarGz         // a gzip-compressed tar archive, entries exactly as given
	Zip           = testkit.Zip           // a zip archive, entries exactly as given
	Eventually    = testkit.Eventually    // polls a condition until it holds or the timeout fails the test
	EventuallyNil = testkit.EventuallyNil // polls a check until it returns nil, else fails with its last error
	FreePort      = testkit.FreePort      // a 127.0.0.1 TCP port not handed out before in this process
	ServeUnix     = testkit.ServeUnix     // a unix socket answering every connection with one string
	TestWorker    = testkit.TestWorker    // the test worker, built once per test process
	BunBinary     = testkit.BunBinary     // Bun ($BUN, else make deps's), skipping the test without it (failing it in CI)
	TestWasm      = testkit.TestWasm      // the test WebAssembly worker, built once per test process
	TestWasmDB    = testkit.TestWasmDB    // the test WebAssembly worker of the guest database driver
	TinyWasm      = testkit.TinyWasm      // a WebAssembly module of a few hundred bytes, emitted byte by byte
	Hello         = testkit.Hello         // a Go hello-world process worker, built once per test process
	HelloWasm     = testkit.HelloWasm     // the same program as a WebAssembly worker
	Cleanup       = testkit.Cleanup       // removes the programs built here; call it from TestMain
	Alive         = testkit.Alive         // whether a process exists, on Unix and Windows alike
)
