package packages

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// exchange swaps two names in one renameat2(RENAME_EXCHANGE); errNoExchange means the file
// system cannot.
func exchange(srcDir *os.File, src string, dstDir *os.File, dst string) error {
	err := unix.Renameat2(int(srcDir.Fd()), src, int(dstDir.Fd()), dst, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return errNoExchange
	}
	return err
}
