//go:build unix

package bench

import "syscall"

// settle writes the page cache's dirty data back to disk, so that the next timed operation
// does not pay for what ran before it.
func settle() { syscall.Sync() }
