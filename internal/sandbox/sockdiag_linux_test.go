package sandbox

import (
	"cmp"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDiagListeners: sock_diag lists the same listeners on a port as /proc/net/tcp{,6}, for
// IPv4 and IPv6, with their uid and, where the kernel tells, the test's own cgroup; and none on
// a port nobody listens on.
func TestDiagListeners(t *testing.T) {
	l4, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l4.Close()
	port := l4.Addr().(*net.TCPAddr).Port
	if l6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(port))); err == nil {
		defer l6.Close()
	}
	var diag []listener
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		got, err := diagListeners(family, port)
		if err != nil {
			t.Skipf("no sock_diag here: %v", err)
		}
		diag = append(diag, got...)
	}
	fromProc, err := procListeners(port)
	if err != nil {
		t.Fatal(err)
	}
	byInode := func(a, b listener) int { return cmp.Compare(a.inode, b.inode) }
	slices.SortFunc(diag, byInode)
	slices.SortFunc(fromProc, byInode)
	sameSocket := func(a, b listener) bool { return a.inode == b.inode && a.uid == b.uid }
	if len(diag) == 0 || !slices.EqualFunc(diag, fromProc, sameSocket) {
		t.Errorf("sock_diag lists %v on port %d, /proc/net/tcp %v", diag, port, fromProc)
	}
	for _, l := range diag {
		if l.uid != uint32(os.Geteuid()) {
			t.Errorf("the listener %d is uid %d's, want the test's %d", l.inode, l.uid, os.Geteuid())
		}
	}
	if mount, path := cgroupMounts()["cgroup2"], ownCgroups()[""]; mount != "" && diag[0].cgroup != 0 {
		want := cgroupID(filepath.Join(mount, path))
		for _, l := range diag {
			if l.cgroup != want {
				t.Errorf("the listener %d was made in cgroup %d, want the test's %s, %d", l.inode, l.cgroup, path, want)
			}
		}
	} else {
		t.Logf("no socket's cgroup here (cgroup2 mounted at %q; the kernel tells from Linux 5.7)", mount)
	}
	l4.Close()
	if got, err := diagListeners(unix.AF_INET, port); err != nil || len(got) != 0 {
		t.Errorf("after the close, sock_diag lists %v (%v)", got, err)
	}
}
