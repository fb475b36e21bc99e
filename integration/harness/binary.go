// Package harness runs the real runtime binary for black-box tests and benchmarks: it builds
// the binary once, starts it with a Caddyfile on a free 127.0.0.1 port with temporary data
// folders, waits for readiness, speaks HTTP to it and validates every response against the
// runtime's own OpenAPI document.
package harness

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

var runtimeBinary = testkit.NewProgram("./cmd/runtime")

// Binary returns the path of the runtime binary: $RUNTIME_BINARY when set (make test builds
// it once for every package), else a binary built from this checkout once per test process.
func Binary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("RUNTIME_BINARY"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			tb.Fatal(err)
		}
		return abs
	}
	return runtimeBinary.Path(tb)
}
