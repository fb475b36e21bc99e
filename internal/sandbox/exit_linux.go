package sandbox

import (
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit blocks until pid, a child not yet reaped, has exited, waiting on the runtime's
// poller (its pidfd turns readable) rather than on a thread: exec.Cmd.Wait's waitid holds an
// OS thread for each running worker, and Go keeps every thread it made, so 20 workers that
// ran at once left 20 idle threads (about 1 MiB) behind them. Without pidfds (Linux before
// 5.10) it returns at once, and Wait blocks as before.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// Read calls the function again each time the poller finds the pidfd readable; an error
	// of its own (a file the poller does not take) returns, and Wait blocks as before.
	_ = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err != nil && err != unix.EINTR || n > 0
	})
}
