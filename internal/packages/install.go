package packages

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/dustin/go-humanize"
)

// InternalPrefix starts the names the runtime keeps for itself at the top of a catalog
// folder: hidden from discovery (no package name starts with '.') and from the file manager.
const InternalPrefix = ".runtime-"

// TempPrefix starts the names of temporary folders and files; they are removed at start-up by
// CleanTemp.
const TempPrefix = InternalPrefix + "tmp-"

// UnitsFolder, at the top of a writable catalog folder, holds the reconciler's records of the
// trees it installed there from the package store (which archive each came from; see package
// reconcile). It is no unit and no temporary folder: CleanTemp keeps it.
const UnitsFolder = InternalPrefix + "units"

const tempPrefix = TempPrefix

func randomSuffix() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Installed describes a completed install.
type Installed struct {
	Name    string
	Version string
	Path    string // absolute install folder
	SHA256  string // of the uploaded archive
	Files   int
	Bytes   int64
}

// Authorize decides whether an archive's package may be installed, once its metadata is known.
type Authorize func(md Metadata) error

// Install unpacks the archive read from body (named filename, which gives its format) and
// installs it at <dir>/<name>[/<version>], replacing an existing install atomically. authorize
// runs before anything outside the temporary folder changes.
func (c *Catalog) Install(filename string, body io.Reader, authorize Authorize) (Installed, error) {
	s, err := c.Stage(filename, body, authorize)
	if err != nil {
		return Installed{}, err
	}
	defer s.Discard()
	return s.Commit()
}

// Staged is an upload unpacked and checked in a temporary folder of the install folder, not
// yet installed: Commit installs it, Discard removes what is left. A dry run only discards.
type Staged struct {
	Installed // what the install will be; Path is where it will go
	Metadata  Metadata
	// Replaces tells whether the name (and version) is installed there already.
	Replaces bool
	// Tree is the unpacked package's folder, readable until Discard.
	Tree string

	c         *Catalog
	dir       Dir
	root      *os.Root
	work, top string
	committed bool
	replaced  bool
}

// Stage unpacks the archive read from body (named filename, which gives its format) into a
// temporary folder and runs every check an install runs: limits, archive defences, metadata,
// name and version, authorize, and the folders earlier in the list. On error nothing is left.
func (c *Catalog) Stage(filename string, body io.Reader, authorize Authorize) (*Staged, error) {
	return c.StagePaced(filename, body, authorize, nil)
}

// StagePaced is Stage with pace, when not nil, called before each read of the archive, while
// it is spooled and while it is unpacked: a pace that sleeps spreads the install's work out
// (the reconciler's background installs, package reconcile), and its error stops the install.
func (c *Catalog) StagePaced(filename string, body io.Reader, authorize Authorize, pace func() error) (s *Staged, err error) {
	format, err := FormatOf(filename)
	if err != nil {
		return nil, err
	}
	dir, err := c.installDir()
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir.Path)
	if err != nil {
		return nil, err
	}
	s = &Staged{c: c, dir: dir, root: root, work: tempPrefix + randomSuffix()}
	if err := root.Mkdir(s.work, 0o700); err != nil {
		root.Close()
		if e := noSpace(err); e != nil {
			return nil, e
		}
		return nil, fmt.Errorf("creating a temporary folder in %s: %v", dir.Path, err)
	}
	defer func() {
		if err != nil {
			s.Discard()
			s = nil
		}
	}()

	if pace != nil {
		body = pacedReader{body, pace}
	}
	archive, sum, size, err := c.spool(root, path.Join(s.work, "upload"), body)
	if err != nil {
		return s, err
	}
	defer archive.Close()
	var src io.ReaderAt = archive
	if pace != nil {
		src = pacedReaderAt{archive, pace}
	}
	if err := root.Mkdir(path.Join(s.work, "tree"), 0o755); err != nil {
		return s, err
	}
	tree, err := root.OpenRoot(path.Join(s.work, "tree"))
	if err != nil {
		return s, err
	}
	stats, err := Extract(src, size, format, tree, c.limits)
	tree.Close()
	if err != nil {
		return s, err
	}

	s.top = path.Join(s.work, "tree")
	if unwrapped, ok := packageFolder(root, s.top); ok {
		s.top = unwrapped
	}
	md, err := ReadMetadata(root, s.top)
	if errors.Is(err, ErrNoMetadata) {
		return s, newErr(Invalid, CodeMissingName, "the archive has no manifest.yaml, manifest.yml or package.json at its root or in package/")
	}
	if err != nil {
		return s, err
	}
	if err := ValidateName(md.Name); err != nil {
		return s, err
	}
	if err := ValidateVersion(md.Version); err != nil {
		return s, err
	}
	if err := authorize(md); err != nil {
		return s, err
	}
	if err := c.checkShadow(md.Name, dir); err != nil {
		return s, err
	}
	rel := c.relPath(md.Name, md.Version)
	_, statErr := root.Lstat(rel)
	s.Installed = Installed{
		Name: md.Name, Version: md.Version, Path: filepath.Join(dir.Path, filepath.FromSlash(rel)),
		SHA256: sum, Files: stats.Files, Bytes: stats.Bytes,
	}
	s.Metadata, s.Replaces, s.Tree = md, statErr == nil, filepath.Join(dir.Path, filepath.FromSlash(s.top))
	return s, nil
}

