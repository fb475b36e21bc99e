// Package reconcile converges an instance's worker and plugin folders with the desired state
// that the instances of a cluster share (issue 24): rows naming each unit version, its
// archive's SHA-256 and whether it is served (package keystore), the archives themselves in
// an object store (package packagestore).
//
// A pass compares the whole desired state with what is installed, each time: a row's tree
// that is missing or came from another archive is downloaded, verified and installed with
// the same hardened extraction and limits as an upload, atomically; a removed version's tree
// is removed; the row's enabled state is written into the local manifest. Missed signals do
// not matter, the comparison is the truth. Built-in folders are never touched; a tree
// installed here outside the cluster is left alone and reported. Each unit fails on its own,
// never stopping the others: nothing is installed from an archive that does not verify, the
// old tree keeps serving, and the operation is retried with back-off.
package reconcile

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// Desired is the desired state as this instance holds it; keystore.Store.Units is one.
type Desired interface {
	// Versions returns every row, removed versions included.
	Versions(ctx context.Context) ([]keystore.UnitVersion, error)
}

// Options configure a Reconciler.
type Options struct {
	Desired Desired
	Store   packagestore.Store
	Workers *packages.Catalog
	Plugins *packages.Catalog
	// Admit, when set, admits a unit version about to be installed from the store (kind is
	// keystore.UnitWorker or UnitPlugin), as the instance that received the upload admitted
	// it with this instance's policies; its error fails the install (ClassInstall). The
	// archive's name and version must match the row's in any case.
	Admit func(kind string, md packages.Metadata) error
	// Parallel is how many archives a pass that is not paced (the first, or a request's:
	// Hurry) downloads and installs at once; 0 is DefaultParallel. Paced passes install one
	// at a time.
	Parallel int
	// RetryMin and RetryMax bound the back-off between attempts for a failing unit: the
	// first retry after RetryMin, doubling up to RetryMax. 0 is the default.
	RetryMin, RetryMax time.Duration
	// Now is the clock of the back-off and of pacing; nil is time.Now.
	Now func() time.Time
	// Duty is the share of one core a background install may take (see DefaultDuty); 0 is
	// DefaultDuty, 1 or more does not pace.
	Duty float64
	// Sleep waits d, or until ctx ends, between two slices of a paced install's work; nil
	// waits on a timer. Tests count the sleeps instead of timing them.
	Sleep func(ctx context.Context, d time.Duration)
	// Activity counts the requests the instance has taken in: a paced install sleeps only
	// after a slice of work during which it grew, so an instance that serves nothing
	// converges at full speed and one under load gives its requests the cores. nil paces
	// every install.
	Activity func() uint64
}

// Defaults of Options.
const (
	DefaultParallel = 4
	DefaultRetryMin = 2 * time.Second
	DefaultRetryMax = 5 * time.Minute
	// DefaultDuty paces the installs of the passes after the first, while the instance
	// serves, to a fiftieth of one core: an install at full speed (gunzip, SHA-256,
	// hundreds of files written) takes a core from the requests for as long as it lasts,
	// which on a small machine cut serving to a twentieth while ten 1 MB workers came in;
	// a tenth still cost a tenth of the requests, and a twentieth 8 % (bench:
	// BenchmarkClusterReconcile): besides its own work, each install costs the machine work
	// that pacing does not see (the file system's, the collection of its garbage), so the
	// loss scales with the duty. Converging some seconds later under load costs nothing the
	// cluster promises; the first pass, before the instance is ready, what a request waits
	// for, and an instance that serves nothing (Options.Activity) are not paced.
	DefaultDuty = 0.02
)

// Pacing is a token bucket of work time, filled at the duty: paceSlice is the debt at which a
// paced install sleeps (short enough that a request never waits long behind it for a core,
// long enough that the sleeps stay few), paceBurst the work an install may do at once after
// a quiet spell, so that the small install of a single upload reaches every instance
// without a sleep: only a stream of installs is spread out.
const (
	paceSlice = 10 * time.Millisecond
	paceBurst = 50 * time.Millisecond
)

