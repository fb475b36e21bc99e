package packages

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
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
	kept      bool // the archive is in work/upload
	committed bool
	replaced  bool
}

// Stage unpacks the archive read from body (named filename, which gives its format) into a
// temporary folder and runs every check an install runs: limits, archive defences, metadata,
// name and version, authorize, and the folders earlier in the list. On error nothing is left.
func (c *Catalog) Stage(filename string, body io.Reader, authorize Authorize) (*Staged, error) {
	return c.StageWith(filename, body, authorize, StageOptions{})
}

// StageOptions adjust a Stage.
type StageOptions struct {
	// Pace, when not nil, is called before each read of the archive: a pace that sleeps
	// spreads the install's work out (the reconciler's background installs, package
	// reconcile), and its error stops the install. A paced install writes one file at a time.
	Pace func() error
	// KeepArchive keeps a copy of the archive exactly as received, for Staged.Archive. Without
	// it a .tgz is unpacked as it arrives and never stored whole; a .zip, which is read from
	// its end, is stored either way.
	KeepArchive bool
	// SpoolFirst stores the whole archive before unpacking any of it, as a .zip always is:
	// for a source that vouches for the bytes only at their end (the package store checks
	// the digest when the download ends), so that nothing unverified is unpacked.
	SpoolFirst bool
}

// StageWith is Stage with options.
func (c *Catalog) StageWith(filename string, body io.Reader, authorize Authorize, o StageOptions) (s *Staged, err error) {
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
		return nil, fmt.Errorf("creating a temporary folder in %s: %w", dir.Path, err)
	}
	defer func() {
		if err != nil {
			s.Discard()
			s = nil
		}
	}()

	if o.Pace != nil {
		body = pacedReader{body, o.Pace}
	}
	up := &upload{r: body, hash: sha256.New(), limit: c.limits.Upload}
	spoolFirst := format == Zip || o.SpoolFirst
	if spoolFirst || o.KeepArchive {
		f, err := root.OpenFile(path.Join(s.work, "upload"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return s, cmp.Or(noSpace(err), err)
		}
		defer f.Close()
		up.copy, s.kept = f, true
	}
	if err := root.Mkdir(path.Join(s.work, "tree"), 0o755); err != nil {
		return s, err
	}
	tree, err := root.OpenRoot(path.Join(s.work, "tree"))
	if err != nil {
		return s, err
	}
	var stats Stats
	switch {
	case spoolFirst:
		if err = up.rest(); err != nil {
			break
		}
		var src io.ReaderAt = up.copy
		if o.Pace != nil {
			src = pacedReaderAt{src, o.Pace}
		}
		if format == Zip {
			stats, err = Extract(src, up.size, Zip, tree, c.limits)
		} else {
			stats, err = extractTarGz(io.NewSectionReader(src, 0, up.size), tree, c.limits, o.Pace == nil)
		}
	default:
		stats, err = extractTarGz(up, tree, c.limits, o.Pace == nil)
		if err == nil {
			err = up.rest() // what follows the archive's end counts as the rest of the upload does
		}
	}
	tree.Close()
	switch {
	case up.err != nil: // the upload's own failure, whatever the extraction made of it
		return s, up.err
	case up.size == 0:
		return s, newErr(Invalid, CodeInvalidArchive, "the uploaded file is empty")
	case err != nil:
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
		SHA256: hex.EncodeToString(up.hash.Sum(nil)), Files: stats.Files, Bytes: stats.Bytes,
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
	if !s.kept {
		return nil, errors.New("the upload's archive was not kept (StageOptions.KeepArchive)")
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
		return Installed{}, fmt.Errorf("installing %s: %w", rel, err)
	}
	s.committed, s.replaced = true, replaced
	ch := Change{Op: OpInstalled, Name: md.Name, Version: md.Version}
	c.forget(ch)
	// The unpacking counted the tree's bytes: its first scan need not walk its files.
	if info, err := s.root.Stat(rel); err == nil {
		c.cache.sized(s.Path, info.ModTime(), s.Bytes)
	}
	c.publish(ch)
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

// upload reads the uploaded archive for the extraction: it hashes every byte, enforces the
// upload limit, keeps a copy when copy is set, and remembers the first failure, which is the
// upload's (a body over the limit, a broken connection, a full disk under the copy) rather
// than the archive's.
type upload struct {
	r     io.Reader
	hash  hash.Hash
	limit int64    // 0: none
	copy  *os.File // or nil
	size  int64
	err   error
}

func (u *upload) Read(b []byte) (int, error) {
	if u.err != nil {
		return 0, u.err
	}
	n, err := u.r.Read(b)
	u.size += int64(n)
	u.hash.Write(b[:n])
	switch {
	case u.limit > 0 && u.size > u.limit:
		u.err = UploadTooLarge(u.limit)
	case err != nil && err != io.EOF:
		u.err = UploadError(err)
	case u.copy != nil && n > 0:
		if _, werr := u.copy.Write(b[:n]); werr != nil {
			u.err = UploadError(werr)
		}
	}
	if u.err != nil {
		return 0, u.err
	}
	return n, err
}

// rest reads the upload to its end, in large reads: spooling a .zip or a download, it is
// all of it.
func (u *upload) rest() error {
	buf := make([]byte, 256<<10)
	for {
		_, err := u.Read(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
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
