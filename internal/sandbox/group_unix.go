//go:build unix && !linux

package sandbox

import (
	"os/exec"
	"syscall"
)

// setGroup puts the worker in a process group of its own, so a stop reaches its children.
func setGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// guard ties the started worker's group to the runtime's life: see guardGroup.
func guard(cmd *exec.Cmd) (release func(), err error) {
	g, err := guardGroup(cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	return g.release, nil
}

func terminate(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }

func kill(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
