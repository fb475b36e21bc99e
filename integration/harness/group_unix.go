//go:build unix

package harness

import (
	"os/exec"
	"syscall"
)

// killGroup kills the runtime's process group, its workers included.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
