//go:build amd64 || arm64 || riscv64

package sandbox

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/caddy-runtime/runtime/internal/launch"
)

// refusal is one entry of the seccomp filter every worker runs under: the calls it covers,
// what it answers them with, and its name in the start-up log, printed from this same table
// so the log cannot say more or less than the filter does. With values or mask, a call is
// refused only when its first argument (socket's family, clone's flags) is one of the values
// or shares a bit with the mask; with args, only when each of those arguments has its value
// (setsockopt's level and option).
type refusal struct {
	name     string
	syscalls []uintptr
	values   []uint32
	mask     uint32
	args     []argValue
	errno    unix.Errno
}

// argValue is an argument of a call, by its index, and a value it must have.
type argValue struct {
	index int
	value uint32
}

// namespaceFlags are the clone flags that create a namespace. CLONE_NEWTIME shares its bit
// with clone's exit signal, so only clone3 and unshare, refused whole, could ask for it.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// refusals is what workers may not do, in the order the start-up log names it: reach local
// services past the socket() check (io_uring's own socket and connect), open unix, vsock and
// raw packet sockets (Caddy's admin socket, the host's agents; socketpair and netlink, which
// Node uses to list network interfaces, still work), enter or create namespaces (user
// namespaces hand a process every capability over a kernel surface of its own), reach other
// processes' memory and descriptors, and load BPF programs, keys, kernel modules or kernels.
// io_uring and clone3 answer ENOSYS, which language runtimes take as "use the ordinary call"
// (glibc falls back from clone3 to clone, whose flags a filter can read; clone3's sit in
// memory it cannot).
var refusals = []refusal{
	{name: "io_uring_*", syscalls: []uintptr{unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER}, errno: unix.ENOSYS},
	{name: "socket AF_UNIX/AF_VSOCK/AF_PACKET", syscalls: []uintptr{unix.SYS_SOCKET}, values: []uint32{unix.AF_UNIX, unix.AF_VSOCK, unix.AF_PACKET}, errno: unix.EACCES},
	{name: "unshare", syscalls: []uintptr{unix.SYS_UNSHARE}, errno: unix.EPERM},
	{name: "setns", syscalls: []uintptr{unix.SYS_SETNS}, errno: unix.EPERM},
	{name: "clone with namespace flags", syscalls: []uintptr{unix.SYS_CLONE}, mask: namespaceFlags, errno: unix.EPERM},
	{name: "clone3", syscalls: []uintptr{unix.SYS_CLONE3}, errno: unix.ENOSYS},
	{name: "ptrace", syscalls: []uintptr{unix.SYS_PTRACE}, errno: unix.EPERM},
	{name: "process_vm_readv/writev", syscalls: []uintptr{unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV}, errno: unix.EPERM},
	{name: "pidfd_getfd", syscalls: []uintptr{unix.SYS_PIDFD_GETFD}, errno: unix.EPERM},
	{name: "bpf", syscalls: []uintptr{unix.SYS_BPF}, errno: unix.EPERM},
	{name: "perf_event_open", syscalls: []uintptr{unix.SYS_PERF_EVENT_OPEN}, errno: unix.EPERM},
	{name: "keyctl", syscalls: []uintptr{unix.SYS_KEYCTL}, errno: unix.EPERM},
	{name: "add_key", syscalls: []uintptr{unix.SYS_ADD_KEY}, errno: unix.EPERM},
	{name: "request_key", syscalls: []uintptr{unix.SYS_REQUEST_KEY}, errno: unix.EPERM},
	{name: "userfaultfd", syscalls: []uintptr{unix.SYS_USERFAULTFD}, errno: unix.EPERM},
	{name: "module loading", syscalls: []uintptr{unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE}, errno: unix.EPERM},
	{name: "kexec", syscalls: []uintptr{unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD}, errno: unix.EPERM},
	// Sockets of one account that set SO_REUSEPORT share a port, the kernel dealing each new
	// connection to one of them: a worker could join another's port after the runtime checked
	// whose listener it is (sandbox's CheckListener) and take part of its visitors.
	{name: "setsockopt SO_REUSEPORT", syscalls: []uintptr{unix.SYS_SETSOCKOPT},
		args: []argValue{{1, unix.SOL_SOCKET}, {2, unix.SO_REUSEPORT}}, errno: unix.EPERM},
}

