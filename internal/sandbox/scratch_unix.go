//go:build unix

package sandbox

import (
	"io/fs"
	"syscall"
)

// allocated returns the bytes a file takes on disk (its allocated blocks), its identity, and
// whether other names may link to it.
func allocated(info fs.FileInfo) (int64, fileID, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return info.Size(), fileID{}, false
	}
	return int64(st.Blocks) * 512, fileID{uint64(st.Dev), uint64(st.Ino)}, !info.IsDir() && st.Nlink > 1
}
