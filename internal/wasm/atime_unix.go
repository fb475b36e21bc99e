//go:build linux || darwin

package wasm

import (
	"io/fs"
	"syscall"
	"time"
)

// accessTime is when info's file was last read, as the file system keeps it; zero when
// unknown.
func accessTime(info fs.FileInfo) time.Time {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}
	}
	ts := atim(st)
	return time.Unix(ts.Unix())
}
