// Package harness runs the real runtime binary for black-box tests and benchmarks: it builds
// the binary once, starts it with a Caddyfile on a free 127.0.0.1 port with temporary data
// folders, waits for readiness, speaks HTTP to it and validates every response against the
// runtime's own OpenAPI document.
package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// built is a program built once per test process.
type built struct {
	pkg  string // package path inside the module, e.g. ./cmd/runtime
	once sync.Once
	path string
	err  error
}

var (
	runtimeBinary = &built{pkg: "./cmd/runtime"}
	testWorker    = &built{pkg: "./integration/testworker"}
)

// get builds the program on first use and returns its path.
func (b *built) get(tb testing.TB) string {
	tb.Helper()
	b.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			b.err = err
			return
		}
		dir, err := os.MkdirTemp("", "runtime-test-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, filepath.Base(b.pkg))
		cmd := exec.Command("go", "build", "-o", b.path, b.pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building %s: %v\n%s", b.pkg, err, out)
		}
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

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
	return runtimeBinary.get(tb)
}

// TestWorker returns the path of the test worker (integration/testworker), built once per
// test process: an HTTP server on $HOST:$PORT that reports what it received.
func TestWorker(tb testing.TB) string {
	tb.Helper()
	return testWorker.get(tb)
}

// Cleanup removes the programs built here; call it from TestMain after the tests.
func Cleanup() {
	for _, b := range []*built{runtimeBinary, testWorker} {
		if b.path != "" {
			_ = os.RemoveAll(filepath.Dir(b.path))
		}
	}
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the runtime module")
	}
	return filepath.Dir(gomod), nil
}
