//go:build unix && !linux

package harness

import (
	"os/exec"
	"syscall"
)

// ownGroup starts the runtime in its own process group, so a stop reaches worker processes too.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }
