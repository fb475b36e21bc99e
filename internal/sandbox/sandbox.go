// Package sandbox starts process workers confined: on Linux each worker runs under a small
// launcher (the runtime binary re-executed in a helper mode) that is a child subreaper, and the
// worker itself starts with no_new_privs, every capability dropped, Landlock limiting its files
// to its own folder, a scratch folder and the system's program folders, and resource limits
// through cgroups where the runtime may create them, else rlimits. Elsewhere it starts the
// worker plainly, in its own process group where the OS has them.
package sandbox

import (
	"fmt"
	"net"
	"strings"

	"github.com/caddy-runtime/runtime/internal/troubleshooting"
)

// Options are the operator's settings for every worker.
type Options struct {
	// User and Group run workers under another account ("" keeps the runtime's).
	User, Group string
	// ReadDirs are extra folders workers may read and execute, besides the system's.
	ReadDirs []string
	// Caps bound what a manifest may ask for.
	Caps Limits
	// IsolateNetwork runs each worker in a network namespace of its own, with nothing but its
	// own loopback, serving on a unix socket the sandbox creates and hands over as
	// descriptor 3 (socket activation). It needs Linux and root.
	IsolateNetwork bool
	// Private lists folders no worker may reach (the runtime's state, the unit folders); the
	// start-up check warns when a folder workers may read contains one of them.
	Private []string
}

// Limits are the resources one worker may use; zero means no limit.
type Limits struct {
	Memory    int64   // bytes
	Processes int     // processes and threads
	Files     int     // open descriptors of each process (RLIMIT_NOFILE)
	CPU       float64 // cores
	Scratch   int64   // bytes in the scratch folder
	Database  int64   // bytes in the data folder (Spec.Data), the worker's database
}

// Cap returns l with each unset or larger value replaced by the cap's.
func (l Limits) Cap(c Limits) Limits {
	if l.Memory <= 0 || c.Memory > 0 && l.Memory > c.Memory {
		l.Memory = c.Memory
	}
	if l.Processes <= 0 || c.Processes > 0 && l.Processes > c.Processes {
		l.Processes = c.Processes
	}
	if l.Files <= 0 || c.Files > 0 && l.Files > c.Files {
		l.Files = c.Files
	}
	if l.CPU <= 0 || c.CPU > 0 && l.CPU > c.CPU {
		l.CPU = c.CPU
	}
	if l.Scratch <= 0 || c.Scratch > 0 && l.Scratch > c.Scratch {
		l.Scratch = c.Scratch
	}
	if l.Database <= 0 || c.Database > 0 && l.Database > c.Database {
		l.Database = c.Database
	}
	return l
}

// Caps are the operator's caps on every worker's limits (Options.Caps).
func (s *Sandbox) Caps() Limits { return s.opts.Caps }

// ListenPrefix begins the variables the sandbox sets for a worker in an isolated network
// (LISTEN_FDS, LISTEN_PID: socket activation), in place of any the worker's environment has.
const ListenPrefix = "LISTEN_"

// Spec is one worker process to start.
type Spec struct {
	Argv []string
	Dir  string // working directory; read and execute
	// ReadPaths are files and folders this worker alone may read and execute besides Dir and
	// the system's folders (a JavaScript worker's engine and loader).
	ReadPaths []string
	Env       []string // the whole environment
	// Scratch is the worker's writable folder: emptied before the worker starts, removed once
	// it has exited. Limits.Scratch bounds it.
	Scratch string
	Limits  Limits
	// Listen hands the worker a listening unix socket as descriptor 3 with LISTEN_FDS=1 and
	// LISTEN_PID (socket activation), where the sandbox can (Linux); Process.Socket is its
	// path. An isolated network always does.
	Listen bool
	// OverScratch, when a watcher rather than the kernel bounds the scratch folder, is told
	// why once the folder passes its limit or cannot be measured, just before the sandbox
	// kills the worker. It must not wait for the worker to exit.
	OverScratch func(reason error)
	// Data is a folder the worker may write besides its scratch, kept across its processes
	// (its database, package databases): never emptied nor removed by the sandbox. A watcher
	// bounds it by Limits.Database, whatever bounds the scratch folder: it is on the disk, so
	// no tmpfs can, and the worker writes its files itself, so nothing between can either.
	Data string
	// DataEnv returns the variables naming the data folder as the worker reaches it (its
	// path; or, where its account cannot pass the folders above it, the folder's mount in
	// its scratch tmpfs), added to Env.
	DataEnv func(dir string) []string
	// OverData is told why once the data folder passes Limits.Database or cannot be
	// measured, just before the sandbox kills the worker. It must not wait for the worker.
	OverData func(reason error)
	// Endpoint, when set, is handed a TCP listener on 127.0.0.1 that the worker can reach
	// (inside its own network namespace in an isolated network, else on the host's loopback)
	// and returns the variables that tell the worker where it is, added to Env. The sandbox
	// closes the listener once the worker has exited.
	Endpoint func(ln net.Listener) []string
}

