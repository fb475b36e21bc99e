//go:build !linux

package bench

import "time"

// pause waits d (see pause_linux_test.go).
func pause(d time.Duration) { time.Sleep(d) }
