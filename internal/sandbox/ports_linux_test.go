package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCheckListener tells a port no one listens on, one the worker's own processes listen on,
// and one another process listens on, whose pid the error names.
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

	for _, tc := range []struct {
		name   string
		p      *Process
		port   int
		ours   bool
		errPID int // the pid a *PortTakenError names, 0 for no error
	}{
		{"nobody listens", stranger, freePort, false, 0},
		{"the worker listens", self, taken, true, 0},
		{"another process listens", stranger, taken, false, os.Getpid()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, err := tc.p.CheckListener(tc.port)
			if ours != tc.ours {
				t.Errorf("CheckListener(%d) = %v, want %v", tc.port, ours, tc.ours)
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