// Dir is the catalog folder the staged package installs into.
func (s *Staged) Dir() Dir { return s.dir }

// Archive opens the uploaded archive exactly as it was received (its SHA256 is the staged
// package's), for the caller to close; it is readable until Discard.
func (s *Staged) Archive() (*os.File, error) {
	if s.root == nil {
		return nil, errors.New("the upload is discarded")
	}
	return s.root.Open(path.Join(s.work, "upload"))
}

// Commit installs the staged package, replacing an existing install atomically.
func (s *Staged) Commit() (Installed, error) {
	if s.committed {
		return Installed{}, errors.New("the upload is installed already")
	}
	c, md := s.c, s.Metadata
	defer c.lock(md.Name)()
	// Checked again under the name's lock: an install elsewhere may have raced this one.
	if err := c.checkShadow(md.Name, s.dir); err != nil {
		return Installed{}, err
	}
	rel := c.relPath(md.Name, md.Version)
	if err := s.root.MkdirAll(path.Dir(rel), 0o755); err != nil {
		return Installed{}, cmp.Or(noSpace(err), err)
	}
	replaced, err := swapInto(s.root, s.top, rel)
	if err != nil {
		if e := noSpace(err); e != nil {
			return Installed{}, e
		}
		return Installed{}, fmt.Errorf("installing %s: %v", rel, err)
	}
	s.committed, s.replaced = true, replaced
	c.changed(Change{Op: OpInstalled, Name: md.Name, Version: md.Version})
	return s.Installed, nil
}

// Discard removes the temporary folder: at once, unless it holds a tree the install replaced,
// which readers may still have open and which goes after the retire delay. It may be called
// more than once.
func (s *Staged) Discard() {
	if s.root == nil {
		return
	}
	if s.replaced {
		s.c.retire(s.dir, s.work)
	} else {
		_ = s.root.RemoveAll(s.work)
	}
	s.root.Close()
	s.root = nil
}

// pacedReader and pacedReaderAt call pace before each read.
type pacedReader struct {
	r    io.Reader
	pace func() error
}

func (p pacedReader) Read(b []byte) (int, error) {
	if err := p.pace(); err != nil {
		return 0, err
	}
	return p.r.Read(b)
}

type pacedReaderAt struct {
	r    io.ReaderAt
	pace func() error
}

func (p pacedReaderAt) ReadAt(b []byte, off int64) (int, error) {
	if err := p.pace(); err != nil {
		return 0, err
	}
	return p.r.ReadAt(b, off)
}

