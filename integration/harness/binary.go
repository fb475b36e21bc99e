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

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

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
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, err = os.MkdirTemp("", "runtime-bin-"); err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(buildDir, "runtime")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/runtime")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building the runtime: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return binPath
}

var (
	workerOnce sync.Once
	workerPath string
	workerErr  error
)

// TestWorker returns the path of the test worker (integration/testworker), built once per
// test process: an HTTP server on $HOST:$PORT that reports what it received.
func TestWorker(tb testing.TB) string {
	tb.Helper()
	workerOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			workerErr = err
			return
		}
		dir, err := os.MkdirTemp("", "runtime-testworker-")
		if err != nil {
			workerErr = err
			return
		}
		workerPath = filepath.Join(dir, "testworker")
		cmd := exec.Command("go", "build", "-o", workerPath, "./integration/testworker")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			workerErr = fmt.Errorf("building the test worker: %v\n%s", err, out)
		}
	})
	if workerErr != nil {
		tb.Fatal(workerErr)
	}
	return workerPath
}

// Cleanup removes a binary built by Binary; call it from TestMain after the tests.
func Cleanup() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	if workerPath != "" {
		_ = os.RemoveAll(filepath.Dir(workerPath))
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