// Reconciler converges the local catalogs with the desired state, one pass at a time.
type Reconciler struct {
	opts Options

	mu      sync.Mutex       // one pass or Commit at a time; guards failing and local
	failing map[key]*Failure // the standing failure of each unit version, while it is retried
	local   map[key]bool     // trees reported as Local by the last pass

	// waiting counts the callers waiting for mu: a paced pass stops pacing and leaves its
	// installs not begun to the next pass, so an upload or a request waits for one install
	// at most. sleeper ends the paced install's sleep under way, if any.
	waiting atomic.Int32
	wake    sync.Mutex
	sleeper context.CancelFunc
	// kick asks Run for a pass: installs were left to it.
	kick chan struct{}
	// pending names the units (kind, name) with an install planned by the pass under way or
	// deferred by the last one: a request for one does not wait for the paced passes.
	pendMu  sync.Mutex
	pending map[[2]string]bool
	// tokens is the paced installs' bucket at filled, used by one paced install at a time.
	tokens time.Duration
	filled time.Time
	// seen is Options.Activity at the paced install's last slice.
	seen uint64

	ready     chan struct{}
	readyOnce sync.Once
}

// key names a unit version: a row's, or an installed tree's.
type key struct{ kind, name, version string }

// New returns a reconciler; it does nothing until a pass.
func New(o Options) (*Reconciler, error) {
	switch {
	case o.Desired == nil:
		return nil, errors.New("reconcile: no desired state")
	case o.Store == nil:
		return nil, errors.New("reconcile: no package store")
	case o.Workers == nil || o.Plugins == nil:
		return nil, errors.New("reconcile: the worker and plugin catalogs are both required")
	}
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	if o.RetryMin <= 0 {
		o.RetryMin = DefaultRetryMin
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(DefaultRetryMax, o.RetryMin)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Duty <= 0 {
		o.Duty = DefaultDuty
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	return &Reconciler{opts: o, failing: map[key]*Failure{}, local: map[key]bool{}, ready: make(chan struct{}),
		kick: make(chan struct{}, 1), tokens: paceBurst}, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (r *Reconciler) setPending(units map[[2]string]bool) {
	r.pendMu.Lock()
	defer r.pendMu.Unlock()
	r.pending = units
}

// Pending reports whether the unit kind/name has an install that the pass under way has
// planned or the last pass deferred: it is in the desired state, and Hurry installs it at
// once.
func (r *Reconciler) Pending(kind, name string) bool {
	r.pendMu.Lock()
	defer r.pendMu.Unlock()
	return r.pending[[2]string{kind, name}]
}

// lock takes mu, telling a paced pass that holds it to hurry.
func (r *Reconciler) lock() {
	r.waiting.Add(1)
	r.wake.Lock()
	if r.sleeper != nil {
		r.sleeper()
	}
	r.wake.Unlock()
	r.mu.Lock()
	r.waiting.Add(-1)
}

// hurried reports whether a caller waits for the pass.
func (r *Reconciler) hurried() bool { return r.waiting.Load() > 0 }

// pause sleeps d for a paced install, unless a caller waits for the pass or comes meanwhile.
func (r *Reconciler) pause(ctx context.Context, d time.Duration) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.wake.Lock()
	r.sleeper = cancel
	r.wake.Unlock()
	if !r.hurried() {
		r.opts.Sleep(ctx, d)
	}
	r.wake.Lock()
	r.sleeper = nil
	r.wake.Unlock()
}

// pacer paces one install to the reconciler's duty: its work, measured on the clock from
// read to read of the archive (a read that waits on the store counts as work: pacing errs
// towards the slower install), is taken from the bucket, which fills at the duty; in debt,
// it sleeps until the bucket is even.
type pacer struct {
	r    *Reconciler
	ctx  context.Context
	last time.Time
}

func (pc *pacer) pace() error {
	if err := pc.ctx.Err(); err != nil {
		return err
	}
	r, now := pc.r, pc.r.opts.Now()
	if !r.filled.IsZero() {
		r.tokens = min(paceBurst, r.tokens+time.Duration(float64(now.Sub(r.filled))*r.opts.Duty))
	}
	r.filled = now
	if !pc.last.IsZero() {
		r.tokens -= now.Sub(pc.last)
	} else if r.opts.Activity != nil {
		r.seen = r.opts.Activity() // what came before this install is not its concern
	}
	pc.last = now
	if r.hurried() {
		r.tokens = max(r.tokens, 0) // the work a caller waits for is not paid back
		return nil
	}
	if r.tokens > -paceSlice {
		return nil
	}
	if r.opts.Activity != nil {
		n := r.opts.Activity()
		quiet := n == r.seen
		r.seen = n
		if quiet {
			r.tokens = 0 // no request came during the slice: nobody to give the core to
			return nil
		}
	}
	r.pause(pc.ctx, time.Duration(float64(-r.tokens)/r.opts.Duty))
	pc.last = r.opts.Now()
	return pc.ctx.Err()
}

// Ready is closed once a pass has completed: it read the desired state and went through
// every unit, whether or not each converged (a failing unit keeps its old tree and is
// retried; holding readiness on it would let one bad object, or an outage of the store, keep
// every restarted instance out of service).
func (r *Reconciler) Ready() <-chan struct{} { return r.ready }

func (r *Reconciler) catalog(kind string) *packages.Catalog {
	switch kind {
	case keystore.UnitWorker:
		return r.opts.Workers
	case keystore.UnitPlugin:
		return r.opts.Plugins
	}
	return nil
}

// backoff is the wait after the nth failed attempt.
func (r *Reconciler) backoff(attempts int) time.Duration {
	d := r.opts.RetryMin
	for range min(attempts-1, 30) {
		if d *= 2; d >= r.opts.RetryMax {
			return r.opts.RetryMax
		}
	}
	return d
}

// Reconcile runs one pass: it reads the desired state, compares it with both catalogs and
// converges them, and reports what it did and what failed. An error means the pass could not
// compare (the desired state or a catalog folder could not be read, or ctx ended); failures
// of single units are in the result, never an error.
//
// Once the reconciler is Ready its installs are paced (Options.Duty) and run one at a time,
// and when a caller comes to wait for the pass (Commit, Hurry), the install under way
// completes unpaced and the others are left to the next pass (Result.Deferred).
func (r *Reconciler) Reconcile(ctx context.Context) (Result, error) {
	return r.reconcile(ctx, nil)
}

// Hurry runs a pass for a request that waits for the units want selects (by kind and name):
// their installs run at once, unpaced. Once the reconciler is Ready, the other installs are
// left to Run's next pass (Result.Deferred), which paces them; before, Hurry installs
// everything at full speed, as the first pass does.
func (r *Reconciler) Hurry(ctx context.Context, want func(kind, name string) bool) (Result, error) {
	res, err := r.reconcile(ctx, want)
	if len(res.Deferred) > 0 {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, want func(kind, name string) bool) (Result, error) {
	r.lock()
	defer r.mu.Unlock()
	rows, err := r.opts.Desired.Versions(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("reading the desired state: %w", err)
	}
	p := &pass{r: r, now: r.opts.Now(), seen: map[key]bool{}, local: map[key]bool{}}
	select {
	case <-r.ready:
		p.paced, p.want = want == nil && r.opts.Duty < 1, want
	default: // the first pass: the instance does not serve yet
	}
	var tasks []task
	for _, kind := range []string{keystore.UnitWorker, keystore.UnitPlugin} {
		var of []keystore.UnitVersion
		for _, row := range rows {
			p.res.Change = max(p.res.Change, row.Change)
			if row.Kind == kind {
				of = append(of, row)
			}
		}
		t, err := p.plan(r.catalog(kind), kind, of)
		if err != nil {
			return Result{}, err
		}
		tasks = append(tasks, t...)
	}
	planned := map[[2]string]bool{}
	for _, t := range tasks {
		if t.op == OpInstall {
			planned[[2]string{t.unit.Kind, t.unit.Name}] = true
		}
	}
	r.setPending(planned)
	p.run(ctx, tasks)
	deferred := map[[2]string]bool{}
	for _, u := range p.res.Deferred {
		deferred[[2]string{u.Kind, u.Name}] = true
	}
	r.setPending(deferred)
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	for k := range r.failing {
		if !p.seen[k] { // converged, or no longer wanted
			delete(r.failing, k)
		}
	}
	r.local = p.local
	p.res.sort()
	r.readyOnce.Do(func() { close(r.ready) })
	return p.res, nil
}

// pass is the state of one Reconcile.
type pass struct {
	r    *Reconciler
	now  time.Time
	mu   sync.Mutex // res, seen and the reconciler's failing while tasks run
	res  Result
	seen map[key]bool // units with a planned or standing operation
	// local collects the trees reported as Local.
	local map[key]bool
	// paced is set on a pass after the first that no request waits for; want selects the
	// units a request waits for, whose installs are the only ones a hurried pass makes.
	paced bool
	want  func(kind, name string) bool
	// storeDown holds the first failure of the pass that no download can get past (the store
	// unreachable, the credentials or the bucket refused): the downloads after it are not
	// tried, so an outage costs one attempt per pass, not one per unit.
	storeDown atomic.Pointer[error]
}

// task is an operation a pass runs.
type task struct {
	op   Op
	cat  *packages.Catalog
	unit Unit
	row  keystore.UnitVersion // install, enable, disable: the live row
	dir  packages.Dir         // remove, enable, disable: the tree's folder
}

// tree is an installed tree of an uploaded folder, as a pass finds it.
type tree struct {
	dir      packages.Dir
	version  packages.Version
	sum      string // its record
	recorded bool
}

// plan compares the rows of one kind with its catalog and returns the operations that
// converge it; it removes records whose tree is gone, and reports the trees it leaves alone.
func (p *pass) plan(cat *packages.Catalog, kind string, rows []keystore.UnitVersion) ([]task, error) {
	layout := cat.Layout()
	units, err := cat.List()
	if err != nil {
		return nil, fmt.Errorf("listing the installed %ss: %w", layout.Noun, err)
	}
	records := map[string]map[string]string{} // folder → rel → sum
	for _, d := range cat.Dirs() {
		if d.BuiltIn {
			continue
		}
		root, err := os.OpenRoot(d.Path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", d.Path, err)
		}
		recs, err := readRecords(root, layout)
		root.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.Path, err)
		}
		records[d.Path] = recs
	}
	trees, builtIn := map[string]tree{}, map[string]packages.Dir{}
	for _, u := range units {
		if u.Dir.BuiltIn {
			builtIn[u.Name] = u.Dir
			continue
		}
		for _, v := range u.Versions {
			rel := layout.RelPath(u.Name, v.Version)
			sum, ok := records[u.Dir.Path][rel]
			trees[rel] = tree{dir: u.Dir, version: v, sum: sum, recorded: ok}
		}
	}

	// The desired row of each tree: a worker version's own; a plugin's live version (there is
	// one at most), else its latest removal.
	desired := map[string]keystore.UnitVersion{}
	for _, row := range rows {
		if packages.ValidateName(row.Name) != nil || packages.ValidateVersion(row.Version) != nil {
			if row.Live() {
				u := Unit{Kind: kind, Name: row.Name, Version: row.Version, SHA256: row.SHA256, Change: row.Change}
				p.fail(u, OpInstall, ClassInstall, fmt.Errorf("%s %q@%q is not a valid name and version here", kind, row.Name, row.Version))
			}
			continue
		}
		rel := layout.RelPath(row.Name, row.Version)
		if cur, ok := desired[rel]; ok && (cur.Live() && !row.Live() || cur.Live() == row.Live() && cur.Change > row.Change) {
			continue
		}
		desired[rel] = row
	}

	var tasks []task
	for _, rel := range slices.Sorted(maps.Keys(desired)) {
		row := desired[rel]
		if !row.Live() {
			continue
		}
		u := Unit{Kind: kind, Name: row.Name, Version: row.Version, SHA256: row.SHA256, Change: row.Change}
		t, ok := trees[rel]
		if ok {
			u.Path = t.version.Path
		}
		shadow, shadowed := builtIn[row.Name]
		switch {
		case ok && t.recorded && t.sum == row.SHA256 && t.version.Version == row.Version:
			if t.version.Enabled != row.Enabled {
				op := OpDisable
				if row.Enabled {
					op = OpEnable
				}
				tasks = p.add(tasks, task{op: op, cat: cat, unit: u, row: row, dir: t.dir})
			}
		case shadowed:
			// Checked here, before a download the install would refuse.
			if p.due(u, OpInstall) {
				p.fail(u, OpInstall, ClassInstall, fmt.Errorf("%s %q is provided by the built-in folder %s, which comes first",
					layout.Noun, row.Name, shadow.Path))
			}
		default:
			tasks = p.add(tasks, task{op: OpInstall, cat: cat, unit: u, row: row})
		}
	}
	for _, rel := range slices.Sorted(maps.Keys(trees)) {
		t := trees[rel]
		if row, ok := desired[rel]; ok && row.Live() {
			continue
		}
		u := Unit{Kind: kind, Name: t.version.Metadata.Name, Version: t.version.Version, SHA256: t.sum, Path: t.version.Path}
		if row, ok := desired[rel]; ok {
			u.Change = row.Change
		}
		if !t.recorded {
			u.SHA256 = ""
			p.local[u.key()] = true
			p.res.Local = append(p.res.Local, Local{Unit: u, New: !p.r.local[u.key()]})
			continue
		}
		tasks = p.add(tasks, task{op: OpRemove, cat: cat, unit: u, dir: t.dir})
	}
	// Records whose tree is gone (removed by hand, or an install that never completed) go;
	// an install writes its own.
	for dir, recs := range records {
		for rel := range recs {
			if t, ok := trees[rel]; ok && t.dir.Path == dir {
				continue
			}
			if root, err := os.OpenRoot(dir); err == nil {
				_ = removeRecord(root, rel)
				root.Close()
			}
		}
	}
	return tasks, nil
}

// add appends t to tasks unless its unit waits for a retry.
func (p *pass) add(tasks []task, t task) []task {
	if !p.due(t.unit, t.op) {
		return tasks
	}
	return append(tasks, t)
}

// due reports whether an operation on u may run now: it has not failed for this row, or its
// retry is due. One that waits is reported with its standing failure.
func (p *pass) due(u Unit, op Op) bool {
	p.seen[u.key()] = true
	f := p.r.failing[u.key()]
	if f == nil || f.Change != u.Change || f.SHA256 != u.SHA256 || f.Op != op || !p.now.Before(f.Retry) {
		return true
	}
	standing := *f
	standing.New = false
	p.res.Failed = append(p.res.Failed, standing)
	return false
}

// fail records a failed operation on u: new unless it failed the same way for the same row
// before.
func (p *pass) fail(u Unit, op Op, class Class, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := u.key()
	p.seen[k] = true
	f := p.r.failing[k]
	if f == nil || f.Change != u.Change || f.SHA256 != u.SHA256 || f.Op != op {
		f = &Failure{Unit: u, Op: op}
		p.r.failing[k] = f
	}
	f.New = f.Attempts == 0 || f.Class != class
	f.Class, f.Err, f.Unit = class, err, u
	f.Attempts++
	f.Retry = p.now.Add(p.r.backoff(f.Attempts))
	p.res.Failed = append(p.res.Failed, *f)
}

// done records a completed operation.
func (p *pass) done(t task, list *[]Unit) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.r.failing, t.unit.key())
	*list = append(*list, t.unit)
}

