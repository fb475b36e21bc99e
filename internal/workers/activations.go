package workers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/packages"
)

// Activation is where one worker's activation stands on this instance: the version activated
// last, the versions whose check failed, and the ones being checked now. Serving reads it to
// choose the version of an unpinned request (serving.Unpinned).
type Activation struct {
	// Active is the version of a process worker that passed its check last; "" when none did
	// on this instance, or a static version was installed or enabled since.
	Active string `json:"active,omitempty"`
	// Failed are the versions whose check failed, newest failure last; each leaves the list
	// when it passes a later check or is removed.
	Failed []Failure `json:"failed,omitempty"`
	// Checking are the versions being installed or enabled and checked now: they take no
	// unpinned traffic until they pass.
	Checking []string `json:"checking,omitempty"`
}

// Failure is a version that failed its check, and why.
type Failure struct {
	Version string    `json:"version"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

// Held reports whether version may not take unpinned traffic: its check failed or is running.
func (a Activation) Held(version string) bool {
	return slices.Contains(a.Checking, version) || a.failed(version)
}

// ActiveVersion is the version of u that unpinned requests get when no traffic split is set,
// given its activation a on this instance: the active version while it is enabled; else the
// newest enabled version ("latest" counts as the newest; a disabled version counts as not
// installed) that neither failed its check nor is being checked; else the newest enabled
// version, when every one is held (there is nothing healthier to serve). ok is false when no
// version is enabled.
func ActiveVersion(u packages.Unit, a Activation) (v packages.Version, ok bool) {
	newest := -1
	for i := len(u.Versions) - 1; i >= 0; i-- {
		if !u.Versions[i].Enabled {
			continue
		}
		if u.Versions[i].Version == a.Active {
			return u.Versions[i], true
		}
		if newest < 0 {
			newest = i
		}
	}
	if newest < 0 {
		return packages.Version{}, false
	}
	for i := newest; i >= 0; i-- {
		if v := u.Versions[i]; v.Enabled && !a.Held(v.Version) {
			return v, true
		}
	}
	return u.Versions[newest], true
}

// interruptedReason is the failure of a check the runtime did not see to its end.
const interruptedReason = "the runtime stopped before the version's check ended; enable it again or upload it again to check it once more"

// Activations keeps every worker's Activation on this instance, in a file of state_dir so it
// survives a restart. It is per instance on purpose, not in the replicated desired state: each
// instance starts and checks a version for itself, and one instance's verdict (a check that
// failed for want of something on that host) must not decide what another serves.
//
// Readers take no lock: the table is an immutable map, swapped whole on each change.
type Activations struct {
	path   string
	logger *zap.Logger

	mu      sync.Mutex // serialises changes and writes of the file
	view    atomic.Pointer[map[string]Activation]
	changes atomic.Uint64
}

// ActivationsFile is the file in state_dir that holds the activations.
const ActivationsFile = "activations.json"

// NewActivations returns activations kept in path ("" keeps them in memory only), empty
// until Load.
func NewActivations(path string, logger *zap.Logger) *Activations {
	if logger == nil {
		logger = zap.NewNop()
	}
	a := &Activations{path: path, logger: logger}
	a.view.Store(&map[string]Activation{})
	return a
}

// Load reads the activations kept in the file. A check that was running when the runtime
// stopped is recorded as failed: the version was never shown to pass.
func (a *Activations) Load() error {
	if a.path == "" {
		return nil
	}
	table := map[string]Activation{}
	b, err := os.ReadFile(a.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("reading the worker activations: %w", err)
	default:
		if err := json.Unmarshal(b, &table); err != nil {
			return fmt.Errorf("reading the worker activations %s: %w; remove the file to start afresh (every worker then serves its newest enabled version)", a.path, err)
		}
	}
	interrupted := false
	for name, act := range table {
		for _, v := range act.Checking {
			act.Failed = withFailure(act.Failed, Failure{Version: v, Reason: interruptedReason, At: time.Now()})
			interrupted = true
		}
		act.Checking = nil
		table[name] = act
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.view.Store(&table)
	a.changes.Add(1)
	if interrupted {
		a.saveLocked(table)
	}
	return nil
}

// Get returns the activation of the worker called name; the zero Activation when a is nil or
// knows nothing of it.
func (a *Activations) Get(name string) Activation {
	if a == nil {
		return Activation{}
	}
	return (*a.view.Load())[name]
}

// Gen changes with every change of the activations, so answers built from them can be kept
// until it does.
func (a *Activations) Gen() uint64 {
	if a == nil {
		return 0
	}
	return a.changes.Load()
}

// Expect records that version is about to be installed or enabled and checked: it takes no
// unpinned traffic until Settle.
func (a *Activations) Expect(name, version string) {
	a.change(name, func(act *Activation) {
		if !slices.Contains(act.Checking, version) {
			act.Checking = append(act.Checking, version)
		}
	})
}

// Unexpect forgets a check that will not run (the install failed, or the check was cancelled).
func (a *Activations) Unexpect(name, version string) {
	a.change(name, func(act *Activation) { act.Checking = without(act.Checking, version) })
}

// Settle records the end of version's check: passed (reason "") it becomes the active version,
// else it joins the failed ones with reason (and is no longer active: it was replaced in place).
func (a *Activations) Settle(name, version, reason string) {
	a.change(name, func(act *Activation) {
		act.Checking = without(act.Checking, version)
		if reason == "" {
			act.Active = version
			act.Failed = slices.DeleteFunc(act.Failed, func(f Failure) bool { return f.Version == version })
			return
		}
		act.Failed = withFailure(act.Failed, Failure{Version: version, Reason: reason, At: time.Now()})
		if act.Active == version { // replaced in place by a version that failed
			act.Active = ""
		}
	})
}

// SettleStatic records a static version installed or enabled: it has no check, and, as before
// health checks, the newest enabled version serves: no version stays active.
func (a *Activations) SettleStatic(name, version string) {
	a.change(name, func(act *Activation) {
		act.Checking = without(act.Checking, version)
		act.Failed = slices.DeleteFunc(act.Failed, func(f Failure) bool { return f.Version == version })
		act.Active = ""
	})
}

// Drop forgets a removed version, or the whole worker when version is "".
func (a *Activations) Drop(name, version string) {
	a.change(name, func(act *Activation) {
		if version == "" {
			*act = Activation{}
			return
		}
		act.Checking = without(act.Checking, version)
		act.Failed = slices.DeleteFunc(act.Failed, func(f Failure) bool { return f.Version == version })
		if act.Active == version {
			act.Active = ""
		}
	})
}

// maxFailures bounds the failed versions kept per worker.
const maxFailures = 32

// change applies fn to the worker's activation, publishes the table and writes the file when
// anything changed.
func (a *Activations) change(name string, fn func(*Activation)) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := *a.view.Load()
	before := cur[name]
	act := Activation{Active: before.Active, Failed: slices.Clone(before.Failed), Checking: slices.Clone(before.Checking)}
	fn(&act)
	if equalActivations(before, act) {
		return
	}
	next := maps.Clone(cur)
	if act.Active == "" && len(act.Failed) == 0 && len(act.Checking) == 0 {
		delete(next, name)
	} else {
		next[name] = act
	}
	a.view.Store(&next)
	a.changes.Add(1)
	a.saveLocked(next)
}

// saveLocked writes the table to the file through a temporary file and a rename, so a crash
// leaves the old table or the new one. A failure is logged: serving goes on from memory.
func (a *Activations) saveLocked(table map[string]Activation) {
	if a.path == "" {
		return
	}
	b, _ := json.MarshalIndent(table, "", "  ")
	tmp := a.path + ".tmp"
	err := os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, a.path)
	}
	if err != nil {
		a.logger.Error("writing the worker activations; a restart may serve other versions than now", zap.String("file", a.path), zap.Error(err))
	}
}

func equalActivations(x, y Activation) bool {
	return x.Active == y.Active && slices.Equal(x.Checking, y.Checking) && slices.Equal(x.Failed, y.Failed)
}

// withFailure records f, replacing an earlier failure of the same version, and keeps the
// newest maxFailures.
func withFailure(list []Failure, f Failure) []Failure {
	list = slices.DeleteFunc(list, func(g Failure) bool { return g.Version == f.Version })
	list = append(list, f)
	if len(list) > maxFailures {
		list = list[len(list)-maxFailures:]
	}
	return list
}

func without(list []string, v string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(s string) bool { return s == v })
}

// ActivationsPath is the activations file of a state folder.
func ActivationsPath(stateDir string) string { return filepath.Join(stateDir, ActivationsFile) }
