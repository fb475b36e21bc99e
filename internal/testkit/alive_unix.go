//go:build unix

package testkit

import "syscall"

// Alive reports whether the process pid exists (on Unix, a zombie not yet reaped counts).
func Alive(pid int) bool { return syscall.Kill(pid, 0) == nil }
