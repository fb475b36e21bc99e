package sandbox

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// An isolated network (worker_network isolated): the launcher is cloned into a network
// namespace of its own, where the only interface is its loopback, so a worker reaches neither
// another worker's ports, nor the runtime's, nor any other address. It serves on a unix socket
// the runtime creates in a folder only the runtime may open and hands over as descriptor 3,
// the way systemd's socket activation does (LISTEN_FDS=1, LISTEN_PID, which the launcher's
// stage sets to its own pid before it executes the worker's program in its place). The same
// hand-over serves workers of the host's network whose manifest asks for it (listen: socket).
// The runtime connects
// to that socket by its path; the worker needs only the descriptor, so no worker can reach any
// socket's path, and accept() on a passed listener needs no socket of its own (which the
// seccomp layer refuses for AF_UNIX).

// socketFolder creates the folder of the workers' listeners, which only the runtime's account
// may open (Landlock keeps workers of the same account out of it). It lives in the system's temporary folder, whose short path keeps every socket
// path within the 107 bytes a unix socket address holds.
func socketFolder() (string, error) {
	dir, err := os.MkdirTemp("", "runtime-net-")
	if err != nil {
		return "", fmt.Errorf("worker_network isolated: creating the folder of worker sockets: %w", err)
	}
	return dir, nil
}

// listen creates a listening unix socket at path. It is a blocking socket, as systemd passes
// them, so a program that accepts on it without setting it non-blocking works too.
func listen(path string) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("worker socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("worker socket %s: %w", path, err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		unix.Close(fd)
		os.Remove(path)
		return nil, fmt.Errorf("worker socket %s: %w", path, err)
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

// socketPath is the path of the listener of the worker id names.
func socketPath(folder, id string) string {
	return filepath.Join(folder, id+".sock")
}
