package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// An isolated network (worker_network isolated): the launcher is cloned into a network
// namespace of its own, where the only interface is its loopback, so a worker reaches neither
// another worker's ports, nor the runtime's, nor any other address. It serves on a unix socket
// the runtime creates in a folder only the runtime may open and hands over as descriptor 3,
// the way systemd's socket activation does (LISTEN_FDS=1, LISTEN_PID, which the exec gate sets:
// the worker's pid is known only after the fork). The runtime connects
// to that socket by its path; the worker needs only the descriptor, so no worker can reach any
// socket's path, and accept() on a passed listener needs no socket of its own (which the
// seccomp layer refuses for AF_UNIX).

// listenEnv is env with the listener (descriptor 3) announced in LISTEN_FDS and LISTEN_PID, the
// pid of the calling process, which executes the worker's program and so is the worker; any
// LISTEN_* the manifest set is replaced.
func listenEnv(env []string) []string {
	out := []string{ListenPrefix + "FDS=1", ListenPrefix + "PID=" + strconv.Itoa(os.Getpid())}
	for _, kv := range env {
		if !strings.HasPrefix(kv, ListenPrefix) {
			out = append(out, kv)
		}
	}
	return out
}

// listenerFD is the launcher's descriptor of the worker's listener: after the launch spec (3).
const listenerFD = 4

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
