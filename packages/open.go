package packages

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular refuses to open something in a unit that is neither a regular file nor a
// folder: a named pipe, a socket, a device.
var ErrNotRegular = errors.New("not a regular file or folder")

// OpenReadable opens a unit's file or folder for reading through root, which keeps every path
// and link inside it. O_NONBLOCK keeps a named pipe from blocking the open; anything but a
// regular file or a folder gives ErrNotRegular.
func OpenReadable(root *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !info.IsDir() && !info.Mode().IsRegular() {
		f.Close()
		return nil, nil, ErrNotRegular
	}
	return f, info, nil
}