// run runs the tasks: removals and manifest changes first, then the installs. A paced pass
// installs one at a time until a caller waits for it; a hurried one installs only the units
// a request wants; the others are deferred to the next pass. Else the first install goes
// alone, the others Parallel at a time.
func (p *pass) run(ctx context.Context, tasks []task) {
	var installs []task
	for _, t := range tasks {
		switch {
		case t.op == OpRemove:
			p.remove(t)
		case t.op != OpInstall:
			p.toggle(t)
		case p.want != nil && !p.want(t.unit.Kind, t.unit.Name):
			p.res.Deferred = append(p.res.Deferred, t.unit)
		default:
			installs = append(installs, t)
		}
	}
	if p.paced {
		for i, t := range installs {
			if p.r.hurried() {
				for _, t := range installs[i:] {
					p.res.Deferred = append(p.res.Deferred, t.unit)
				}
				return
			}
			p.install(ctx, t)
		}
		return
	}
	if len(installs) == 0 {
		return
	}
	// The first download goes alone: when the store is down, the others are not tried.
	p.install(ctx, installs[0])
	sem := make(chan struct{}, p.r.opts.Parallel)
	var wg sync.WaitGroup
	for _, t := range installs[1:] {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p.install(ctx, t)
		})
	}
	wg.Wait()
}

