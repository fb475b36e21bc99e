//go:build !unix

package filemanager

import (
	"errors"
	"os"
)

// renameAt needs renameat(2), which keeps both names inside their opened folders; without it
// a move between folders is refused rather than done by path.
func renameAt(_ *os.File, oldName string, _ *os.File, newName string) error {
	return &os.LinkError{Op: "renameat", Old: oldName, New: newName, Err: errors.ErrUnsupported}
}