// seccompRefusals names what the filter refuses, for the start-up log.
func seccompRefusals() []string {
	names := make([]string, len(refusals))
	for i, r := range refusals {
		names[i] = r.name
	}
	return names
}

// auditArch is the seccomp architecture of this build.
var auditArch = map[string]uint32{
	"amd64":   unix.AUDIT_ARCH_X86_64,
	"arm64":   unix.AUDIT_ARCH_AARCH64,
	"riscv64": unix.AUDIT_ARCH_RISCV64,
}[runtime.GOARCH]

// x32Bit marks the syscalls of the x32 ABI on amd64, which use other numbers.
const x32Bit = 0x40000000

// Offsets in struct seccomp_data. Arguments are tested on their low half (all three
// architectures are little-endian), and that is exact: the kernel reads socket's family as an
// int and clone's flags through lower_32_bits, so the upper half cannot change what they do,
// and a rule that also wanted it zero could be dodged by setting it (setsockopt's level
// and option are ints too).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	argSize = 8
)

// seccompProgram assembles the filter: calls of another architecture (32-bit programs,
// whose socketcall cannot be inspected) and x32 get ENOSYS, each refusal its errno, the rest
// pass.
func seccompProgram() []unix.SockFilter {
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf int) unix.SockFilter {
		return unix.SockFilter{Code: code, K: k, Jt: uint8(jt), Jf: uint8(jf)}
	}
	const (
		load  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		allow = unix.SECCOMP_RET_ALLOW
	)
	nosys := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)
	prog := []unix.SockFilter{
		stmt(load, offArch),
		jump(jeq, auditArch, 1, 0),
		stmt(ret, nosys),
		stmt(load, offNr),
		jump(jge, x32Bit, 0, 1),
		stmt(ret, nosys),
	}
	for _, r := range refusals {
		action := uint32(unix.SECCOMP_RET_ERRNO) | uint32(r.errno)
		// Each block ends in a return, so the syscall number need not be loaded again.
		var block []unix.SockFilter
		switch {
		case len(r.values) > 0:
			block = append(block, stmt(load, offArg0))
			for i, v := range r.values {
				block = append(block, jump(jeq, v, len(r.values)-i, 0))
			}
			block = append(block, stmt(ret, allow), stmt(ret, action))
		case len(r.args) > 0:
			// Each argument that differs jumps past the rest to the allow at the end.
			for i, a := range r.args {
				block = append(block, stmt(load, uint32(offArg0+argSize*a.index)), jump(jeq, a.value, 0, 2*(len(r.args)-i)-1))
			}
			block = append(block, stmt(ret, action), stmt(ret, allow))
		case r.mask != 0:
			block = append(block, stmt(load, offArg0), jump(jset, r.mask, 1, 0), stmt(ret, allow), stmt(ret, action))
		default:
			block = append(block, stmt(ret, action))
		}
		for _, nr := range r.syscalls {
			prog = append(prog, jump(jeq, uint32(nr), 0, len(block)))
			prog = append(prog, block...)
		}
	}
	return append(prog, stmt(ret, allow))
}

// seccompFilter is the program as a worker's stage installs it.
func seccompFilter() []launch.Filter {
	prog := seccompProgram()
	out := make([]launch.Filter, len(prog))
	for i, f := range prog {
		out[i] = launch.Filter{Code: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}
	}
	return out
}

// probeSeccomp installs the filter on a thread of its own, which then ends, and checks that
// the filter refuses: the start-up log names the layer only when it holds.
func probeSeccomp() error {
	errc := make(chan error)
	go func() {
		// Never unlocked: the thread ends with this goroutine, its filter with it.
		runtime.LockOSThread()
		errc <- func() error {
			if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
				return fmt.Errorf("no_new_privs: %w", err)
			}
			if err := launch.InstallSeccomp(seccompFilter()); err != nil {
				return err
			}
			// A bad descriptor: the kernel would answer EBADF, the filter answers first.
			if _, _, errno := unix.Syscall(unix.SYS_SETNS, ^uintptr(0), 0, 0); errno != unix.EPERM {
				return fmt.Errorf("setns answered %v under the filter", errno)
			}
			return nil
		}()
	}()
	return <-errc
}
