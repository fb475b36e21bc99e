package filemanager

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/caddy-runtime/runtime/packages"
)

// Download is what a download request names: one file, or folders and files sent as a zip.
type Download struct {
	Name    string // the file name for the client: the file's own, or "<folder>.zip"
	IsZip   bool
	Size    int64 // bytes of a single file
	ModTime time.Time

	file   *os.File
	s      *Surface
	g      Guard
	items  []zipItem
	limits packages.Limits // of a zip's entries and bytes
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
// its target lies inside its unit. A zip holds at most limits.Entries files, folders and links
// and limits.Unpacked bytes of files (max_archive_entries, max_unpacked_size: no more than an
// upload may unpack to); past either, Open refuses it (PAYLOAD_TOO_LARGE) before a byte is sent.
func (s *Surface) Open(g Guard, vpath string, limits packages.Limits) (*Download, error) {
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
		d := &Download{Name: name + ".zip", IsZip: true, ModTime: info.ModTime(), s: s, g: g,
			items: []zipItem{{loc: loc, name: name}}, limits: limits}
		if err := d.measure(); err != nil {
			return nil, err
		}
		return d, nil
	}
	// The file stays open after its view closes: a descriptor does not depend on the Root.
	return &Download{Name: name, Size: info.Size(), ModTime: info.ModTime(), file: f}, nil
}

// OpenBatch prepares a zip of the paths that can be read; the others are reported. A path
// named twice (as written or once cleaned: "a/b/" is "a/b"), or inside a folder the batch names
// too, is stored once, so a batch cannot multiply what it sends. Each path is stored under its
// base name ("name (2)" when two share one). The zip is bounded as Open's; past a limit,
// OpenBatch returns the refusal (PAYLOAD_TOO_LARGE) and no download.
func (s *Surface) OpenBatch(g Guard, vpaths []string, limits packages.Limits) (*Download, []ItemError, error) {
	d := &Download{Name: "files.zip", IsZip: true, ModTime: time.Now(), s: s, g: g, limits: limits}
	var (
		failed []ItemError
		locs   []Location
	)
	for _, p := range vpaths {
		loc, err := s.readable(g, p)
		if err != nil {
			failed = append(failed, ItemError{Path: p, Err: err})
			continue
		}
		locs = append(locs, loc)
	}
	used := map[string]bool{}
	for i, loc := range locs {
		if slices.ContainsFunc(locs[:i], func(o Location) bool { return within(loc.Path, o.Path) }) ||
			slices.ContainsFunc(locs[i+1:], func(o Location) bool { return o.Path != loc.Path && within(loc.Path, o.Path) }) {
			continue // stored with the other
		}
		name := path.Base(loc.Path)
		for i := 2; used[name]; i++ {
			name = fmt.Sprintf("%s (%d)", path.Base(loc.Path), i)
		}
		used[name] = true
		d.items = append(d.items, zipItem{loc: loc, name: name})
	}
	if len(d.items) == 0 {
		return nil, failed, nil
	}
	if err := d.measure(); err != nil {
		return nil, failed, err
	}
	return d, failed, nil
}

// within reports whether the virtual path p is q or lies inside it.
func within(p, q string) bool {
	return p == q || strings.HasPrefix(p, q+"/")
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

// WriteTo writes the file, or the zip, to w. The zip's files are copied up to the size
// measured, and its limits hold for what changed since.
func (d *Download) WriteTo(w io.Writer) (int64, error) {
	if !d.IsZip {
		return io.Copy(w, d.file)
	}
	cw := &countingWriter{w: w}
	z := &zipper{zw: zip.NewWriter(cw), limits: d.limits}
	if err := d.zipItems(z); err != nil {
		return cw.n, err
	}
	err := z.zw.Close()
	return cw.n, err
}

// measure walks the zip without writing it, to refuse one over its limits before it starts.
func (d *Download) measure() error {
	if d.limits.Entries <= 0 && d.limits.Unpacked <= 0 {
		return nil
	}
	return d.zipItems(&zipper{limits: d.limits})
}

func (d *Download) zipItems(z *zipper) error {
	for _, it := range d.items {
		if err := d.s.addZip(z, d.g, it.loc, it.name); err != nil {
			return err
		}
	}
	return nil
}

// zipper adds entries to a zip, or only counts them when zw is nil, within the download's
// limits (none where 0).
type zipper struct {
	zw      *zip.Writer
	limits  packages.Limits
	entries int
	bytes   int64
}

// add counts an entry of size bytes, refusing one past a limit.
func (z *zipper) add(size int64) error {
	z.entries++
	z.bytes += size
	switch {
	case z.limits.Entries > 0 && z.entries > z.limits.Entries:
		return newErr(packages.TooLarge, packages.CodeTooLarge, "the download holds more than %d files and folders (limit %s); download fewer or smaller folders",
			z.limits.Entries, packages.EntriesSetting)
	case z.limits.Unpacked > 0 && z.bytes > z.limits.Unpacked:
		return newErr(packages.TooLarge, packages.CodeTooLarge, "the download holds more than %s of files (limit %s); download fewer or smaller folders",
			humanize.IBytes(uint64(z.limits.Unpacked)), packages.UnpackedSetting)
	}
	return nil
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
func (s *Surface) addZip(z *zipper, g Guard, loc Location, name string) error {
	v, err := s.readView(loc)
	if err != nil {
		return err
	}
	defer v.Close()
	if loc.Level >= LevelUnit {
		return walkZip(z, v.base, v.rel, name)
	}
	entries, err := s.children(g, loc, v)
	if err != nil {
		return err
	}
	if err := zipDir(z, name, time.Now()); err != nil {
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
		if err := s.addZip(z, g, child, name+"/"+e.Name); err != nil {
			return err
		}
	}
	return nil
}

// walkZip adds the tree at rel inside base to a zip under name. Links whose target lies
// inside base are stored as links; others, and special files, are left out.
func walkZip(z *zipper, base *os.Root, rel, name string) error {
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
			return zipDir(z, zname, info.ModTime())
		case d.Type()&fs.ModeSymlink != 0:
			return zipLink(z, base, p, zname)
		case d.Type().IsRegular():
			return zipFile(z, base, p, zname)
		}
		return nil
	})
}

func zipDir(z *zipper, name string, mtime time.Time) error {
	if err := z.add(0); err != nil || z.zw == nil {
		return err
	}
	hdr := &zip.FileHeader{Name: name + "/", Method: zip.Store, Modified: mtime}
	hdr.SetMode(fs.ModeDir | 0o755)
	_, err := z.zw.CreateHeader(hdr)
	return err
}

func zipFile(z *zipper, base *os.Root, p, name string) error {
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
	if err := z.add(info.Size()); err != nil || z.zw == nil {
		return err
	}
	hdr, err := zip.FileInfoHeader(info)
	if err != nil {
		return err
	}
	hdr.Name, hdr.Method = name, zip.Deflate
	w, err := z.zw.CreateHeader(hdr)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, io.LimitReader(f, info.Size())) // a file growing meanwhile is cut at the size counted
	return err
}

func zipLink(z *zipper, base *os.Root, p, name string) error {
	if _, err := base.Stat(p); err != nil {
		return nil // dangling, or leading outside base: not part of the download
	}
	target, err := base.Readlink(p)
	if err != nil {
		return nil
	}
	if err := z.add(int64(len(target))); err != nil || z.zw == nil {
		return err
	}
	hdr := &zip.FileHeader{Name: name, Method: zip.Store, Modified: time.Now()}
	hdr.SetMode(fs.ModeSymlink | 0o777)
	w, err := z.zw.CreateHeader(hdr)
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
