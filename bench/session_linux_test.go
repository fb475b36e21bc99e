package bench

import (
	"os/exec"
	"syscall"
)

// ownSession starts cmd in a session of its own, as the runtime gives each process worker:
// with the kernel's autogroup scheduling a session is one scheduling entity, so both servers
// compete for the CPU with the benchmark's client on the same terms. It dies with the
// benchmark.
func ownSession(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}

// likeRuntime starts cmd as integration/harness starts the runtime: in a process group of its
// own within the benchmark's session, so it shares the client's scheduling entity as the
// runtime does. It dies with the benchmark.
func likeRuntime(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