// remove removes a recorded tree, then its record: a crash in between leaves a record
// without a tree, which the next pass removes.
func (p *pass) remove(t task) {
	var err error
	if t.cat.Layout().Versioned {
		err = t.cat.RemoveVersion(t.unit.Name, t.unit.Version)
	} else {
		err = t.cat.Remove(t.unit.Name)
	}
	var pe *packages.Error
	if errors.As(err, &pe) && pe.Kind == packages.NotFound {
		err = nil // gone meanwhile
	}
	if err == nil {
		err = withRoot(t.dir.Path, func(root *os.Root) error {
			return removeRecord(root, t.cat.Layout().RelPath(t.unit.Name, t.unit.Version))
		})
	}
	if err != nil {
		p.fail(t.unit, OpRemove, ClassInstall, err)
		return
	}
	p.done(t, &p.res.Removed)
}

// toggle writes the row's enabled state into the tree's manifest.
func (p *pass) toggle(t task) {
	if err := t.cat.SetEnabled(t.unit.Name, t.unit.Version, t.row.Enabled); err != nil {
		p.fail(t.unit, t.op, ClassInstall, err)
		return
	}
	list := &p.res.Disabled
	if t.row.Enabled {
		list = &p.res.Enabled
	}
	p.done(t, list)
}