// spool copies the upload into a file inside the install folder's file system, hashing it and
// enforcing the upload limit; zip needs random access and the hash needs every byte anyway.
func (c *Catalog) spool(root *os.Root, name string, body io.Reader) (*os.File, string, int64, error) {
	f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, "", 0, err
	}
	h := sha256.New()
	src := body
	if c.limits.Upload > 0 {
		src = io.LimitReader(body, c.limits.Upload+1)
	}
	n, err := io.Copy(io.MultiWriter(f, h), src)
	switch {
	case err != nil:
		f.Close()
		return nil, "", 0, UploadError(err)
	case c.limits.Upload > 0 && n > c.limits.Upload:
		f.Close()
		return nil, "", 0, UploadTooLarge(c.limits.Upload)
	case n == 0:
		f.Close()
		return nil, "", 0, newErr(Invalid, CodeInvalidArchive, "the uploaded file is empty")
	}
	return f, hex.EncodeToString(h.Sum(nil)), n, nil
}

// UploadTooLarge is the error for an upload over the limit.
func UploadTooLarge(limit int64) error {
	return newErr(TooLarge, CodeTooLarge, "the upload is larger than %s (limit %s)", humanize.IBytes(uint64(limit)), UploadSetting)
}

// UploadError reports a failure reading the uploaded bytes.
func UploadError(err error) error {
	if e := new(Error); errors.As(err, &e) {
		return e
	}
	if e := noSpace(err); e != nil { // a write of the spooled archive
		return e
	}
	return newErr(Invalid, CodeInvalidArchive, "reading the upload failed: %v", err)
}

// packageFolder returns top/package when it is the archive's only entry and a folder: the
// npm pack layout, unwrapped. Files at the root are kept otherwise.
func packageFolder(root *os.Root, top string) (string, bool) {
	f, err := root.Open(top)
	if err != nil {
		return "", false
	}
	defer f.Close()
	entries, err := f.ReadDir(2)
	if err != nil || len(entries) != 1 || entries[0].Name() != "package" || !entries[0].IsDir() {
		return "", false
	}
	return path.Join(top, "package"), true
}

// checkShadow refuses an install that a unit of the same name in an earlier folder would hide.
func (c *Catalog) checkShadow(name string, target Dir) error {
	u, err := c.Lookup(name)
	if err != nil || u.Dir == target {
		return nil
	}
	return newErr(Conflict, c.layout.code("%s_CONFLICT"),
		"%s %q is already provided by %s, which comes first; choose another name", c.layout.Noun, name, u.Dir.Path)
}

// swapInto moves the folder src over dst and reports whether a tree was there. An existing
// dst is exchanged with src in one renameat2(RENAME_EXCHANGE), so a reader of dst sees the
// old or the new tree and never a missing or partial one; the old tree is left at src (or
// beside it) for the caller to retire.
func swapInto(root *os.Root, src, dst string) (replaced bool, err error) {
	if _, err := root.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		return false, root.Rename(src, dst)
	}
	srcDir, err := root.Open(path.Dir(src))
	if err != nil {
		return false, err
	}
	defer srcDir.Close()
	dstDir, err := root.Open(path.Dir(dst))
	if err != nil {
		return false, err
	}
	defer dstDir.Close()
	err = exchange(srcDir, path.Base(src), dstDir, path.Base(dst))
	if errors.Is(err, errNoExchange) {
		// No atomic exchange on this file system: move the old tree aside, then the new in.
		aside := path.Join(path.Dir(src), tempPrefix+randomSuffix())
		if err := root.Rename(dst, aside); err != nil {
			return false, err
		}
		if err := root.Rename(src, dst); err != nil {
			_ = root.Rename(aside, dst)
			return false, err
		}
		return true, nil
	}
	return err == nil, err
}

// errNoExchange means the file system cannot swap two names atomically.
var errNoExchange = errors.New("no atomic exchange on this file system")
