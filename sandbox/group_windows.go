package sandbox

import "os/exec"

func setGroup(*exec.Cmd) {}

// terminate kills: Windows has no SIGTERM to send to another process.
func terminate(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

func kill(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
