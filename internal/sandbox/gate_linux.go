package sandbox

import (
	"fmt"
	"os"
	"syscall"
)

// gateArg is the first argument that runs the runtime binary as the socket activation gate of
// an isolated network: the worker's own process, which sets LISTEN_PID to its pid and executes
// the worker's program in its place (execve keeps the pid). LISTEN_PID must be the worker's
// pid, known only after the fork, and Go runs no code of ours between fork and exec. The gate
// runs confined already (it is started from the launcher's confined thread, as a worker is),
// so Landlock must let it execute the runtime binary: one file rule, read and execute. That
// gives a worker nothing it could not have anyway: it may run any program of its own folder,
// and the binary holds no secret.
const gateArg = "__runtime_socket_activation"

func init() {
	if len(os.Args) < 4 || os.Args[1] != gateArg {
		return
	}
	err := syscall.Exec(os.Args[2], os.Args[3:], listenEnv(os.Environ()))
	fmt.Fprintf(os.Stderr, "sandbox: starting %s: %v\n", os.Args[2], err)
	os.Exit(127)
}

// throughGate returns how the launcher starts a worker of an isolated network: through the
// gate, with the listener as its descriptor 3.
func throughGate(path string, argv []string, files []*os.File) (string, []string, []*os.File) {
	syscall.CloseOnExec(listenerFD) // only as descriptor 3, never as a stray 4
	files = append(files, os.NewFile(listenerFD, "listener"))
	return "/proc/self/exe", append([]string{"runtime", gateArg, path}, argv...), files
}
