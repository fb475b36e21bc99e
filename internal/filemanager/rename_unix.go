//go:build unix

package filemanager

import (
	"os"

	"golang.org/x/sys/unix"
)

// renameAt renames oldName in the folder oldDir to newName in the folder newDir.
func renameAt(oldDir *os.File, oldName string, newDir *os.File, newName string) error {
	err := unix.Renameat(int(oldDir.Fd()), oldName, int(newDir.Fd()), newName)
	if err != nil {
		return &os.LinkError{Op: "renameat", Old: oldName, New: newName, Err: err}
	}
	return nil
}
