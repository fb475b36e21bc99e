//go:build linux

package workers

import (
	"time"

	"golang.org/x/sys/unix"
)

// pollSleep waits d, to the microsecond: a Go timer below a millisecond is woken by the
// runtime's poller, whose epoll waits count whole milliseconds, so time.Sleep(250µs) sleeps
// about 1.2 ms. It holds its thread meanwhile, which is what a starting worker's probe may
// cost.
func pollSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