// install downloads the row's archive and installs it.
func (p *pass) install(ctx context.Context, t task) {
	if first := p.storeDown.Load(); first != nil {
		p.fail(t.unit, OpInstall, classOf(*first), fmt.Errorf("not tried after an earlier download of this pass failed: %w", *first))
		return
	}
	var pace func() error
	if p.paced {
		pace = (&pacer{r: p.r, ctx: ctx}).pace
	}
	path, class, err := p.r.download(ctx, t.cat, t.row, pace)
	if ctx.Err() != nil {
		return // the pass is abandoned; nothing is recorded
	}
	if err != nil {
		if class == ClassUnavailable || errors.Is(err, packagestore.ErrDenied) || errors.Is(err, packagestore.ErrNoBucket) {
			p.storeDown.CompareAndSwap(nil, &err)
		}
		p.fail(t.unit, OpInstall, class, err)
		return
	}
	t.unit.Path = path
	p.done(t, &p.res.Installed)
}

// download reads the row's archive from the store into the catalog's staging, where it is
// checked as an upload is, and installs it. It returns the tree's folder, or the class of
// the failure.
func (r *Reconciler) download(ctx context.Context, cat *packages.Catalog, row keystore.UnitVersion, pace func() error) (string, Class, error) {
	sum, err := packagestore.ParseSum(row.SHA256)
	if err != nil {
		return "", ClassInstall, err
	}
	if limit := cat.Limits().Upload; limit > 0 && row.Size > limit {
		return "", ClassInstall, packages.UploadTooLarge(limit)
	}
	rc, err := r.opts.Store.Open(ctx, sum, row.Size)
	if err != nil {
		return "", classOf(err), err
	}
	defer rc.Close()
	src := &source{r: bufio.NewReader(rc)}
	name, err := src.archiveName()
	if err != nil {
		if src.err != nil {
			return "", classOf(src.err), src.err
		}
		return "", ClassInstall, err
	}
	s, err := cat.StageWith(name, src, func(md packages.Metadata) error {
		if md.Name != row.Name || md.Version != row.Version {
			return fmt.Errorf("the archive holds %s@%s, not %s@%s as its row says", md.Name, md.Version, row.Name, row.Version)
		}
		if r.opts.Admit != nil {
			return r.opts.Admit(row.Kind, md)
		}
		return nil
	}, packages.StageOptions{Pace: pace, SpoolFirst: true}) // the store verifies the download at its end
	if err == nil {
		defer s.Discard()
	}
	if src.err != nil {
		// The store's verdict first: a read that failed verification or broke off installs
		// nothing, whatever the extraction made of the bytes before it.
		return "", classOf(src.err), src.err
	}
	if err != nil {
		return "", ClassInstall, err
	}
	if s.SHA256 != row.SHA256 { // the store verified it; checked again where it is installed
		return "", ClassCorrupt, &packagestore.CorruptError{Want: sum, WantSize: row.Size, GotSize: row.Size}
	}
	path, err := commit(cat, row, s)
	if err != nil {
		return "", ClassInstall, err
	}
	return path, "", nil
}

