package packages

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// scanCache remembers what the folders held. A folder's listing is reused while its
// modification time is unchanged, and a version's metadata while its metadata files' times
// and sizes are; so a listing costs a few stat calls per unit, and edits made by hand are seen.
type scanCache struct {
	mu    sync.Mutex
	dirs  map[string]dirEntry  // folder → its subfolder names
	metas map[string]metaEntry // version folder → metadata
}

type dirEntry struct {
	mtime time.Time
	names []string
}

type metaEntry struct {
	stamp [4][2]int64
	md    Metadata
	err   error
}

func (c *scanCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dirs, c.metas = nil, nil
}

func (c *scanCache) list(layout Layout, dirs []Dir) ([]Unit, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirs == nil {
		c.dirs, c.metas = map[string]dirEntry{}, map[string]metaEntry{}
	}
	var units []Unit
	seen := map[string]bool{}
	for _, d := range dirs {
		root, err := os.OpenRoot(d.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
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
	return units, nil
}

// scanDir finds the units of one folder.
func (c *scanCache) scanDir(layout Layout, d Dir, root *os.Root) []Unit {
	var units []Unit
	for _, top := range c.subdirs(root, d.Path, ".") {
		names := []string{top}
		if strings.HasPrefix(top, "@") {
			names = names[:0]
			for _, sub := range c.subdirs(root, d.Path, top) {
				names = append(names, top+"/"+sub)
			}
		}
		for _, name := range names {
			if ValidateName(name) != nil {
				continue
			}
			if u, ok := c.scanUnit(layout, d, root, name); ok {
				units = append(units, u)
			}
		}
	}
	return units
}

func (c *scanCache) scanUnit(layout Layout, d Dir, root *os.Root, name string) (Unit, bool) {
	u := Unit{Name: name, Dir: d, Path: filepath.Join(d.Path, filepath.FromSlash(name))}
	if !layout.Versioned {
		md, ok := c.metadata(root, d.Path, name)
		if !ok || md.Name != name || ValidateVersion(md.Version) != nil {
			return u, false
		}
		u.Versions = []Version{{Version: md.Version, Enabled: md.Enabled, Path: u.Path, Metadata: md}}
		return u, true
	}
	for _, v := range c.subdirs(root, d.Path, name) {
		if ValidateVersion(v) != nil {
			continue
		}
		rel := path.Join(name, v)
		md, ok := c.metadata(root, d.Path, rel)
		if !ok || md.Name != name {
			continue // not a package, or one of another name: ignored
		}
		u.Versions = append(u.Versions, Version{Version: v, Enabled: md.Enabled, Path: filepath.Join(u.Path, v), Metadata: md})
	}
	slices.SortFunc(u.Versions, func(a, b Version) int { return CompareVersions(a.Version, b.Version) })
	return u, len(u.Versions) > 0
}

// subdirs returns the visible subfolders of rel, sorted; cached by the folder's mtime.
func (c *scanCache) subdirs(root *os.Root, base, rel string) []string {
	info, err := root.Stat(rel)
	if err != nil || !info.IsDir() {
		return nil
	}
	key := filepath.Join(base, rel)
	if e, ok := c.dirs[key]; ok && e.mtime.Equal(info.ModTime()) {
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
	c.dirs[key] = dirEntry{mtime: info.ModTime(), names: names}
	return names
}

// metadata reads a package's metadata, cached by the stamps of its folder and metadata files.
func (c *scanCache) metadata(root *os.Root, base, rel string) (Metadata, bool) {
	var stamp [4][2]int64 // mtime and size of the folder and of each metadata file
	for i, name := range []string{".", ManifestYAML, ManifestYML, PackageJSON} {
		if info, err := root.Stat(path.Join(rel, name)); err == nil {
			stamp[i] = [2]int64{info.ModTime().UnixNano(), info.Size()}
		} else if i == 0 {
			return Metadata{}, false
		}
	}
	key := filepath.Join(base, rel)
	if e, ok := c.metas[key]; ok && e.stamp == stamp {
		return e.md, e.err == nil
	}
	md, err := ReadMetadata(root, rel)
	c.metas[key] = metaEntry{stamp: stamp, md: md, err: err}
	return md, err == nil
}
