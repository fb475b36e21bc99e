//go:build amd64 || arm64 || riscv64

package sandbox

import (
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/testkit"
	"golang.org/x/sys/unix"
)

// TestWorkerSeccomp runs the test worker's escape attempts under the sandbox: every call of
// the filter's table answers the table's errno, the calls workers need go through, and the
// start-up log names exactly the table's entries.
func TestWorkerSeccomp(t *testing.T) {
	sb := newSandbox(t)
	if len(sb.Layers().Seccomp) == 0 {
		t.Skipf("no seccomp filter here: %v", sb.Layers().Warnings)
	}
	if !strings.Contains(sb.Layers().String(), "seccomp (refused: "+strings.Join(seccompRefusals(), ", ")+")") {
		t.Errorf("layers %q do not name the filter's refusals", sb.Layers())
	}
	var got map[string]string
	runTestWorker(t, sb, "syscalls", &got)
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			attempt, ok := testkit.SeccompAttempts[r.name]
			if !ok {
				t.Fatalf("testkit.SeccompAttempts does not try %q", r.name)
			}
			if want := unix.ErrnoName(r.errno); attempt.Errno != want {
				t.Errorf("testkit.SeccompAttempts expects %s, the filter answers %s", attempt.Errno, want)
			}
			for _, call := range attempt.Calls {
				if got[call] != attempt.Errno {
					t.Errorf("%s = %q, want %s", call, got[call], attempt.Errno)
				}
			}
		})
	}
	if len(testkit.SeccompAttempts) != len(refusals) {
		t.Errorf("testkit.SeccompAttempts tries %d refusals, the filter has %d", len(testkit.SeccompAttempts), len(refusals))
	}
	for _, call := range testkit.SeccompAllowed {
		if got[call] != "ok" {
			t.Errorf("%s = %q, want ok", call, got[call])
		}
	}
}

// TestSeccompTable: no syscall sits in two entries, where the second would never be reached.
func TestSeccompTable(t *testing.T) {
	seen := map[uintptr]string{}
	for _, r := range refusals {
		if r.name == "" || len(r.syscalls) == 0 || r.errno == 0 {
			t.Errorf("incomplete entry %+v", r)
		}
		for _, nr := range r.syscalls {
			if other, ok := seen[nr]; ok {
				t.Errorf("syscall %d is in %q and %q", nr, other, r.name)
			}
			seen[nr] = r.name
		}
	}
}
