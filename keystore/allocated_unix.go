//go:build unix

package keystore

import (
	"io/fs"
	"syscall"
)

// allocatedSize is the bytes the file of info takes on disk: a file with holes (sparse)
// takes less than its size.
func allocatedSize(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return info.Size()
}
