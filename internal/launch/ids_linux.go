//go:build linux && !(386 || arm)

package launch

import "syscall"

// The calls that switch the worker's account, with 32-bit ids.
const (
	sysSetgroups = syscall.SYS_SETGROUPS
	sysSetresgid = syscall.SYS_SETRESGID
	sysSetresuid = syscall.SYS_SETRESUID
)
