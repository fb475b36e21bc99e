package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCheckListener tells a port no one listens on, one the worker's own processes listen on,
// and one another process listens on, whose pid the error names; and, where the kernel names
// the cgroup a socket was made in, a listener made in the worker's cgroup (the runtime need not
// look into the worker's processes) and one made in another cgroup, the worker's only when its
// processes hold it.
func TestCheckListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freePort := free.Addr().(*net.TCPAddr).Port
	free.Close()

	other := exec.Command("/bin/sleep", "30") // a worker holding no listener
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	self := &Process{cmd: &exec.Cmd{Process: &os.Process{Pid: os.Getpid()}}}
	stranger := &Process{cmd: other}
	// The test's own cgroup, which its listener was made in, and another one.
	own, another, noCgroup := testCgroups(t, taken)
	inCgroup := func(p *Process, id uint64) *Process { return &Process{cmd: p.cmd, cgroup: id} }

	for _, tc := range []struct {
		name   string
		p      *Process
		port   int
		ours   bool
		errPID int  // the pid a *PortTakenError names, 0 for no error
		cgroup bool // needs cgroup ids
	}{
		{"nobody listens", stranger, freePort, false, 0, false},
		{"the worker listens", self, taken, true, 0, false},
		{"another process listens", stranger, taken, false, os.Getpid(), false},
		{"made in the worker's cgroup", inCgroup(stranger, own), taken, true, 0, true},
		{"made in another cgroup", inCgroup(stranger, another), taken, false, os.Getpid(), true},
		{"made in another cgroup, held by the worker", inCgroup(self, another), taken, true, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cgroup && noCgroup != "" {
				t.Skip(noCgroup)
			}
			held, err := tc.p.CheckListener(tc.port)
			if ours := len(held) > 0; ours != tc.ours {
				t.Errorf("CheckListener(%d) = %v, want listeners: %v", tc.port, held, tc.ours)
			}
			var pt *PortTakenError
			switch {
			case tc.errPID == 0 && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.errPID != 0 && !errors.As(err, &pt):
				t.Errorf("error %v, want a PortTakenError", err)
			case tc.errPID != 0 && (pt.Port != tc.port || !strings.HasPrefix(pt.Owner, fmt.Sprintf("pid %d ", tc.errPID))):
				t.Errorf("PortTakenError names port %d and owner %q, want %d and pid %d", pt.Port, pt.Owner, tc.port, tc.errPID)
			}
		})
	}
}

// testCgroups returns the id of the test's v2 cgroup, where the listener on port was made, and
// of a new cgroup beside it (removed when the test ends); else why there are none.
func testCgroups(t *testing.T, port int) (own, another uint64, missing string) {
	t.Helper()
	mount := cgroupMounts()["cgroup2"]
	path, ok := ownCgroups()[""]
	if mount == "" || !ok {
		return 0, 0, "no cgroup v2 here"
	}
	dir := filepath.Join(mount, path)
	found, err := diagListeners(unix.AF_INET, port)
	if err != nil || len(found) != 1 || found[0].cgroup == 0 {
		return 0, 0, fmt.Sprintf("the kernel names no socket's cgroup (Linux 5.7 on): %v, %v", found, err)
	}
	if own = cgroupID(dir); own != found[0].cgroup {
		t.Fatalf("the listener was made in cgroup %d, the test's cgroup %s has id %d", found[0].cgroup, dir, own)
	}
	other, err := os.MkdirTemp(dir, "ports-test-")
	if err != nil {
		return 0, 0, fmt.Sprintf("no cgroup may be made here: %v", err)
	}
	t.Cleanup(func() { os.Remove(other) })
	return own, cgroupID(other), ""
}

// TestDescriptorWarning: the start-up warning comes when one worker's processes may together
// hold more than half the runtime's descriptor limit, or have no bound, and names the settings.
func TestDescriptorWarning(t *testing.T) {
	var own unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &own); err != nil || own.Cur == unix.RLIM_INFINITY {
		t.Skipf("no finite descriptor limit here (%v)", err)
	}
	for _, tc := range []struct {
		name string
		caps Limits
		warn bool
	}{
		{"well below", Limits{Files: 1, Processes: 2}, false},
		{"at half", Limits{Files: int(own.Cur / 2), Processes: 1}, false},
		{"past half", Limits{Files: int(own.Cur/2) + 1, Processes: 1}, true},
		{"no file limit", Limits{Processes: 2}, true},
		{"no process limit", Limits{Files: 2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, warned := descriptorWarning(tc.caps)
			if warned != tc.warn {
				t.Fatalf("warned = %v, want %v (%q)", warned, tc.warn, w.Text)
			}
			if warned && (!strings.Contains(w.Text, "worker_max_files") || !strings.Contains(w.Text, "worker_processes") || w.Docs == "") {
				t.Errorf("the warning %q does not name the settings or link its paragraph (%q)", w.Text, w.Docs)
			}
		})
	}
}

// TestStillListens: a listener the worker opens later on its port (another address) joins its
// known ones, one another process holds is a PortTakenError, and a port nobody listens on any
// more is an error.
func TestStillListens(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	self := &Process{cmd: &exec.Cmd{Process: &os.Process{Pid: os.Getpid()}}}
	known, err := self.CheckListener(port)
	if err != nil || len(known) != 1 {
		t.Fatalf("CheckListener = %v, %v", known, err)
	}
	if got, err := self.StillListens(port, known); err != nil || !slices.Equal(got, known) {
		t.Errorf("StillListens with the same listener = %v, %v", got, err)
	}
	l6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(port)))
	if err != nil {
		t.Logf("no IPv6 here (%v): a second listener is not tried", err)
	} else {
		got, err := self.StillListens(port, known)
		if err != nil || len(got) != 2 {
			t.Errorf("StillListens with a second listener of its own = %v, %v", got, err)
		}
		other := exec.Command("/bin/sleep", "30")
		if err := other.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { other.Process.Kill(); other.Wait() }()
		var taken *PortTakenError
		if _, err := (&Process{cmd: other}).StillListens(port, known); !errors.As(err, &taken) {
			t.Errorf("StillListens with another process's listener = %v, want a PortTakenError", err)
		}
		l6.Close()
	}
	l.Close()
	if _, err := self.StillListens(port, known); err == nil {
		t.Error("StillListens on a port nobody listens on is no error")
	}
}
