package packages

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Layout describes how one kind of unit is stored.
type Layout struct {
	// Noun names the unit kind in messages and error codes: "worker" or "plugin".
	Noun string
	// Versioned units keep one folder per version (<name>/<version>/); flat units keep one
	// folder (<name>/) whose metadata carries the version.
	Versioned bool
}

// Layouts of the two unit kinds.
var (
	WorkerLayout = Layout{Noun: "worker", Versioned: true}
	PluginLayout = Layout{Noun: "plugin"}
)

func (l Layout) code(format string) string {
	return fmt.Sprintf(format, strings.ToUpper(l.Noun))
}

// Dir is a folder that holds units.
type Dir struct {
	Path string
	// BuiltIn folders (name starting with ".") come with the image: never an install target,
	// their units never removable.
	BuiltIn bool
}

// Unit is one worker or plugin found on disk.
type Unit struct {
	Name     string
	Dir      Dir
	Path     string    // the unit's folder
	Versions []Version // ascending; one entry for a flat unit
}

// Version is one installed version of a unit.
type Version struct {
	Version  string
	Enabled  bool
	Path     string
	Metadata Metadata
	Size     int64 // bytes in its regular files, as of the scan that read its metadata
}

// Source reports where a unit comes from: "built-in" or "uploaded".
func (u Unit) Source() string {
	if u.Dir.BuiltIn {
		return "built-in"
	}
	return "uploaded"
}

// Names returns the names of units, in order.
func Names(units []Unit) []string {
	names := make([]string, len(units))
	for i, u := range units {
		names[i] = u.Name
	}
	return names
}

// Find returns the version v of the unit.
func (u Unit) Find(v string) (Version, bool) {
	for _, ver := range u.Versions {
		if ver.Version == v {
			return ver, true
		}
	}
	return Version{}, false
}

// Change describes a change the runtime made to a unit.
type Change struct {
	Op      Op
	Name    string
	Version string // "" for a whole unit
}

// Op is the kind of a change.
type Op string

// The kinds of changes.
const (
	OpInstalled Op = "installed" // a version (or plugin) was uploaded, new or replacing one
	OpRemoved   Op = "removed"   // a unit or one version was deleted
	OpEnabled   Op = "enabled"
	OpDisabled  Op = "disabled"
	OpFiles     Op = "files" // the file manager changed files of a version or plugin
)

// Catalog holds the units of one kind found in a list of folders. The first folder that holds
// a name wins; the same name in a later folder is shadowed.
type Catalog struct {
	layout Layout
	dirs   []Dir
	limits Limits

	locks  sync.Map // unit name → *sync.Mutex
	cache  scanCache
	snap   atomic.Pointer[snapshot]
	snapMu sync.Mutex // one rebuild at a time

	// retireDelay keeps a replaced or removed tree readable, renamed aside, before deleting
	// it, so readers that opened it before the change finish on a complete tree.
	retireDelay atomic.Int64 // a time.Duration
	retiring    sync.WaitGroup
	closing     chan struct{}
	closeOnce   sync.Once

	notify atomic.Pointer[func(Change)] // hears every change, once set

	// listGen counts what may change a listing: the runtime's changes and the watcher's events.
	listGen   atomic.Uint64
	listed    atomic.Pointer[unitListing]
	watchOnce sync.Once
	watcher   *watcher // nil until the first listing, or where unavailable
}

// NewCatalog returns a catalog over dirs, in order; folders whose name starts with "." are
// built-in.
func NewCatalog(layout Layout, dirs []string, limits Limits) *Catalog {
	c := &Catalog{layout: layout, limits: limits, closing: make(chan struct{})}
	c.retireDelay.Store(int64(DefaultRetireDelay))
	for _, d := range dirs {
		c.dirs = append(c.dirs, Dir{Path: d, BuiltIn: strings.HasPrefix(filepath.Base(d), ".")})
	}
	return c
}

// DefaultRetireDelay is how long a replaced or removed tree stays readable.
const DefaultRetireDelay = 2 * time.Second

// SetRetireDelay sets how long a replaced or removed tree stays readable, for the trees
// retired from now on; 0 deletes them at once.
func (c *Catalog) SetRetireDelay(d time.Duration) { c.retireDelay.Store(int64(d)) }

// retire deletes the folder rel of d after the retire delay, or at once when the catalog
// closes. Leftovers of a crash are removed by CleanTemp.
func (c *Catalog) retire(d Dir, rel string) {
	remove := func() {
		if root, err := os.OpenRoot(d.Path); err == nil {
			_ = root.RemoveAll(rel)
			root.Close()
		}
	}
	delay := time.Duration(c.retireDelay.Load())
	if delay <= 0 {
		remove()
		return
	}
	c.retiring.Add(1)
	go func() {
		defer c.retiring.Done()
		timer := time.NewTimer(delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-c.closing:
		}
		remove()
	}()
}

