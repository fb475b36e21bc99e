package testkit

import (
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

// server is a server process of a test, started again by Restart on the same command line as
// a server back from an outage; it stops when the test ends.
type server struct {
	args  []string // the whole command line
	env   []string // added to the test's environment
	dir   string
	ready func() error // nil once the server answers
	cmd   *exec.Cmd
	out   *Buffer
}

// run starts the server and waits until it answers.
func (s *server) run(tb testing.TB) {
	tb.Helper()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	s.cmd.Env = append(os.Environ(), s.env...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.Dir = s.dir
	if err := s.cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", filepath.Base(s.args[0]), err)
	}
	EventuallyNil(tb, 30*time.Second, func() error {
		if s.cmd.ProcessState != nil {
			return fmt.Errorf("%s exited: %s\n%s", filepath.Base(s.args[0]), s.cmd.ProcessState, s.out)
		}
		return s.ready()
	})
}

// Restart starts a stopped server again, as one back from an outage.
func (s *server) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop()
	s.run(tb)
}

// Stop stops the server, as an outage would; tests may call it early.
func (s *server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil && s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// Output is what the server printed.
func (s *server) Output() string { return s.out.String() }
