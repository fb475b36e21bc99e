package packages

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// scanCache remembers what the folders held. A folder's listing is reused while its
// modification time is unchanged, and a version's metadata while its folder's time and its
// metadata files' times and sizes are; so a listing costs about two stat calls per version, and
// edits made by hand are seen. The stats only signal a change (plain stat calls on absolute
// paths, cheap): everything read goes through os.Root.
type scanCache struct {
	mu    sync.Mutex           // one listing at a time
	mapMu sync.Mutex           // the maps, shared by a listing's workers
	dirs  map[string]dirEntry  // folder → its subfolder names
	metas map[string]metaEntry // version folder → metadata
	// sizes holds the sizes of the trees the runtime installed, known from their unpacking,
	// so that the first scan of a new tree need not walk its files.
	sizes map[string]sizeHint
	// visited collects the folders the running listing read, for the watcher.
	visited map[string]bool
}

// visit records that the running listing read folder dir.
func (c *scanCache) visit(dir string) {
	c.mapMu.Lock()
	c.visited[dir] = true
	c.mapMu.Unlock()
}

type dirEntry struct {
	mtime time.Time
	names []string
}

type metaEntry struct {
	dir   time.Time   // the version folder's mtime: adding or removing a file changes it
	files []fileStamp // the metadata files present at the last read
	md    Metadata
	size  int64 // bytes in the folder's regular files
	err   error
}

// sizeHint is a folder's size while its time is mtime.
type sizeHint struct {
	mtime time.Time
	size  int64
}

type fileStamp struct {
	name  string
	mtime time.Time
	size  int64
}

// settled reports whether every time the entry watches is old enough to show the next change.
func (e metaEntry) settled(now time.Time) bool {
	if !e.dir.IsZero() && !settled(e.dir, now) {
		return false
	}
	for _, f := range e.files {
		if !settled(f.mtime, now) {
			return false
		}
	}
	return true
}

// current reports whether the folder and files still look as stamped.
func (e metaEntry) current(dir string) bool {
	if !e.dir.IsZero() {
		info, err := os.Stat(dir)
		if err != nil || !info.ModTime().Equal(e.dir) {
			return false
		}
	}
	for _, f := range e.files {
		info, err := os.Stat(filepath.Join(dir, f.name))
		if err != nil || !info.ModTime().Equal(f.mtime) || info.Size() != f.size {
			return false
		}
	}
	return true
}

// invalidate forgets everything; the maps are replaced, not dropped, for a listing may be
// filling them at the same moment.
func (c *scanCache) invalidate() {
	c.mapMu.Lock()
	defer c.mapMu.Unlock()
	c.dirs, c.metas, c.sizes = map[string]dirEntry{}, map[string]metaEntry{}, map[string]sizeHint{}
}

// invalidateUnit drops the scans of the folder rel (a unit, or one version of it) in each of
// dirs (the metadata and sizes of it and below) and every folder listing, which costs one
// read of each folder to make again.
func (c *scanCache) invalidateUnit(dirs []Dir, rel string) {
	c.mapMu.Lock()
	defer c.mapMu.Unlock()
	c.dirs = map[string]dirEntry{}
	for _, d := range dirs {
		folder := filepath.Join(d.Path, filepath.FromSlash(rel))
		below := func(key string) bool {
			return key == folder || strings.HasPrefix(key, folder+string(filepath.Separator))
		}
		for key := range c.metas {
			if below(key) {
				delete(c.metas, key)
			}
		}
		for key := range c.sizes {
			if below(key) {
				delete(c.sizes, key)
			}
		}
	}
}

// sized records that the folder dir, of time mtime, holds size bytes of regular files.
func (c *scanCache) sized(dir string, mtime time.Time, size int64) {
	c.mapMu.Lock()
	defer c.mapMu.Unlock()
	if c.sizes == nil {
		c.sizes = map[string]sizeHint{}
	}
	c.sizes[dir] = sizeHint{mtime, size}
}

// sizeOf returns the size recorded for the folder dir while its time is mtime.
func (c *scanCache) sizeOf(dir string, mtime time.Time) (int64, bool) {
	c.mapMu.Lock()
	defer c.mapMu.Unlock()
	h, ok := c.sizes[dir]
	return h.size, ok && h.mtime.Equal(mtime)
}

// list finds the units in dirs, and returns with them every folder it read (a catalog folder
// that does not exist counts by its nearest existing parent, where it would appear).
func (c *scanCache) list(layout Layout, dirs []Dir) ([]Unit, []string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mapMu.Lock()
	if c.dirs == nil {
		c.dirs, c.metas = map[string]dirEntry{}, map[string]metaEntry{}
	}
	c.visited = map[string]bool{}
	c.mapMu.Unlock()
	var units []Unit
	seen := map[string]bool{}
	for _, d := range dirs {
		root, err := os.OpenRoot(d.Path)
		if errors.Is(err, fs.ErrNotExist) {
			c.visit(existingAncestor(d.Path))
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		found := c.scanDir(layout, d, root)
		root.Close()
		for _, u := range found {
			if !seen[u.Name] { // an earlier folder shadows a later one
				seen[u.Name] = true
				units = append(units, u)
			}
		}
	}
	c.mapMu.Lock()
	visited := make([]string, 0, len(c.visited))
	for dir := range c.visited {
		visited = append(visited, dir)
	}
	c.mapMu.Unlock()
	return units, visited, nil
}

// scanDir finds the units of one folder, checking units in parallel: a listing is mostly
// waiting on stat calls.
func (c *scanCache) scanDir(layout Layout, d Dir, root *os.Root) []Unit {
	var names []string
	for _, top := range c.subdirs(root, d.Path, ".") {
		if !strings.HasPrefix(top, "@") {
			names = append(names, top)
			continue
		}
		for _, sub := range c.subdirs(root, d.Path, top) {
			names = append(names, top+"/"+sub)
		}
	}
	found := make([]Unit, len(names))
	ok := make([]bool, len(names))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(len(names), 2*runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if ValidateName(names[i]) == nil {
					found[i], ok[i] = c.scanUnit(layout, d, root, names[i])
				}
			}
		}()
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	units := make([]Unit, 0, len(names))
	for i, u := range found {
		if ok[i] {
			units = append(units, u)
		}
	}
	return units
}