// source remembers the first error of the store's reader, so that a refused install tells
// the store's failure (an altered object, a broken connection) from the archive's.
type source struct {
	r   *bufio.Reader
	err error
}

func (s *source) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	s.saw(err)
	return n, err
}

func (s *source) saw(err error) {
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
}

// archiveName names the archive by its format, which the store does not keep: uploads are
// .tgz, .tar.gz or .zip, told apart by their first bytes.
func (s *source) archiveName() (string, error) {
	head, err := s.r.Peek(4)
	s.saw(err)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return "archive.tgz", nil
	case bytes.HasPrefix(head, []byte("PK")):
		return "archive.zip", nil
	}
	return "", errors.New("the archive is neither a gzip-compressed tar nor a zip")
}

// commit installs a staged package as the row wants it: the row's enabled state written into
// its manifest before it is served, recorded as under way, swapped in, recorded as the row's
// archive.
func commit(cat *packages.Catalog, row keystore.UnitVersion, s *packages.Staged) (string, error) {
	layout := cat.Layout()
	if s.Metadata.Enabled != row.Enabled {
		err := withRoot(s.Tree, func(root *os.Root) error {
			return packages.WriteEnabled(root, ".", row.Enabled, layout.Versioned)
		})
		if errors.Is(err, packages.ErrNoManifest) {
			return "", fmt.Errorf("%s %s has no manifest.yaml to disable it in", layout.Noun, row.Name)
		}
		if err != nil {
			return "", fmt.Errorf("writing the enabled state of %s: %w", row.Name, err)
		}
	}
	var path string
	err := withRoot(s.Dir().Path, func(root *os.Root) error {
		rel := layout.RelPath(row.Name, row.Version)
		prev, had, err := readRecord(root, rel)
		if err != nil {
			return err
		}
		if err := writeRecord(root, rel, ""); err != nil {
			return err
		}
		in, err := s.Commit()
		if err != nil {
			if had {
				_ = writeRecord(root, rel, prev)
			} else {
				_ = removeRecord(root, rel)
			}
			return err
		}
		path = in.Path
		return writeRecord(root, rel, row.SHA256)
	})
	return path, err
}

