package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Program is a command of this module that tests build once per test process.
type Program struct {
	pkg  string   // package path inside the module, e.g. ./cmd/runtime
	env  []string // added to go build's environment, e.g. GOOS=wasip1
	ext  string   // the binary's extension, e.g. .wasm
	once sync.Once
	path string
	err  error
}

// NewProgram returns the program whose main package is pkg, a path inside the module such
// as ./cmd/runtime; nothing is built until Path is called.
func NewProgram(pkg string) *Program {
	p := &Program{pkg: pkg}
	programs.Lock()
	programs.list = append(programs.list, p)
	programs.Unlock()
	return p
}

var programs struct {
	sync.Mutex
	list []*Program
}

// NewWasmProgram returns the WebAssembly module built from pkg for WASI preview 1
// (GOOS=wasip1 GOARCH=wasm), with the Go toolchain alone.
func NewWasmProgram(pkg string) *Program {
	p := NewProgram(pkg)
	p.env, p.ext = []string{"GOOS=wasip1", "GOARCH=wasm"}, ".wasm"
	return p
}

var (
	testWorker = NewProgram("./internal/testkit/testworker")
	testWasm   = NewWasmProgram("./internal/testkit/testwasm")
	testWasmDB = NewWasmProgram("./internal/testkit/testwasmdb")
	hello      = NewProgram("./internal/testkit/hello")
	helloWasm  = NewWasmProgram("./internal/testkit/hello")
)

// Path builds the program on first use and returns the path of its binary.
func (p *Program) Path(tb testing.TB) string {
	tb.Helper()
	p.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			p.err = err
			return
		}
		dir, err := os.MkdirTemp("", "runtime-test-bin-")
		if err != nil {
			p.err = err
			return
		}
		p.path = filepath.Join(dir, filepath.Base(p.pkg)+p.ext)
		cmd := exec.Command("go", "build", "-o", p.path, p.pkg)
		cmd.Dir = root
		if len(p.env) > 0 {
			cmd.Env = append(os.Environ(), p.env...)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			p.err = fmt.Errorf("building %s: %w\n%s", p.pkg, err, out)
		}
	})
	if p.err != nil {
		tb.Fatal(p.err)
	}
	return p.path
}

// TestWorker returns the path of the test worker (testkit/testworker), built once per test
// process: an HTTP server on $HOST:$PORT that reports what it received.
func TestWorker(tb testing.TB) string {
	tb.Helper()
	return testWorker.Path(tb)
}

// TestWasm returns the path of the test WebAssembly module (testkit/testwasm), built once per
// test process: a CGI program that reports what it received and misbehaves on request.
func TestWasm(tb testing.TB) string {
	tb.Helper()
	return testWasm.Path(tb)
}

// TestWasmDB returns the path of the test WebAssembly module that keeps rows in its database
// through the guest driver (testkit/testwasmdb), built once per test process.
func TestWasmDB(tb testing.TB) string {
	tb.Helper()
	return testWasmDB.Path(tb)
}

// Hello returns the path of the hello program (testkit/hello) built for this machine, a
// process worker answering "Hello, world"; HelloWasm the same program as a WebAssembly module.
func Hello(tb testing.TB) string {
	tb.Helper()
	return hello.Path(tb)
}

// HelloWasm returns the path of the hello program built for WASI preview 1 (see Hello).
func HelloWasm(tb testing.TB) string {
	tb.Helper()
	return helloWasm.Path(tb)
}

// Cleanup removes every program built in this test process; call it from TestMain after the
// tests.
func Cleanup() {
	programs.Lock()
	defer programs.Unlock()
	for _, p := range programs.list {
		if p.path != "" {
			_ = os.RemoveAll(filepath.Dir(p.path))
		}
	}
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the runtime module")
	}
	return filepath.Dir(gomod), nil
}
