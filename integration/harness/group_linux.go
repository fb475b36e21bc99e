package harness

import (
	"os/exec"
	"syscall"
)

// ownGroup starts the runtime in its own process group, so a stop reaches worker processes
// too, and kills it if the test process dies.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
