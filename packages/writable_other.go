//go:build !unix

package packages

import (
	"errors"
	"os"
	"syscall"
)

// diskFull reports whether err is a write refused for lack of space.
func diskFull(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// writable reports whether dir is a folder not marked read-only.
func writable(dir string) bool {
	info, err := os.Stat(dir)
	return err == nil && info.IsDir() && info.Mode().Perm()&0o200 != 0
}
