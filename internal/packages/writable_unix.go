//go:build unix

package packages

import "golang.org/x/sys/unix"

// writable reports whether the runtime may create entries in dir.
func writable(dir string) bool { return unix.Access(dir, unix.W_OK) == nil }
