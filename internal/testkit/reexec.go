package testkit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// reexecVar marks the environment of a test binary that Reexec starts as a program.
const reexecVar = "TESTKIT_REEXEC"

// Reexeced reports whether Reexec started this test binary: TestMain then runs the program
// (for instance Caddy's command line, with the commands under test registered) instead of the
// tests, so that a test sees a real process's output and exit code without building a binary.
func Reexeced() bool { return os.Getenv(reexecVar) == "1" }

// Reexec runs this test binary as the program TestMain runs when Reexeced, with args and the
// environment env (nothing else of the test's but PATH), and returns its output and exit code.
func Reexec(tb testing.TB, env []string, args ...string) (stdout, stderr string, code int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a safety net
	defer cancel()
	stdout, stderr, code, err := Run(ReexecCommand(ctx, env, args...))
	if err != nil {
		tb.Fatalf("running %v: %v", args, err)
	}
	return stdout, stderr, code
}

// Run runs cmd and returns its output and exit code; the error says why it could not run.
func Run(cmd *exec.Cmd) (stdout, stderr string, code int, err error) {
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		code, err = exit.ExitCode(), nil
	}
	return out.String(), errOut.String(), code, err
}

// ReexecCommand is Reexec's command, to start and read from as it runs.
func ReexecCommand(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append([]string{reexecVar + "=1", "PATH=" + os.Getenv("PATH")}, env...)
	return cmd
}
