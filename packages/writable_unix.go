//go:build unix

package packages

import (
	"errors"

	"golang.org/x/sys/unix"
)

// writable reports whether the runtime may create entries in dir.
func writable(dir string) bool { return unix.Access(dir, unix.W_OK) == nil }

// diskFull reports whether err is a write refused for lack of space: the disk full, or the
// user's quota.
func diskFull(err error) bool { return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) }
