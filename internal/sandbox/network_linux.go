package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// An isolated network (worker_network isolated): the launcher is cloned into a network
// namespace of its own, where the only interface is its loopback, so a worker reaches neither
// another worker's ports, nor the runtime's, nor any other address. It serves on a unix socket
// the runtime creates in a folder only the runtime may open and hands over as descriptor 3,
// the way systemd's socket activation does (LISTEN_FDS=1, LISTEN_PID). The runtime connects
// to that socket by its path; the worker needs only the descriptor, so no worker can reach any
// socket's path, and accept() on a passed listener needs no socket of its own (which the
// seccomp layer refuses for AF_UNIX).

// activateArg is the first argument that runs the runtime binary as the socket activation
// shim: it sets LISTEN_PID to its own pid and executes the worker's program in its place.
// LISTEN_PID must be the worker's pid, known only after the fork, and Go cannot run code
// between fork and exec; execve keeps the pid, so the shim's pid is the worker's. The shim
// runs already confined (it is started from the launcher's confined thread, as the worker
// is), so Landlock must let it execute the runtime binary: one file rule, read and execute.
// That gives a worker nothing it could not have anyway: it may run any program of its own
// folder, and the binary holds no secret.
const activateArg = "__runtime_socket_activation"

func init() {
	if len(os.Args) < 4 || os.Args[1] != activateArg {
		return
	}
	os.Exit(activate(os.Args[2], os.Args[3:]))
}

// activate executes the program at path with argv, with the listener (descriptor 3) announced
// in LISTEN_FDS and LISTEN_PID; any LISTEN_* the manifest set is replaced.
func activate(path string, argv []string) int {
	env := []string{"LISTEN_FDS=1", "LISTEN_PID=" + strconv.Itoa(os.Getpid())}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LISTEN_") {
			env = append(env, kv)
		}
	}
	err := syscall.Exec(path, argv, env)
	fmt.Fprintf(os.Stderr, "sandbox: starting %s: %v\n", path, err)
	return 127
}

// listenerFD is the launcher's descriptor of the worker's listener: after the launch spec (3).
const listenerFD = 4

// activation returns how the launcher starts a worker that gets a listener: through the
// shim, with the listener as its descriptor 3.
func activation(path string, argv []string, files []*os.File) (string, []string, []*os.File) {
	syscall.CloseOnExec(listenerFD) // only as descriptor 3, never as a stray 4
	listener := os.NewFile(listenerFD, "listener")
	return "/proc/self/exe", append([]string{"runtime", activateArg, path}, argv...), append(files, listener)
}

// loopbackUp brings up the loopback interface of the launcher's new network namespace, where
// it starts down; it needs the launcher's CAP_NET_ADMIN, so it runs before any confinement.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bringing up the loopback: %v", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing up the loopback: %v", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing up the loopback: %v", err)
	}
	return nil
}

// socketFolder creates the folder of the workers' listeners, which only the runtime's account
// may open. It lives in the system's temporary folder, whose short path keeps every socket
// path within the 107 bytes a unix socket address holds.
func socketFolder() (string, error) {
	dir, err := os.MkdirTemp("", "runtime-net-")
	if err != nil {
		return "", fmt.Errorf("worker_network isolated: creating the folder of worker sockets: %v", err)
	}
	return dir, nil
}

// listen creates a listening unix socket at path. It is a blocking socket, as systemd passes
// them, so a program that accepts on it without setting it non-blocking works too.
func listen(path string) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("worker socket: %v", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("worker socket %s: %v", path, err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		unix.Close(fd)
		os.Remove(path)
		return nil, fmt.Errorf("worker socket %s: %v", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// pending reports whether connections wait in the listener's queue, not yet accepted: a
// listening socket polls readable exactly then. A closed listener has none.
func pending(listener *os.File) bool {
	rc, err := listener.SyscallConn()
	if err != nil {
		return false
	}
	waiting := false
	_ = rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		waiting = err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0
	})
	return waiting
}

// socketPath is the path of the listener of the worker numbered n.
func socketPath(folder string, n int64) string {
	return filepath.Join(folder, fmt.Sprintf("w%d.sock", n))
}
