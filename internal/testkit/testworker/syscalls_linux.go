//go:build amd64 || arm64 || riscv64

package main

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openFDs lists this process's descriptors with what each points at, read before anything
// of main runs, so the Go runtime's own later descriptors (its poller) are not among them.
func openFDs() map[string]string {
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return map[string]string{"error": err.Error()}
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return map[string]string{"error": err.Error()}
	}
	out := map[string]string{}
	for _, name := range names {
		if name == strconv.Itoa(int(dir.Fd())) {
			continue // the listing itself
		}
		target, err := os.Readlink("/proc/self/fd/" + name)
		if err != nil {
			target = err.Error()
		}
		out[name] = target
	}
	return out
}

// trySyscalls makes each call a hostile worker would use to leave its sandbox, and a few it
// must keep, and reports for each "ok" or the name of the errno that stopped it. The
// arguments are harmless: seccomp answers at the call's entry, before the kernel looks at
// them, so an invalid descriptor or a null pointer still tells a refusal by the filter (its
// errno) from one by the kernel (EBADF, EFAULT and the like).
func trySyscalls() map[string]string {
	out := map[string]string{}
	try := func(name string, err error) {
		out[name] = "ok"
		if err != nil {
			var errno syscall.Errno
			if errors.As(err, &errno) {
				out[name] = unix.ErrnoName(errno)
			} else {
				out[name] = err.Error()
			}
		}
	}
	raw := func(name string, nr uintptr, args ...uintptr) {
		var a [6]uintptr
		copy(a[:], args)
		r, _, errno := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		if errno != 0 {
			try(name, errno)
			return
		}
		try(name, nil)
		if name == "io_uring_setup" || name == "userfaultfd" {
			unix.Close(int(r))
		}
	}
	str := func(s string) uintptr { p, _ := unix.BytePtrFromString(s); return uintptr(unsafe.Pointer(p)) }
	bad := ^uintptr(0) // descriptor -1

	// io_uring: its own socket, connect and open calls would pass every other check.
	var params [120]byte // struct io_uring_params
	raw("io_uring_setup", unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)))
	raw("io_uring_enter", unix.SYS_IO_URING_ENTER, bad)
	raw("io_uring_register", unix.SYS_IO_URING_REGISTER, bad)

	for _, s := range []struct {
		name   string
		family uintptr
		typ    int
	}{
		{"socket AF_UNIX", unix.AF_UNIX, unix.SOCK_STREAM},
		// The kernel reads the family as an int: the upper half of the register is ignored.
		{"socket AF_UNIX with the upper half set", 1<<32 | unix.AF_UNIX, unix.SOCK_STREAM},
		{"socket AF_VSOCK", unix.AF_VSOCK, unix.SOCK_STREAM},
		{"socket AF_PACKET", unix.AF_PACKET, unix.SOCK_DGRAM},
		{"socket AF_NETLINK", unix.AF_NETLINK, unix.SOCK_RAW},
		{"socket AF_INET", unix.AF_INET, unix.SOCK_STREAM},
	} {
		fd, _, errno := unix.Syscall(unix.SYS_SOCKET, s.family, uintptr(s.typ|unix.SOCK_CLOEXEC), 0)
		if errno != 0 {
			try(s.name, errno)
			continue
		}
		unix.Close(int(fd))
		try(s.name, nil)
	}
	// A port shared with SO_REUSEPORT is shared with any socket of the same account that sets it.
	if fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err == nil {
		try("setsockopt SO_REUSEPORT", unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1))
		try("setsockopt SO_REUSEADDR", unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1))
		unix.Close(fd)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		unix.Close(pair[0])
		unix.Close(pair[1])
	}
	try("socketpair AF_UNIX", err)

	// Namespaces, each in a child that would run /bin/true inside them.
	try("unshare", runIn(&syscall.SysProcAttr{Unshareflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNET}))
	try("clone with namespace flags", runIn(&syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS}))
	try("clone without namespace flags", runIn(&syscall.SysProcAttr{}))
	raw("setns", unix.SYS_SETNS, bad, 0)
	raw("clone3", unix.SYS_CLONE3, 0, 0)

	// Another process's memory and descriptors: a child of this worker, which nothing else
	// would stop.
	try("ptrace", ptraceChild())
	var b [1]byte
	local := []unix.Iovec{{Base: &b[0], Len: 1}}
	remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&params[0])), Len: 1}}
	_, err = unix.ProcessVMReadv(os.Getpid(), local, remote, 0)
	try("process_vm_readv", err)
	_, err = unix.ProcessVMWritev(os.Getpid(), local, remote, 0)
	try("process_vm_writev", err)
	try("pidfd_getfd", pidfdGetfd())

	raw("bpf", unix.SYS_BPF, unix.BPF_MAP_CREATE, 0, 0)
	raw("perf_event_open", unix.SYS_PERF_EVENT_OPEN, 0, 0, bad, bad, 0)
	_, err = unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	try("keyctl", err)
	_, err = unix.AddKey("user", "runtime-test", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
	try("add_key", err)
	raw("request_key", unix.SYS_REQUEST_KEY, str("user"), str("runtime-test-missing"), 0, 0)
	raw("userfaultfd", unix.SYS_USERFAULTFD, unix.O_CLOEXEC|1) // UFFD_USER_MODE_ONLY
	raw("init_module", unix.SYS_INIT_MODULE, 0, 0, str(""))
	raw("finit_module", unix.SYS_FINIT_MODULE, bad, str(""), 0)
	raw("delete_module", unix.SYS_DELETE_MODULE, str("runtime_test_missing"), 0)
	raw("kexec_load", unix.SYS_KEXEC_LOAD, 0, 0, 0, 0)
	raw("kexec_file_load", unix.SYS_KEXEC_FILE_LOAD, bad, bad, 0, str(""), 0)
	return out
}

// runIn runs /bin/true with attr and reports whether it could start.
func runIn(attr *syscall.SysProcAttr) error {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = attr
	return cmd.Run()
}

// ptraceChild attaches to a child of this worker and stops it.
func ptraceChild() error {
	p, err := startSelf("sleeper", false)
	if err != nil {
		return err
	}
	defer p.Wait()
	defer p.Kill()
	runtime.LockOSThread() // ptrace requests come from the tracing thread
	defer runtime.UnlockOSThread()
	return unix.PtraceAttach(p.Pid)
}

// pidfdGetfd copies this process's own stdout through a pidfd, as it would another's.
func pidfdGetfd() error {
	pidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return err
	}
	defer unix.Close(pidfd)
	fd, err := unix.PidfdGetfd(pidfd, 1, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}
