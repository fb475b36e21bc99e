//go:build !unix

package keystore

import "io/fs"

// allocatedSize is the file's size where the system tells no allocation.
func allocatedSize(info fs.FileInfo) int64 { return info.Size() }
