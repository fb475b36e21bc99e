//go:build unix

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// watchdogScript waits for its standard input to reach end of file, which happens when the
// runtime exits however it exits (the runtime holds the only write end), and then kills the
// worker's process group. It ignores the signals a terminal or a service manager sends to the
// runtime's group, so that it outlives the runtime for that moment.
const watchdogScript = `trap '' INT TERM HUP; read _; kill -9 -"$1" 2>/dev/null`

// groupGuard kills a worker's process group when the runtime exits.
type groupGuard struct {
	watchdog *exec.Cmd
	pipe     *os.File // the write end: closed when the runtime's process ends
}

// guardGroup makes sure the process group pgid, a worker's, does not outlive the runtime,
// where the kernel cannot be asked to (Linux has Pdeathsig): a watchdog shell holds a pipe
// from the runtime and kills the group when the pipe closes.
func guardGroup(pgid int) (*groupGuard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("watchdog pipe: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "watchdog", strconv.Itoa(pgid))
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close() // the watchdog holds its copy
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("starting the watchdog: %w", err)
	}
	go cmd.Wait() // reap it
	return &groupGuard{watchdog: cmd, pipe: w}, nil
}

// release stops the watchdog without touching the group, once the worker has exited: its
// group id could be reused after.
func (g *groupGuard) release() {
	_ = g.watchdog.Process.Kill()
	g.pipe.Close()
}
