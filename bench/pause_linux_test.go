package bench

import (
	"time"

	"golang.org/x/sys/unix"
)

// pause waits d, to the microsecond: time.Sleep below a millisecond waits about 1.1 ms here
// (Go's timers are woken by its poller, whose epoll waits count whole milliseconds), so a
// bare start polled with it was seen up to a millisecond after it listened.
func pause(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