// How workers reach the network, as the start-up log tells it.
const (
	NetworkHost     = "host (workers share the host's loopback)"
	NetworkIsolated = "isolated (own network namespace, listener passed as fd 3)"
)

// Layers tells which confinement layers are in force, for the start-up log.
type Layers struct {
	Launcher     bool     // a subreaper launcher stops every descendant with its worker
	NoNewPrivs   bool     // workers cannot gain privileges through exec
	Capabilities bool     // every capability is dropped
	Landlock     int      // Landlock ABI version in use, 0 when unavailable
	Seccomp      []string // what the workers' seccomp filter refuses, empty without one
	Cgroup       string   // how limits and stopping work, e.g. "cgroup v2 (kill) + cgroup v1 (memory, pids, cpu)"
	Network      string   // NetworkHost or NetworkIsolated; "" where the sandbox has no say
	User         string   // the account workers run as
	NonDumpable  bool     // the runtime's memory and environment are closed to same-user processes
	Scratch      string   // what bounds scratch folders: ScratchTmpfs or ScratchWatcher
	Warnings     []Warning
}

// Warning is a layer that is not in force, and the troubleshooting paragraph that says what to do.
type Warning struct {
	Text string
	Docs troubleshooting.Anchor
}

// What bounds a worker's scratch folder.
const (
	// ScratchTmpfs: a size-limited tmpfs in the worker's own mount namespace; writes past it
	// fail, and its pages count against the worker's memory.
	ScratchTmpfs = "tmpfs"
	// ScratchWatcher: the runtime measures the folder every second and stops the worker
	// past its limit.
	ScratchWatcher = "watcher"
)

// String summarises the layers in one line.
func (l Layers) String() string {
	var on []string
	add := func(ok bool, name string) {
		if ok {
			on = append(on, name)
		}
	}
	add(l.NonDumpable, "runtime non-dumpable")
	add(l.Launcher, "subreaper launcher")
	add(l.NoNewPrivs, "no_new_privs")
	add(l.Capabilities, "capabilities dropped")
	add(l.Landlock > 0, fmt.Sprintf("landlock ABI %d", l.Landlock))
	add(len(l.Seccomp) > 0, "seccomp (refused: "+strings.Join(l.Seccomp, ", ")+")")
	if l.Cgroup != "" {
		on = append(on, "limits and stopping by "+l.Cgroup)
	}
	if l.Network != "" {
		on = append(on, "network: "+l.Network)
	}
	switch l.Scratch {
	case ScratchTmpfs:
		on = append(on, "scratch limit by tmpfs (counts as worker memory)")
	case ScratchWatcher:
		on = append(on, "scratch limit by a watcher (every second)")
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ", ")
}

// PortTakenError means another process than the worker listens on the port the worker was
// told to serve on (Process.CheckListener): connections there would reach it.
type PortTakenError struct {
	Port  int
	Owner string // e.g. "pid 123 (server)"; "" when unknown
}

func (e *PortTakenError) Error() string {
	owner := e.Owner
	if owner == "" {
		owner = "a process the runtime may not look into"
	}
	return fmt.Sprintf("another process listens on port %d, the worker's PORT: %s", e.Port, owner)
}
