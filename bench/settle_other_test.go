//go:build !unix

package bench

// settle does nothing where there is no sync(2).
func settle() {}
