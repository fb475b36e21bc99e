package sandbox

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
)

// gateArg is the first argument that runs the runtime binary as the exec gate: the worker's
// own process, started by the launcher's confined thread, which puts on what must bind the
// worker alone and then executes the worker's program in its place (execve keeps the pid):
//
//   - the seccomp filter. On the launcher's thread it would bind that thread while it starts
//     the worker, and Go starts a worker straight into its cgroup with clone3, which the filter
//     refuses; in the gate it binds the worker from its first instruction.
//   - LISTEN_PID for an isolated network: it must be the worker's pid, known only after the
//     fork, and Go runs no code of ours between fork and exec.
//
// The gate runs confined already (Landlock, no_new_privs, no capabilities, its cgroup), so
// Landlock must let it execute the runtime binary: one file rule, read and execute. That gives
// a worker nothing it could not have anyway: it may run any program of its own folder, and the
// binary holds no secret.
const gateArg = "__runtime_sandbox_exec"

// What the gate puts on, in its second argument (comma-separated, "-" for nothing).
const (
	gateSeccomp = "seccomp"
	gateListen  = "listen"
)

func init() {
	if len(os.Args) < 5 || os.Args[1] != gateArg {
		return
	}
	// The filter binds the thread that installs it; the program is executed from that thread.
	runtime.LockOSThread()
	os.Exit(passGate(strings.Split(os.Args[2], ","), os.Args[3], os.Args[4:]))
}

// passGate puts on what opts name and executes the program at path with argv.
func passGate(opts []string, path string, argv []string) int {
	env := os.Environ()
	if slices.Contains(opts, gateListen) {
		env = listenEnv(env)
	}
	if slices.Contains(opts, gateSeccomp) {
		if err := installSeccomp(); err != nil {
			fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
			return 125
		}
	}
	err := syscall.Exec(path, argv, env)
	fmt.Fprintf(os.Stderr, "sandbox: starting %s: %v\n", path, err)
	return 127
}

// throughGate returns how the launcher starts a worker through the gate: the runtime binary
// with what the gate puts on, the program and its arguments, and for an isolated network the
// listener as descriptor 3.
func throughGate(l launch, path string, argv []string, files []*os.File) (string, []string, []*os.File) {
	var opts []string
	if l.Seccomp {
		opts = append(opts, gateSeccomp)
	}
	if l.Network {
		opts = append(opts, gateListen)
		syscall.CloseOnExec(listenerFD) // only as descriptor 3, never as a stray 4
		files = append(files, os.NewFile(listenerFD, "listener"))
	}
	if len(opts) == 0 {
		opts = []string{"-"}
	}
	return "/proc/self/exe", append([]string{"runtime", gateArg, strings.Join(opts, ","), path}, argv...), files
}
