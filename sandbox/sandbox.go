// Package sandbox starts process workers confined: on Linux each worker runs under a small
// launcher (the runtime binary re-executed in a helper mode) that is a child subreaper, and the
// worker itself starts with no_new_privs, every capability dropped, Landlock limiting its files
// to its own folder, a scratch folder and the system's program folders, and resource limits
// through cgroups where the runtime may create them, else rlimits. Elsewhere it starts the
// worker plainly, in its own process group where the OS has them.
package sandbox

import (
	"fmt"
	"strings"
)

// Options are the operator's settings for every worker.
type Options struct {
	// User and Group run workers under another account ("" keeps the runtime's).
	User, Group string
	// ReadDirs are extra folders workers may read and execute, besides the system's.
	ReadDirs []string
	// Caps bound what a manifest may ask for.
	Caps Limits
	// Private lists folders no worker may reach (the runtime's state, the unit folders); the
	// start-up check warns when a folder workers may read contains one of them.
	Private []string
}

// Limits are the resources one worker may use; zero means no limit.
type Limits struct {
	Memory    int64   // bytes
	Processes int     // processes and threads
	CPU       float64 // cores
}

// Cap returns l with each unset or larger value replaced by the cap's.
func (l Limits) Cap(c Limits) Limits {
	if l.Memory <= 0 || c.Memory > 0 && l.Memory > c.Memory {
		l.Memory = c.Memory
	}
	if l.Processes <= 0 || c.Processes > 0 && l.Processes > c.Processes {
		l.Processes = c.Processes
	}
	if l.CPU <= 0 || c.CPU > 0 && l.CPU > c.CPU {
		l.CPU = c.CPU
	}
	return l
}

// Spec is one worker process to start.
type Spec struct {
	Argv []string
	Dir  string   // working directory; read and execute
	Env  []string // the whole environment
	// Scratch is the worker's writable folder; it is emptied before the worker starts.
	Scratch string
	Limits  Limits
}

// Layers tells which confinement layers are in force, for the start-up log.
type Layers struct {
	Launcher     bool     // a subreaper launcher stops every descendant with its worker
	NoNewPrivs   bool     // workers cannot gain privileges through exec
	Capabilities bool     // every capability is dropped
	Landlock     int      // Landlock ABI version in use, 0 when unavailable
	Seccomp      []string // what the workers' seccomp filter refuses, empty without one
	Cgroup       string   // how limits and stopping work, e.g. "cgroup v2 (kill) + cgroup v1 (memory, pids, cpu)"
	User         string   // the account workers run as
	NonDumpable  bool     // the runtime's memory and environment are closed to same-user processes
	Warnings     []string
}

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
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ", ")
}
