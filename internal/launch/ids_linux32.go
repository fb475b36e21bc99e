//go:build linux && (386 || arm)

package launch

import "syscall"

// The calls that switch the worker's account, with 32-bit ids (the plain ones take 16).
const (
	sysSetgroups = syscall.SYS_SETGROUPS32
	sysSetresgid = syscall.SYS_SETRESGID32
	sysSetresuid = syscall.SYS_SETRESUID32
)
