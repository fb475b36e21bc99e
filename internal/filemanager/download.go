package filemanager

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/caddy-runtime/runtime/internal/packages"
)

// Download is what a download request names: one file, or folders and files sent as a zip.
type Download struct {
	Name    string // the file name for the client: the file's own, or "<folder>.zip"
	IsZip   bool
	Size    int64 // bytes of a single file
	ModTime time.Time

	file  *os.File
	s     *Surface
	g     Guard
	items []zipItem
}

// zipItem is one path of a zip download and the name it gets in the archive.
type zipItem struct {
	loc  Location
	name string
}

// ItemError is the refusal of one path of a batch.
type ItemError struct {
	Path string
	Err  error
}

func (e ItemError) Error() string { return e.Path + ": " + e.Err.Error() }

// Open prepares the download of a file, or of a folder as a zip. A link is read only when
// its target lies inside its unit.
func (s *Surface) Open(g Guard, vpath string) (*Download, error) {
	loc, err := s.resolveRead(g, vpath)
	if err != nil {
		return nil, err
	}
	if loc.Level == LevelRoots {
		return nil, badRequest("name a file or folder to download; path \"\" is the list of folders")
	}
	v, err := s.readView(loc)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	f, info, err := openReadable(v.base, v.rel)
	if err != nil {
		return nil, fsError(loc.Path, err)
	}
	name := path.Base(loc.Path)
	if info.IsDir() {
		f.Close()
		return &Download{Name: name + ".zip", IsZip: true, ModTime: info.ModTime(), s: s, g: g,
			items: []zipItem{{loc: loc, name: name}}}, nil
	}
	// The file stays open after its view closes: a descriptor does not depend on the Root.
	return &Download{Name: name, Size: info.Size(), ModTime: info.ModTime(), file: f}, nil
}

// OpenBatch prepares a zip of the paths that can be read; the others are reported. Each path
// is stored under its base name ("name (2)" when two share one).
func (s *Surface) OpenBatch(g Guard, vpaths []string) (*Download, []ItemError) {
	d := &Download{Name: "files.zip", IsZip: true, ModTime: time.Now(), s: s, g: g}
	var failed []ItemError
	used := map[string]bool{}
	for _, p := range vpaths {
		loc, err := s.readable(g, p)
		if err != nil {
			failed = append(failed, ItemError{Path: p, Err: err})
			continue
		}
		name := path.Base(loc.Path)
		for i := 2; used[name]; i++ {
			name = fmt.Sprintf("%s (%d)", path.Base(loc.Path), i)
		}
		used[name] = true
		d.items = append(d.items, zipItem{loc: loc, name: name})
	}
	if len(d.items) == 0 {
		return nil, failed
	}
	return d, failed
}

// readable resolves a path of a batch download and checks that it can be read.
func (s *Surface) readable(g Guard, vpath string) (Location, error) {
	loc, err := s.resolveRead(g, vpath)
	if err != nil {
		return loc, err
	}
	if loc.Level == LevelRoots {
		return loc, badRequest("path \"\" is the list of folders, not a file or folder")
	}
	v, err := s.readView(loc)
	if err != nil {
		return loc, err
	}
	defer v.Close()
	f, _, err := openReadable(v.base, v.rel)
	if err != nil {
		return loc, fsError(loc.Path, err)
	}
	f.Close()
	return loc, nil
}

// Close releases the download's file.
func (d *Download) Close() error {
	if d.file != nil {
		return d.file.Close()
	}
	return nil
}

// WriteTo writes the file, or the zip, to w.
func (d *Download) WriteTo(w io.Writer) (int64, error) {
	if !d.IsZip {
		return io.Copy(w, d.file)
	}
	cw := &countingWriter{w: w}
	zw := zip.NewWriter(cw)
	for _, it := range d.items {
		if err := d.s.addZip(zw, d.g, it.loc, it.name); err != nil {
			return cw.n, err
		}
	}
	err := zw.Close()
	return cw.n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// addZip adds a location to a zip under name. Below the unit level the walk is confined to
// the unit folder; above it, it descends unit by unit so each gets its own confinement and
// the guard filters what a root holds.
func (s *Surface) addZip(zw *zip.Writer, g Guard, loc Location, name string) error {
	v, err := s.readView(loc)
	if err != nil {
		return err
	}
	defer v.Close()
	if loc.Level >= LevelUnit {
		return walkZip(zw, v.base, v.rel, name)
	}
	entries, err := s.children(g, loc, v)
	if err != nil {
		return err
	}
	if err := zipDir(zw, name, time.Now()); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsLink {
			continue // above the unit level no link is followed
		}
		child, err := s.Resolve(e.Path)
		if err != nil {
			continue
		}
		if err := s.addZip(zw, g, child, name+"/"+e.Name); err != nil {
			return err
		}
	}
	return nil
}

// walkZip adds the tree at rel inside base to a zip under name. Links whose target lies
// inside base are stored as links; others, and special files, are left out.
func walkZip(zw *zip.Writer, base *os.Root, rel, name string) error {
	return fs.WalkDir(base.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile
			}
			return err
		}
		zname := name
		if p != rel {
			zname = name + "/" + strings.TrimPrefix(p, strings.TrimPrefix(rel+"/", "./"))
		}
		switch {
		case d.IsDir():
			info, err := d.Info()
			if err != nil {
				return nil
			}
			return zipDir(zw, zname, info.ModTime())
		case d.Type()&fs.ModeSymlink != 0:
			return zipLink(zw, base, p, zname)
		case d.Type().IsRegular():
			return zipFile(zw, base, p, zname)
		}
		return nil
	})
}

func zipDir(zw *zip.Writer, name string, mtime time.Time) error {
	hdr := &zip.FileHeader{Name: name + "/", Method: zip.Store, Modified: mtime}
	hdr.SetMode(fs.ModeDir | 0o755)
	_, err := zw.CreateHeader(hdr)
	return err
}

func zipFile(zw *zip.Writer, base *os.Root, p, name string) error {
	f, info, err := openReadable(base, p)
	var refused *packages.Error
	switch {
	case errors.Is(err, fs.ErrNotExist), escapes(err), errors.As(err, &refused):
		return nil // replaced meanwhile by something that is not a file inside base
	case err != nil:
		return err
	case !info.Mode().IsRegular():
		f.Close()
		return nil
	}
	defer f.Close()
	hdr, err := zip.FileInfoHeader(info)
	if err != nil {
		return err
	}
	hdr.Name, hdr.Method = name, zip.Deflate
	w, err := zw.CreateHeader(hdr)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, f)
	return err
}

func zipLink(zw *zip.Writer, base *os.Root, p, name string) error {
	if _, err := base.Stat(p); err != nil {
		return nil // dangling, or leading outside base: not part of the download
	}
	target, err := base.Readlink(p)
	if err != nil {
		return nil
	}
	hdr := &zip.FileHeader{Name: name, Method: zip.Store, Modified: time.Now()}
	hdr.SetMode(fs.ModeSymlink | 0o777)
	w, err := zw.CreateHeader(hdr)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, target)
	return err
}

// openReadable opens a file or folder for reading through base (see packages.OpenReadable).
func openReadable(base *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	f, info, err := packages.OpenReadable(base, rel)
	if errors.Is(err, packages.ErrNotRegular) {
		return nil, nil, badRequest("%s is not a regular file or folder", path.Base(rel))
	}
	return f, info, err
}
