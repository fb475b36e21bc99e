package filemanager

import (
	"cmp"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// Entry is one file, folder or link in a listing.
type Entry struct {
	Name  string
	Path  string // virtual path
	IsDir bool   // a folder, or a link to a folder inside its unit
	// IsLink marks a symbolic link; IsDir and Size describe its target when the target lies
	// inside the unit, and are zero otherwise.
	IsLink  bool
	Size    int64 // bytes of a file; 0 for folders
	ModTime time.Time
	BuiltIn bool // the entry lies in a built-in (read-only) root
}

// Listing is the content of a folder.
type Listing struct {
	Path string
	// Writable reports whether the path policy lets files be created in this folder; the
	// caller's permissions are not considered.
	Writable bool
	Entries  []Entry // folders first, then by name
}

// List returns the entries of a folder; "" lists the roots. In a root, entries the guard
// refuses (other namespaces; unscoped units for a restricted caller) are left out.
func (s *Surface) List(g Guard, vpath string) (Listing, error) {
	loc, err := s.resolveRead(g, vpath)
	if err != nil {
		return Listing{}, err
	}
	if loc.Level == LevelRoots {
		return Listing{Path: "", Entries: s.listRoots()}, nil
	}
	v, err := s.readView(loc)
	if err != nil {
		return Listing{}, err
	}
	defer v.Close()
	entries, err := s.children(g, loc, v)
	if err != nil {
		return Listing{}, err
	}
	return Listing{Path: loc.Path, Writable: s.checkWrite(loc, true) == nil, Entries: entries}, nil
}

// listRoots lists the root folders that exist.
func (s *Surface) listRoots() []Entry {
	entries := []Entry{}
	for _, r := range s.roots {
		info, err := os.Stat(r.dir.Path)
		if err != nil || !info.IsDir() {
			continue
		}
		entries = append(entries, Entry{Name: r.name, Path: r.name, IsDir: true, ModTime: info.ModTime(), BuiltIn: r.dir.BuiltIn})
	}
	return entries
}

// children reads the folder a view names.
func (s *Surface) children(g Guard, loc Location, v view) ([]Entry, error) {
	f, err := v.base.Open(v.rel)
	if err != nil {
		return nil, fsError(loc.Path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fsError(loc.Path, err)
	}
	if !info.IsDir() {
		return nil, notADirectory("%s is a file; list its folder, or download it", loc.Path)
	}
	dirents, err := f.ReadDir(-1)
	if err != nil {
		return nil, fsError(loc.Path, err)
	}
	builtIn := s.roots[loc.root].dir.BuiltIn
	entries := []Entry{}
	for _, d := range dirents {
		name := d.Name()
		if loc.Level == LevelRoot && (strings.HasPrefix(name, internalPrefix) || g != nil && g(name) != nil) {
			continue // the runtime's own entries, and units or scopes outside the caller's namespaces
		}
		info, err := d.Info() // lstat: a link is described as a link
		if err != nil {
			continue // removed meanwhile
		}
		e := Entry{Name: name, Path: join(loc.Path, name), IsDir: info.IsDir(), ModTime: info.ModTime(), BuiltIn: builtIn}
		if info.Mode().IsRegular() {
			e.Size = info.Size()
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			e.IsLink = true
			if loc.Level >= LevelUnit {
				// Described by its target only when the target lies inside the unit: the
				// view's os.Root refuses any other.
				if t, err := v.base.Stat(path.Join(v.rel, name)); err == nil {
					e.IsDir = t.IsDir()
					if t.Mode().IsRegular() {
						e.Size = t.Size()
					}
				}
			}
		}
		entries = append(entries, e)
	}
	sortEntries(entries)
	return entries, nil
}

// sortEntries puts folders first, then orders by name.
func sortEntries(entries []Entry) {
	slices.SortFunc(entries, func(a, b Entry) int {
		if a.IsDir != b.IsDir {
			if a.IsDir {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})
}

// Check resolves a path, applies the guard and checks that the path exists, for requests that
// name a path but read nothing (refresh).
func (s *Surface) Check(g Guard, vpath string) error {
	loc, err := s.resolveRead(g, vpath)
	if err != nil || loc.Level == LevelRoots {
		return err
	}
	v, err := s.readView(loc)
	if err != nil {
		return err
	}
	defer v.Close()
	_, err = v.base.Lstat(v.rel)
	return fsError(loc.Path, err)
}