func withRoot(dir string, fn func(*os.Root) error) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return fn(root)
}

// Commit installs a package staged from an upload this instance received, once its archive
// is in the store and its live row written, without downloading it again: the upload
// answers with the unit installed here, and this instance's next pass finds it converged.
// It waits for a running pass; when that pass installed the row already, the staged copy is
// discarded by the caller as usual and Commit reports the install.
func (r *Reconciler) Commit(row keystore.UnitVersion, s *packages.Staged) (packages.Installed, error) {
	r.lock()
	defer r.mu.Unlock()
	return r.commitLocked(row, s)
}

// WriteAndCommit writes the live row of a package staged from an upload with write (to the
// desired state, once its archive is in the store) and installs the staged tree as Commit
// does, holding passes off in between: a pass started by the new row would otherwise
// download the archive this instance holds. A failed write installs nothing.
func (r *Reconciler) WriteAndCommit(write func() (keystore.UnitVersion, error), s *packages.Staged) (keystore.UnitVersion, packages.Installed, error) {
	r.lock()
	defer r.mu.Unlock()
	row, err := write()
	if err != nil {
		return row, packages.Installed{}, err
	}
	in, err := r.commitLocked(row, s)
	return row, in, err
}

// commitLocked is Commit for a caller that holds mu.
func (r *Reconciler) commitLocked(row keystore.UnitVersion, s *packages.Staged) (packages.Installed, error) {
	cat := r.catalog(row.Kind)
	switch {
	case cat == nil:
		return packages.Installed{}, fmt.Errorf("reconcile: unit kind %q", row.Kind)
	case !row.Live():
		return packages.Installed{}, fmt.Errorf("reconcile: the row of %s@%s is removed", row.Name, row.Version)
	case s.Name != row.Name || s.Version != row.Version || s.SHA256 != row.SHA256:
		return packages.Installed{}, fmt.Errorf("reconcile: the staged package %s@%s (sha256 %s) is not the row's %s@%s (sha256 %s)",
			s.Name, s.Version, s.SHA256, row.Name, row.Version, row.SHA256)
	}
	u := Unit{Kind: row.Kind, Name: row.Name, Version: row.Version}
	delete(r.failing, u.key())
	if r.installed(cat, row) {
		return s.Installed, nil
	}
	path, err := commit(cat, row, s)
	if err != nil {
		return packages.Installed{}, err
	}
	in := s.Installed
	in.Path = path
	return in, nil
}

// installed reports whether the row's tree is installed from its archive.
func (r *Reconciler) installed(cat *packages.Catalog, row keystore.UnitVersion) bool {
	u, err := cat.Lookup(row.Name)
	if err != nil || u.Dir.BuiltIn {
		return false
	}
	if _, ok := u.Find(row.Version); !ok {
		return false
	}
	var sum string
	var ok bool
	err = withRoot(u.Dir.Path, func(root *os.Root) (err error) {
		sum, ok, err = readRecord(root, cat.Layout().RelPath(row.Name, row.Version))
		return err
	})
	return err == nil && ok && sum == row.SHA256
}
