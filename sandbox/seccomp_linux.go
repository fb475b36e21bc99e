package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// auditArch is the seccomp architecture of this build, 0 where the filter is not written.
var auditArch = map[string]uint32{
	"amd64":   unix.AUDIT_ARCH_X86_64,
	"arm64":   unix.AUDIT_ARCH_AARCH64,
	"riscv64": unix.AUDIT_ARCH_RISCV64,
}[runtime.GOARCH]

// x32Bit marks the syscalls of the x32 ABI on amd64, which use other numbers.
const x32Bit = 0x40000000

// denyUnixSockets installs a seccomp filter on the calling thread, inherited by the worker,
// that refuses socket(AF_UNIX, …): Caddy's admin endpoint and other local services on unix
// sockets stay out of reach even for a worker running under the runtime's own account, which
// folder permissions cannot stop. socketpair still works. Syscalls of another architecture
// (32-bit programs) are refused too, since their socketcall cannot be inspected.
func denyUnixSockets() (bool, error) {
	if auditArch == 0 {
		return false, nil
	}
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: code, K: k, Jt: jt, Jf: jf}
	}
	const (
		load  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		allow = unix.SECCOMP_RET_ALLOW
	)
	deny := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EACCES)
	nosys := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)
	filter := []unix.SockFilter{
		stmt(load, 4), // arch
		jump(jeq, auditArch, 1, 0),
		stmt(ret, nosys),
		stmt(load, 0), // syscall number
		jump(jge, x32Bit, 0, 1),
		stmt(ret, nosys),
		jump(jeq, uint32(unix.SYS_SOCKET), 0, 3),
		stmt(load, 16), // the low half of args[0], the domain (little-endian)
		jump(jeq, unix.AF_UNIX, 0, 1),
		stmt(ret, deny),
		stmt(ret, allow),
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return false, fmt.Errorf("seccomp: %v", err)
	}
	return true, nil
}