// Close deletes retired trees now and waits for it.
func (c *Catalog) Close() {
	c.closeOnce.Do(func() { close(c.closing) })
	c.watchOnce.Do(func() {}) // no watcher starts after this
	if c.watcher != nil {
		c.watcher.close()
	}
	c.retiring.Wait()
}

// Limits returns the catalog's upload limits.
func (c *Catalog) Limits() Limits { return c.limits }

// Layout returns the catalog's layout.
func (c *Catalog) Layout() Layout { return c.layout }

// OnChange makes fn hear, in the changing goroutine, every change the catalog makes or is told
// of (Changed), once its caches are dropped; the shared state passes its event bus here.
func (c *Catalog) OnChange(fn func(Change)) { c.notify.Store(&fn) }

func (c *Catalog) lock(name string) func() {
	m, _ := c.locks.LoadOrStore(name, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// List returns every unit, by folder order and then by name.
func (c *Catalog) List() ([]Unit, error) {
	units, _, _, err := c.Listing()
	return slices.Clone(units), err
}

// Listing returns the units, as List does but shared: the caller must not change the slice,
// with the generation of the listing and whether it was answered from memory. While the catalog's folders can be watched, a listing is kept
// until the runtime changes a unit or the watcher reports a change on disk, and the
// generation names it: answers built from a listing may be kept under its generation. Without
// notifications every listing checks the disk, and cached is false.
func (c *Catalog) Listing() (units []Unit, gen uint64, cached bool, err error) {
	w := c.watch()
	gen = c.listGen.Load() // before the folders are read: a change after it ends the listing
	if l := c.listed.Load(); w != nil && l != nil && l.gen == gen {
		return l.units, gen, true, nil
	}
	units, cached, err = c.scan(w, gen)
	return units, gen, cached, err
}

// scan reads the folders through the scan cache (which checks each folder's time) and keeps
// the listing under gen when the watcher covers every folder read.
func (c *Catalog) scan(w *watcher, gen uint64) ([]Unit, bool, error) {
	units, visited, err := c.cache.list(c.layout, c.dirs)
	if err != nil {
		return nil, false, err
	}
	if w != nil && w.watch(visited) && c.listGen.Load() == gen {
		c.listed.Store(&unitListing{gen: gen, units: units})
		return units, true, nil
	}
	return units, false, nil
}

// unitListing is a listing kept while its generation is current.
type unitListing struct {
	gen   uint64
	units []Unit
}

// watch returns the catalog's watcher, started on the first listing (not by NewCatalog, so
// that caddy validate starts nothing), or nil where notifications are unavailable.
func (c *Catalog) watch() *watcher {
	c.watchOnce.Do(func() {
		select {
		case <-c.closing:
			return
		default:
		}
		c.watcher = newWatcher(func() { c.listGen.Add(1) })
	})
	return c.watcher
}

// Lookup returns the unit called name.
func (c *Catalog) Lookup(name string) (Unit, error) {
	if err := ValidateName(name); err != nil {
		return Unit{}, c.notFound(name)
	}
	units, gen, cached, err := c.Listing()
	if err != nil {
		return Unit{}, err
	}
	if u, ok := unitIn(units, name); ok {
		return u, nil
	}
	if cached {
		// A unit written by hand a moment ago may not be in the kept listing yet (the watcher
		// reports it shortly): the folders, whose times the scan checks, decide.
		if units, _, err = c.scan(c.watch(), gen); err != nil {
			return Unit{}, err
		}
		if u, ok := unitIn(units, name); ok {
			return u, nil
		}
	}
	return Unit{}, c.notFound(name)
}

// unitIn returns the unit called name in units, a copy the caller may change.
func unitIn(units []Unit, name string) (Unit, bool) {
	for _, u := range units {
		if u.Name == name {
			u.Versions = slices.Clone(u.Versions) // the caller's, as from List
			return u, true
		}
	}
	return Unit{}, false
}

func (c *Catalog) notFound(name string) error {
	return newErr(NotFound, c.layout.code("%s_NOT_FOUND"), "no %s named %q", c.layout.Noun, name)
}

// installDir returns the first writable folder that is not built-in.
func (c *Catalog) installDir() (Dir, error) {
	for _, d := range c.dirs {
		if !d.BuiltIn && writable(d.Path) {
			return d, nil
		}
	}
	return Dir{}, newErr(Invalid, c.layout.code("NO_%s_DIRS"),
		"no writable %s folder to install into; add one whose name does not start with '.' to %s_dirs", c.layout.Noun, c.layout.Noun)
}

// relPath is a unit's (or version's) folder relative to its catalog folder.
func (c *Catalog) relPath(name, version string) string { return c.layout.RelPath(name, version) }

// RelPath is the folder of a unit (version "") or of one of its versions, relative to the
// catalog folder, with '/' between elements: <name>/<version> for versioned units, <name> for
// flat ones, whose metadata carries the version.
func (l Layout) RelPath(name, version string) string {
	if l.Versioned && version != "" {
		return path.Join(name, version)
	}
	return name
}

// Remove removes a unit with all its versions. Built-in units cannot be removed.
func (c *Catalog) Remove(name string) error {
	defer c.lock(name)()
	u, err := c.Lookup(name)
	if err != nil {
		return err
	}
	if u.Dir.BuiltIn {
		return newErr(Forbidden, c.layout.code("BUILT_IN_%s_REMOVE_FORBIDDEN"),
			"%s %q is built-in (from %s) and cannot be removed", c.layout.Noun, name, u.Dir.Path)
	}
	if err := c.removeTree(u.Dir, c.relPath(name, "")); err != nil {
		return err
	}
	c.changed(Change{Op: OpRemoved, Name: name})
	return nil
}

// RemoveVersion removes one version of a versioned unit, and the unit's folder with its last
// version.
func (c *Catalog) RemoveVersion(name, version string) error {
	defer c.lock(name)()
	u, err := c.Lookup(name)
	if err != nil {
		return err
	}
	if _, ok := u.Find(version); !ok {
		return newErr(NotFound, c.layout.code("%s_VERSION_NOT_FOUND"), "%s %q has no version %q", c.layout.Noun, name, version)
	}
	if u.Dir.BuiltIn {
		return newErr(Forbidden, c.layout.code("BUILT_IN_%s_VERSION_REMOVE_FORBIDDEN"),
			"%s %q is built-in (from %s); its versions cannot be removed", c.layout.Noun, name, u.Dir.Path)
	}
	if err := c.removeTree(u.Dir, c.relPath(name, version)); err != nil {
		return err
	}
	if len(u.Versions) == 1 {
		if err := c.removeTree(u.Dir, c.relPath(name, "")); err != nil {
			return err
		}
	}
	c.changed(Change{Op: OpRemoved, Name: name, Version: version})
	return nil
}

// removeTree moves a folder aside in one rename, so readers never see it half-deleted, and
// retires it; an emptied scope folder goes too.
func (c *Catalog) removeTree(d Dir, rel string) error {
	root, err := os.OpenRoot(d.Path)
	if err != nil {
		return err
	}
	defer root.Close()
	aside := tempPrefix + randomSuffix()
	if err := root.Rename(rel, aside); err != nil {
		return fmt.Errorf("removing %s: %w", rel, err)
	}
	c.retire(d, aside)
	if first, _, _ := strings.Cut(rel, "/"); strings.HasPrefix(first, "@") {
		_ = root.Remove(first) // a scope folder goes only when empty: Remove fails otherwise
	}
	return nil
}

// SetEnabled writes the enabled flag of a version (versioned units) or of the unit (flat
// units, version ""). A worker with only package.json gets a manifest.yaml; a plugin without
// a manifest is refused.
func (c *Catalog) SetEnabled(name, version string, enabled bool) error {
	defer c.lock(name)()
	u, err := c.Lookup(name)
	if err != nil {
		return err
	}
	rel := c.relPath(name, "")
	if c.layout.Versioned {
		if _, ok := u.Find(version); !ok {
			return newErr(NotFound, c.layout.code("%s_VERSION_NOT_FOUND"), "%s %q has no version %q", c.layout.Noun, name, version)
		}
		rel = c.relPath(name, version)
	}
	root, err := os.OpenRoot(u.Dir.Path)
	if err != nil {
		return err
	}
	defer root.Close()
	err = WriteEnabled(root, rel, enabled, c.layout.Versioned)
	switch {
	case errors.Is(err, ErrNoManifest):
		return newErr(NotFound, c.layout.code("%s_MANIFEST_NOT_FOUND"),
			"%s %q has no manifest.yaml or manifest.yml to edit", c.layout.Noun, name)
	case errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS):
		return newErr(Forbidden, c.layout.code("%s_READ_ONLY"), "%s %q cannot be changed: its folder %s is read-only", c.layout.Noun, name, u.Dir.Path)
	case err != nil:
		return err
	}
	op := OpDisabled
	if enabled {
		op = OpEnabled
	}
	c.changed(Change{Op: op, Name: name, Version: version})
	return nil
}

// Dirs returns the catalog's folders, in order.
func (c *Catalog) Dirs() []Dir { return append([]Dir(nil), c.dirs...) }

// Forget drops the cached scans, so the next listing reads the folders again.
func (c *Catalog) Forget() {
	c.listGen.Add(1)
	c.cache.invalidate()
	c.snap.Store(nil)
}

// Changed records a change made to a unit's files from outside the catalog (the file
// manager): cached scans are dropped and the change passed on (OnChange).
func (c *Catalog) Changed(ch Change) { c.changed(ch) }

// changed drops cached scans and passes the change on. A change to one unit drops that
// unit's scans alone: the others' sizes cost a walk of every file of theirs, which a
// listing after each install of a reconcile would otherwise pay again for every unit.
func (c *Catalog) changed(ch Change) {
	c.forget(ch)
	c.publish(ch)
}

// forget drops the cached scans a change affects: those of its version alone when it names
// one, for the unit's other versions are as they were.
func (c *Catalog) forget(ch Change) {
	if ch.Name == "" {
		c.Forget()
		return
	}
	c.listGen.Add(1)
	c.cache.invalidateUnit(c.dirs, c.relPath(ch.Name, ch.Version))
	c.snap.Store(nil)
}

// publish passes a change on.
func (c *Catalog) publish(ch Change) {
	if fn := c.notify.Load(); fn != nil {
		(*fn)(ch)
	}
}

// SnapshotTTL is how long Find trusts a snapshot before checking the disk again; changes the
// runtime makes drop the snapshot at once.
const SnapshotTTL = time.Second

// snapshot is the units as of a scan, by name, with the modification times of the folders a
// new unit would appear in.
type snapshot struct {
	at     time.Time
	units  map[string]Unit
	mtimes map[string]time.Time // catalog and scope folders → mtime at the scan
	// racy is set when a folder changed just before the scan: a change right after it may
	// carry the same coarse timestamp, so the times cannot tell and unknown names rescan.
	racy bool
}

// Find returns the unit called name for serving, from a snapshot: no disk access for a known
// name within SnapshotTTL. For an unknown name it looks only at the times of the folders such a
// unit would be in, so a unit written by hand is found at once while a flood of unknown names
// costs a few stat calls, not a rescan.
func (c *Catalog) Find(name string) (Unit, bool) {
	s := c.snap.Load()
	if s == nil || time.Since(s.at) > SnapshotTTL {
		s = c.rebuild(s)
	}
	if u, ok := s.units[name]; ok {
		return u, true
	}
	if !s.stale(c.dirs, name) {
		return Unit{}, false
	}
	s = c.rebuild(s)
	u, ok := s.units[name]
	return u, ok
}

// rebuild scans again, unless another caller already replaced old.
func (c *Catalog) rebuild(old *snapshot) *snapshot {
	c.snapMu.Lock()
	defer c.snapMu.Unlock()
	if cur := c.snap.Load(); cur != nil && cur != old {
		return cur
	}
	s := &snapshot{at: time.Now(), units: map[string]Unit{}, mtimes: map[string]time.Time{}}
	// Folder times first: a change during the scan then shows as stale later, never missed.
	for _, d := range c.dirs {
		s.mtimes[d.Path] = modTime(d.Path)
	}
	defer func() {
		for _, m := range s.mtimes {
			s.racy = s.racy || !settled(m, s.at)
		}
	}()
	// The disk itself, not the kept listing: a snapshot is rebuilt when its folders' times say
	// something changed, which may be before the watcher has told.
	units, _, err := c.scan(c.watch(), c.listGen.Load())
	if err != nil {
		return s
	}
	for _, u := range units {
		s.units[u.Name] = u
		if scope, _ := SplitName(u.Name); scope != "" {
			p := filepath.Join(u.Dir.Path, scope)
			if _, ok := s.mtimes[p]; !ok {
				s.mtimes[p] = modTime(p)
			}
		}
	}
	c.snap.Store(s)
	return s
}

// stale reports whether a folder where name would appear changed since the scan.
func (s *snapshot) stale(dirs []Dir, name string) bool {
	if s.racy {
		return true
	}
	scope, _ := SplitName(name)
	for _, d := range dirs {
		if !modTime(d.Path).Equal(s.mtimes[d.Path]) {
			return true
		}
		if scope != "" {
			p := filepath.Join(d.Path, scope)
			if recorded, ok := s.mtimes[p]; ok && !modTime(p).Equal(recorded) || !ok && !modTime(p).IsZero() {
				return true
			}
		}
	}
	return false
}

func modTime(p string) time.Time {
	info, err := os.Stat(p)
	if err != nil {
		return time.Time{}
	}
	return info.ModTime()
}

// CleanTemp removes what interrupted uploads left in the writable folders.
func (c *Catalog) CleanTemp() error {
	for _, d := range c.dirs {
		if d.BuiltIn {
			continue
		}
		entries, err := os.ReadDir(d.Path)
		if err != nil {
			continue
		}
		root, err := os.OpenRoot(d.Path)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), tempPrefix) {
				if err := root.RemoveAll(e.Name()); err != nil {
					root.Close()
					return fmt.Errorf("removing %s: %w", filepath.Join(d.Path, e.Name()), err)
				}
			}
		}
		root.Close()
	}
	return nil
}
