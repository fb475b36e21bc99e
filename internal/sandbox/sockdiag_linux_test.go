package sandbox

import (
	"net"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDiagListeners: sock_diag lists the same listeners on a port as /proc/net/tcp{,6}, for
// IPv4 and IPv6, and none on a port nobody listens on.
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
	var diag []uint64
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
	slices.Sort(diag)
	slices.Sort(fromProc)
	if len(diag) == 0 || !slices.Equal(diag, fromProc) {
		t.Errorf("sock_diag lists %v on port %d, /proc/net/tcp %v", diag, port, fromProc)
	}
	l4.Close()
	if got, err := diagListeners(unix.AF_INET, port); err != nil || len(got) != 0 {
		t.Errorf("after the close, sock_diag lists %v (%v)", got, err)
	}
}
