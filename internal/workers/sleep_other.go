//go:build !linux

package workers

import "time"

// pollSleep waits d (see sleep_linux.go).
func pollSleep(d time.Duration) { time.Sleep(d) }