func (c *scanCache) scanUnit(layout Layout, d Dir, root *os.Root, name string) (Unit, bool) {
	u := Unit{Name: name, Dir: d, Path: filepath.Join(d.Path, filepath.FromSlash(name))}
	if !layout.Versioned {
		md, size, ok := c.metadata(root, d.Path, name)
		if !ok || md.Name != name || ValidateVersion(md.Version) != nil {
			return u, false
		}
		u.Versions = []Version{{Version: md.Version, Enabled: md.Enabled, Path: u.Path, Metadata: md, Size: size}}
		return u, true
	}
	for _, v := range c.subdirs(root, d.Path, name) {
		if ValidateVersion(v) != nil {
			continue
		}
		rel := path.Join(name, v)
		md, size, ok := c.metadata(root, d.Path, rel)
		if !ok || md.Name != name {
			continue // not a package, or one of another name: ignored
		}
		u.Versions = append(u.Versions, Version{Version: v, Enabled: md.Enabled, Path: filepath.Join(u.Path, v), Metadata: md, Size: size})
	}
	slices.SortFunc(u.Versions, func(a, b Version) int { return CompareVersions(a.Version, b.Version) })
	return u, len(u.Versions) > 0
}

// racyWindow covers the kernel's coarse file timestamps (a clock tick, up to 10 ms) with room
// to spare.
const racyWindow = 50 * time.Millisecond

// settled reports whether a file time seen at time at can be trusted to change with the next
// change: a change within the same coarse tick can leave it as it was, so a cache keyed by a
// time that recent would miss that change.
func settled(mtime, at time.Time) bool { return mtime.Before(at.Add(-racyWindow)) }

// subdirs returns the visible subfolders of rel, sorted; cached by the folder's mtime.
func (c *scanCache) subdirs(root *os.Root, base, rel string) []string {
	key := filepath.Join(base, rel)
	info, err := os.Stat(key)
	if err != nil || !info.IsDir() {
		return nil
	}
	c.visit(key)
	c.mapMu.Lock()
	e, ok := c.dirs[key]
	c.mapMu.Unlock()
	if ok && e.mtime.Equal(info.ModTime()) {
		return e.names
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil
	}
	entries, _ := f.ReadDir(-1)
	f.Close()
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 { // a linked folder counts if it resolves inside
			if st, err := root.Stat(path.Join(rel, e.Name())); err == nil && st.IsDir() {
				isDir = true
			}
		}
		if isDir {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	if settled(info.ModTime(), time.Now()) {
		c.mapMu.Lock()
		c.dirs[key] = dirEntry{mtime: info.ModTime(), names: names}
		c.mapMu.Unlock()
	}
	return names
}

// metadata reads a package's metadata, cached while its folder and metadata files are
// unchanged.
func (c *scanCache) metadata(root *os.Root, base, rel string) (Metadata, int64, bool) {
	key := filepath.Join(base, rel)
	c.visit(key)
	c.mapMu.Lock()
	e, ok := c.metas[key]
	c.mapMu.Unlock()
	if ok && e.current(key) {
		return e.md, e.size, e.err == nil
	}
	info, err := os.Stat(key)
	if err != nil {
		return Metadata{}, 0, false
	}
	entry := metaEntry{dir: info.ModTime()}
	for _, name := range []string{ManifestYAML, ManifestYML, PackageJSON} {
		if st, err := root.Stat(path.Join(rel, name)); err == nil {
			entry.files = append(entry.files, fileStamp{name: name, mtime: st.ModTime(), size: st.Size()})
		}
	}
	entry.md, entry.err = ReadMetadata(root, rel)
	if entry.err == nil {
		var known bool
		if entry.size, known = c.sizeOf(key, info.ModTime()); !known {
			entry.size = folderSize(root, rel)
		}
	}
	if entry.err == nil && entry.md.Manifest == ManifestYAML && entry.md.declares() {
		// Nothing else in the folder can change what manifest.yaml says: watch it alone.
		entry.dir, entry.files = time.Time{}, entry.files[:1]
	}
	if entry.settled(time.Now()) {
		c.mapMu.Lock()
		c.metas[key] = entry
		c.mapMu.Unlock()
	}
	return entry.md, entry.size, entry.err == nil
}

// folderWalks counts the walks of folderSize, for tests.
var folderWalks atomic.Int64

// folderSize sums the sizes of the regular files below rel, without following links; it
// reads through root, so nothing outside it is counted.
func folderSize(root *os.Root, rel string) int64 {
	folderWalks.Add(1)
	var total int64
	_ = fs.WalkDir(root.FS(), rel, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil // an unreadable part counts as empty
		}
		if info, err := d.Info(); err == nil {
			total += info.Size()
		}
		return nil
	})
	return total
}
