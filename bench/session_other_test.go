//go:build !linux

package bench

import "os/exec"

// ownSession leaves cmd as it is: sessions and autogroup scheduling are Linux's.
func ownSession(*exec.Cmd) {}

// likeRuntime leaves cmd as it is, as the harness starts the runtime there.
func likeRuntime(*exec.Cmd) {}
