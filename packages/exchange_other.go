//go:build !linux

package packages

import "os"

// exchange has no atomic form outside Linux; the caller moves the old tree aside instead.
func exchange(*os.File, string, *os.File, string) error { return errNoExchange }
