//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// newSession starts cmd in a session of its own, as a daemon would.
func newSession(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }
