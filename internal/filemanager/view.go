package filemanager

import (
	"io/fs"
	"os"
	"path"
	"strings"
)

// view is an operation's confined access to a location: base is an os.Root at the folder the
// operation must not leave, and rel the location inside it.
type view struct {
	top  *os.Root // the root folder (staging lives here)
	base *os.Root // the unit folder (reads), the writable folder (writes), or top above units
	rel  string   // "." for base itself
}

func (v view) Close() {
	if v.base != nil && v.base != v.top {
		v.base.Close()
	}
	if v.top != nil {
		v.top.Close()
	}
}

// openTop opens the root folder of a location.
func (s *Surface) openTop(loc Location) (*os.Root, error) {
	r := s.roots[loc.root]
	top, err := os.OpenRoot(r.dir.Path)
	if err != nil {
		return nil, fsError(r.name, err)
	}
	return top, nil
}

// readView opens a location for reading. Below the unit level it is confined to the unit
// folder, so no link reaches another unit (or namespace); above it, to the root folder.
func (s *Surface) readView(loc Location) (view, error) {
	top, err := s.openTop(loc)
	if err != nil {
		return view{}, err
	}
	v := view{top: top, base: top, rel: orDot(loc.rel)}
	rootName := s.roots[loc.root].name
	switch {
	case loc.Unit == "" && loc.Scope != "":
		err = noLinks(top, rootName, loc.Scope)
	case loc.Unit != "":
		err = noLinks(top, rootName, loc.Unit)
	}
	if err != nil {
		return view{}, closeOnErr(v, err)
	}
	if loc.Unit == "" {
		return v, nil
	}
	if info, err := top.Lstat(loc.Unit); err == nil && !info.IsDir() && loc.Level == LevelUnit {
		// A plain file at the unit level, e.g. a README beside the units.
		return v, nil
	}
	base, err := top.OpenRoot(loc.Unit) // "@team/app" and "app" are also their folders' paths
	if err != nil {
		return view{}, closeOnErr(v, fsError(loc.Path, err))
	}
	v.base = base
	v.rel = orDot(strings.TrimPrefix(strings.TrimPrefix(loc.rel, loc.Unit), "/"))
	return v, nil
}

// writeView opens a location that passed checkWrite, confined to its writable folder: the
// version folder of a worker, the unit folder of a plugin. The writable folder must exist;
// the file manager never creates one.
func (s *Surface) writeView(loc Location) (view, error) {
	top, err := s.openTop(loc)
	if err != nil {
		return view{}, err
	}
	v := view{top: top, base: top, rel: orDot(loc.Inner)}
	rootName := s.roots[loc.root].name
	writable := loc.Unit
	if s.layout.Versioned {
		writable = path.Join(writable, loc.Version)
	}
	if err := noLinks(top, rootName, writable); err != nil {
		return view{}, closeOnErr(v, err)
	}
	base, err := top.OpenRoot(writable)
	if err != nil {
		return view{}, closeOnErr(v, fsError(rootName+"/"+writable, err))
	}
	v.base = base
	return v, nil
}

// noLinks checks that the folders of rel (a scope, unit or version folder inside the root
// folder rootName) exist and that none is a symbolic link: those folders decide which unit,
// and so which namespace, a path belongs to, and only an operator could have linked them.
func noLinks(top *os.Root, rootName, rel string) error {
	elems := strings.Split(rel, "/")
	for i := range elems {
		p := strings.Join(elems[:i+1], "/")
		info, err := top.Lstat(p)
		if err != nil {
			return fsError(rootName+"/"+p, err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return forbidden("%s/%s is a symbolic link; the file manager follows links only inside a unit", rootName, p)
		}
	}
	return nil
}

// closeOnErr closes v when err is set, and returns err.
func closeOnErr(v view, err error) error {
	if err != nil {
		v.Close()
	}
	return err
}

func orDot(p string) string {
	if p == "" {
		return "."
	}
	return p
}
