package launch

import (
	"os"
	"syscall"
	"testing"
)

// TestCloexecEach: the fallback for kernels without close_range marks every descriptor from
// 3 up close-on-exec.
func TestCloexecEach(t *testing.T) {
	fds := make([]int, 3)
	for i := range fds {
		fd, err := syscall.Open(os.DevNull, syscall.O_RDONLY, 0) // without O_CLOEXEC
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		fds[i] = fd
	}
	if err := cloexecEach(); err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if flags, err := fcntl(fd, syscall.F_GETFD); err != nil || flags&syscall.FD_CLOEXEC == 0 {
			t.Errorf("descriptor %d: flags %d, %v", fd, flags, err)
		}
	}
	if flags, _ := fcntl(2, syscall.F_GETFD); flags&syscall.FD_CLOEXEC != 0 {
		t.Error("stderr was marked close-on-exec")
	}
}

func fcntl(fd, cmd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(cmd), 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
