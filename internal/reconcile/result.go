package reconcile

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/keystore"
)

// Unit names a unit version a pass acted on or reports.
type Unit struct {
	Kind    string // keystore.UnitWorker or keystore.UnitPlugin
	Name    string
	Version string
	SHA256  string // the archive of the row, or of the tree's record; "" for a tree of this instance alone
	Change  int64  // the change number of the row; 0 without one
	Path    string // the tree's folder, when there is one
}

func (u Unit) key() key { return key{u.Kind, u.Name, u.Version} }

// Op is what a pass does to a unit version.
type Op string

// The operations of a pass.
const (
	OpInstall Op = "install"
	OpRemove  Op = "remove"
	OpEnable  Op = "enable"
	OpDisable Op = "disable"
)

// Class tells why an operation failed, for logs, the audit trail and a metric's label.
type Class string

// The classes of failure. Every failed operation is retried with back-off: the old tree, if
// any, keeps serving meanwhile.
const (
	// ClassMissing: the row's archive is not in the package store.
	ClassMissing Class = "missing"
	// ClassCorrupt: the store's object is not the archive the row names (an altered or
	// damaged object, or one of another size); nothing of it was installed.
	ClassCorrupt Class = "corrupt"
	// ClassUnavailable: the store could not be reached or failed (5xx, timeouts).
	ClassUnavailable Class = "unavailable"
	// ClassStore: the store refused the request (credentials, bucket, another reason).
	ClassStore Class = "store"
	// ClassInstall: the archive could not be installed here, or a tree not removed or its
	// manifest not changed: an extraction refused by the hardened checks or the limits, a
	// name this instance's built-in folders hold, a full disk, a read-only folder.
	ClassInstall Class = "install"
)

// classOf classes a package store error.
func classOf(err error) Class {
	switch {
	case errors.Is(err, packagestore.ErrNotFound):
		return ClassMissing
	case errors.Is(err, packagestore.ErrCorrupt):
		return ClassCorrupt
	case errors.Is(err, packagestore.ErrUnavailable):
		return ClassUnavailable
	}
	return ClassStore
}

// Failure is an operation of a pass that failed, or that waits for its retry.
type Failure struct {
	Unit
	Op    Op
	Class Class
	Err   error
	// New is set on the first report of this failure for this row (and this class): the
	// caller logs, audits and counts failures that are new, not every retry of them.
	New      bool
	Attempts int       // attempts for this row so far
	Retry    time.Time // when a pass tries again
}

// Local is a tree that has neither a record nor a live row: installed on this instance
// outside the cluster, left alone.
type Local struct {
	Unit
	New bool // not reported by an earlier pass
}

// Result is what a pass did and what it could not do.
type Result struct {
	Installed []Unit // downloaded and installed, new or replacing a tree
	Removed   []Unit // trees removed: a tombstone, or a recorded tree no row names any longer
	Enabled   []Unit
	Disabled  []Unit
	Failed    []Failure
	Local     []Local
	// Deferred are installs this pass left to the next one: a caller came to wait for a
	// paced pass, or a request's pass (Hurry) installed only what it waits for.
	Deferred []Unit
	// Change is the highest change number of the desired state the pass read.
	Change int64
	// Applied is the highest change number up to which this instance has converged: Change
	// when nothing failed or was deferred, else just below the oldest change that failed or
	// was deferred. It is the instance's appliedChange.
	Applied int64
}

// Changed reports whether the pass changed any tree.
func (r Result) Changed() bool {
	return len(r.Installed)+len(r.Removed)+len(r.Enabled)+len(r.Disabled) > 0
}

// PluginsChanged reports whether the pass changed a plugin, so the caller reloads the
// plugins.
func (r Result) PluginsChanged() bool {
	for _, list := range [][]Unit{r.Installed, r.Removed, r.Enabled, r.Disabled} {
		if slices.ContainsFunc(list, func(u Unit) bool { return u.Kind == keystore.UnitPlugin }) {
			return true
		}
	}
	return false
}

// NextRetry is the earliest time a failed operation is retried; zero when none failed.
func (r Result) NextRetry() time.Time {
	var next time.Time
	for _, f := range r.Failed {
		if next.IsZero() || f.Retry.Before(next) {
			next = f.Retry
		}
	}
	return next
}

// sort orders every list by kind, name and version, and computes Applied.
func (r *Result) sort() {
	for _, list := range [][]Unit{r.Installed, r.Removed, r.Enabled, r.Disabled, r.Deferred} {
		slices.SortFunc(list, compareUnits)
	}
	slices.SortFunc(r.Failed, func(a, b Failure) int { return compareUnits(a.Unit, b.Unit) })
	slices.SortFunc(r.Local, func(a, b Local) int { return compareUnits(a.Unit, b.Unit) })
	r.Applied = r.Change
	for _, f := range r.Failed {
		if f.Change > 0 {
			r.Applied = min(r.Applied, f.Change-1)
		}
	}
	for _, u := range r.Deferred {
		r.Applied = min(r.Applied, u.Change-1)
	}
}

func compareUnits(a, b Unit) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Version, b.Version))
}
