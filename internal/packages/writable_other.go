//go:build !unix

package packages

import "os"

// writable reports whether dir is a folder not marked read-only.
func writable(dir string) bool {
	info, err := os.Stat(dir)
	return err == nil && info.IsDir() && info.Mode().Perm()&0o200 != 0
}
