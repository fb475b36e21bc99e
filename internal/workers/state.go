package workers

import (
	"slices"

	"github.com/caddy-runtime/runtime/packages"
)

// WorkerState is a worker's state in words, as the worker record gives it: what its served
// version (ActiveVersion) really does on this instance. It never says more than is known.
type WorkerState string

// The states of a worker.
const (
	// StateServing: the served version passed its check (a process worker's), has no check to
	// pass (static, spa and wasm versions), or its process runs here now.
	StateServing WorkerState = "serving"
	// StateFailing: the served version failed its check and nothing healthier exists (every
	// other enabled version failed too, or there is none): it is served all the same.
	StateFailing WorkerState = "failing"
	// StateCrashLooping: the served version's process keeps crashing soon after it starts
	// (CrashLoopAfter times in a row); it waits longer before each new start.
	StateCrashLooping WorkerState = "crash-looping"
	// StateDisabled: no version is enabled; nothing is served.
	StateDisabled WorkerState = "disabled"
	// StateNotStarted: the served version is a process worker's that has neither passed nor
	// failed a check on this instance and has no process here: its check runs now, or it was
	// on disk when the runtime started (never uploaded or enabled here). Its first request
	// starts it.
	StateNotStarted WorkerState = "not-started"
)

// WorkerStates are the values of WorkerState, in the order the API documents them.
var WorkerStates = []WorkerState{StateServing, StateFailing, StateCrashLooping, StateDisabled, StateNotStarted}

// StateOf tells the state of worker u on this instance from its activation a and procs, the
// pool's VersionStates (nil when no pool runs). served is the version unpinned requests get
// (ActiveVersion), "" when none is enabled; activated says whether it counts as the worker's
// active version: not when it failed its check or is being checked.
func StateOf(u packages.Unit, a Activation, procs map[string]ProcState) (state WorkerState, served string, activated bool) {
	v, ok := ActiveVersion(u, a)
	if !ok {
		return StateDisabled, "", false
	}
	activated = !a.Held(v.Version)
	proc := procs[u.Name+"@"+v.Version]
	switch {
	case proc == CrashLooping:
		return StateCrashLooping, v.Version, activated
	case a.failed(v.Version):
		return StateFailing, v.Version, false
	case slices.Contains(a.Checking, v.Version):
		return StateNotStarted, v.Version, false
	case proc == Running || proc == Draining || v.Version == a.Active:
		return StateServing, v.Version, activated
	}
	if m, err := ReadManifest(v.Metadata); err == nil && m.Kind() == Process {
		return StateNotStarted, v.Version, activated
	}
	return StateServing, v.Version, activated
}

// failed reports whether version's check failed.
func (a Activation) failed(version string) bool {
	return slices.ContainsFunc(a.Failed, func(f Failure) bool { return f.Version == version })
}
