package packages

import (
	"archive/tar"
	"archive/zip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/klauspost/compress/gzip"
)

// Format is an archive format.
type Format int

// Archive formats.
const (
	TarGz Format = iota + 1
	Zip
)

// FormatOf tells an archive's format from its file name: .tgz, .tar.gz or .zip.
func FormatOf(filename string) (Format, error) {
	lower := strings.ToLower(filename)
	switch {
	case strings.HasSuffix(lower, ".tgz"), strings.HasSuffix(lower, ".tar.gz"):
		return TarGz, nil
	case strings.HasSuffix(lower, ".zip"):
		return Zip, nil
	}
	return 0, newErr(Invalid, CodeInvalidFileType, "%q is not a .tgz, .tar.gz or .zip archive", path.Base(filename))
}

// Limits bound what an upload may occupy.
type Limits struct {
	Upload   int64 // bytes of the uploaded archive
	Unpacked int64 // bytes of all files after extraction
	Entries  int   // entries in the archive
}

// Default limits.
var DefaultLimits = Limits{Upload: 100 << 20, Unpacked: 1 << 30, Entries: 20000}

// Setting names of the limits, for messages.
const (
	UploadSetting   = "max_upload_size"
	UnpackedSetting = "max_unpacked_size"
	EntriesSetting  = "max_archive_entries"
)

// Stats counts what an extraction wrote.
type Stats struct {
	Files int   // regular files
	Bytes int64 // their total size
}

// Extract unpacks the archive in src (of the given size) into dest. Every entry must stay
// inside dest: absolute names, ".." elements, hard links, devices, FIFOs and symbolic links
// that resolve outside dest are refused with PATH_TRAVERSAL; the limits are enforced on the
// bytes actually written, so a compression bomb stops at the limit.
func Extract(src io.ReaderAt, size int64, format Format, dest *os.Root, limits Limits) (Stats, error) {
	switch format {
	case TarGz:
		return ExtractTarGz(io.NewSectionReader(src, 0, size), dest, limits)
	case Zip:
		x := extractor{dest: dest, limits: limits}
		err := x.zip(src, size)
		if err == nil {
			err = x.checkLinks()
		}
		return x.stats, err
	}
	return Stats{}, newErr(Invalid, CodeInvalidFileType, "unknown archive format")
}

// ExtractTarGz unpacks the .tgz read from r into dest as it arrives, with Extract's checks.
// Into an empty dest, files are created on several goroutines while the archive is read (see
// fileWriters); it returns once every write has ended, whatever the outcome.
func ExtractTarGz(r io.Reader, dest *os.Root, limits Limits) (Stats, error) {
	return extractTarGz(r, dest, limits, true)
}

// extractTarGz is ExtractTarGz, writing one file at a time unless parallel (into an empty
// dest, inline: see fileWriters).
func extractTarGz(r io.Reader, dest *os.Root, limits Limits, parallel bool) (Stats, error) {
	x := extractor{dest: dest, limits: limits}
	if isEmpty(dest) {
		n := 0 // inline
		if parallel {
			n = writerCount()
		}
		x.startWriters(n)
	}
	err := x.finish(x.tarGz(r))
	if err == nil {
		err = x.checkLinks()
	}
	return x.stats, err
}

// isEmpty tells whether the folder root holds nothing.
func isEmpty(root *os.Root) bool {
	f, err := root.Open(".")
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && err == io.EOF
}

type extractor struct {
	dest    *os.Root
	limits  Limits
	stats   Stats
	entries int
	links   []string

	// While w is not nil, the files of new names go to the writers (see fast), each into its
	// folder opened in dirs, made by this extraction; files and made name what was written.
	w     *fileWriters
	dirs  map[string]*os.Root
	files map[string]bool
	made  map[string]bool
}

func (x *extractor) tarGz(r io.Reader) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return corrupt(err)
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return corrupt(err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if x.w != nil {
			if err := x.w.failure(); err != nil {
				return err
			}
		}
		if err := x.count(); err != nil {
			return err
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "" { // the archive root, as GNU tar writes "./"
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = x.mkdir(name)
		case tar.TypeReg, tar.TypeRegA:
			err = x.file(name, hdr.FileInfo().Mode(), hdr.Size, tr)
		case tar.TypeSymlink:
			err = x.symlink(name, hdr.Linkname)
		case tar.TypeLink:
			err = traversal("%q is a hard link; archives may not contain hard links", hdr.Name)
		default:
			err = traversal("%q is a special file (type %q); only files, folders and links are allowed", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

func (x *extractor) zip(src io.ReaderAt, size int64) error {
	zr, err := zip.NewReader(src, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return corrupt(err)
	}
	for _, zf := range zr.File {
		if err := x.count(); err != nil {
			return err
		}
		name, err := entryName(zf.Name)
		if err != nil {
			return err
		}
		mode := zf.Mode()
		if name == "" {
			continue
		}
		switch {
		case mode.IsDir():
			err = x.mkdir(name)
		case mode&fs.ModeSymlink != 0:
			err = x.zipSymlink(name, zf)
		case mode.IsRegular():
			err = x.zipFile(name, mode, zf)
		default:
			err = traversal("%q is a special file; only files, folders and links are allowed", zf.Name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (x *extractor) zipFile(name string, mode fs.FileMode, zf *zip.File) error {
	rc, err := zf.Open()
	if err != nil {
		return corrupt(err)
	}
	defer rc.Close()
	return x.file(name, mode, int64(zf.UncompressedSize64), rc)
}

func (x *extractor) zipSymlink(name string, zf *zip.File) error {
	rc, err := zf.Open()
	if err != nil {
		return corrupt(err)
	}
	defer rc.Close()
	target, err := io.ReadAll(io.LimitReader(rc, 4097))
	if err != nil {
		return corrupt(err)
	}
	if len(target) > 4096 {
		return traversal("link %q has a target longer than 4096 bytes", name)
	}
	return x.symlink(name, string(target))
}

func (x *extractor) count() error {
	x.entries++
	if x.limits.Entries > 0 && x.entries > x.limits.Entries {
		return newErr(TooLarge, CodeTooLarge, "the archive has more than %d entries (limit %s)", x.limits.Entries, EntriesSetting)
	}
	return nil
}

func (x *extractor) mkdir(name string) error {
	if x.w != nil {
		if _, ok, err := x.folder(name); err != nil || ok {
			return err
		}
		if err := x.sequential(); err != nil {
			return err
		}
	}
	if err := x.dest.MkdirAll(name, 0o755); err != nil {
		return writeErr(name, err)
	}
	return nil
}

// file writes one regular file, counting the bytes actually read so a lying header or a
// compression bomb cannot exceed the unpacked limit.
func (x *extractor) file(name string, mode fs.FileMode, declared int64, r io.Reader) error {
	perm := fs.FileMode(0o644)
	if mode&0o111 != 0 {
		perm = 0o755
	}
	if x.w != nil {
		if key := fold(name); !x.files[key] && !x.made[key] {
			dir, ok, err := x.folder(path.Dir(name))
			if err != nil {
				return err
			}
			if ok {
				return x.fast(dir, name, perm, declared, r)
			}
		}
		if err := x.sequential(); err != nil {
			return err
		}
	}
	if err := x.prepareParent(name); err != nil {
		return err
	}
	if err := x.replace(name, false); err != nil {
		return err
	}
	remaining := x.limits.Unpacked - x.stats.Bytes
	if x.limits.Unpacked > 0 && declared > remaining {
		return x.tooBig()
	}
	f, err := x.dest.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return writeErr(name, err)
	}
	src := r
	if x.limits.Unpacked > 0 {
		src = io.LimitReader(r, remaining+1)
	}
	n, err := io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return x.wrote(n, err)
}

// prepareParent creates the parent folders of name and removes a link already at name, so
// an entry replaces an earlier link instead of writing through it.
func (x *extractor) prepareParent(name string) error {
	if dir := path.Dir(name); dir != "." {
		if err := x.dest.MkdirAll(dir, 0o755); err != nil {
			return writeErr(name, err)
		}
	}
	if info, err := x.dest.Lstat(name); err == nil && info.Mode()&fs.ModeSymlink != 0 {
		if err := x.dest.Remove(name); err != nil {
			return writeErr(name, err)
		}
	}
	return nil
}

// replace takes a regular file already at name (an earlier entry, reached directly or through
// a folder link) out of the stats, as the new entry takes its place; remove also deletes it,
// for a link cannot be written over a file. A folder is never replaced: its files are counted.
func (x *extractor) replace(name string, remove bool) error {
	info, err := x.dest.Lstat(name)
	switch {
	case err != nil:
		return nil
	case info.IsDir():
		return newErr(Invalid, CodeInvalidArchive, "%q appears in the archive both as a folder and as a file or link", name)
	case info.Mode().IsRegular():
		x.stats.Bytes -= info.Size()
		x.stats.Files--
	}
	if remove {
		if err := x.dest.Remove(name); err != nil {
			return writeErr(name, err)
		}
	}
	return nil
}

func (x *extractor) symlink(name, target string) error {
	if err := checkLink(name, target); err != nil {
		return err
	}
	// A link can make a later name reach a folder or file by another path: from the first
	// one on, each entry is written once the ones before it are.
	if err := x.sequential(); err != nil {
		return err
	}
	if err := x.prepareParent(name); err != nil {
		return err
	}
	if err := x.replace(name, true); err != nil {
		return err
	}
	if err := x.dest.Symlink(target, name); err != nil {
		return writeErr(name, err)
	}
	x.links = append(x.links, name)
	return nil
}

// checkLink refuses a link whose target is empty, absolute or, by its name alone, outside
// the package; checkLinks resolves the ones that pass once every entry is written.
func checkLink(name, target string) error {
	if target == "" || strings.ContainsRune(target, 0) {
		return traversal("link %q has an empty or invalid target", name)
	}
	if path.IsAbs(target) || strings.HasPrefix(target, `\`) || hasDrive(target) {
		return traversal("link %q points to the absolute path %q", name, target)
	}
	resolved := path.Join(path.Dir(name), target)
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return traversal("link %q points outside the package (%q)", name, target)
	}
	return nil
}

// checkLinks resolves every link physically: a link reached through another link can leave
// the package even when its own target looks contained.
func (x *extractor) checkLinks() error {
	for _, name := range x.links {
		if _, err := x.dest.Stat(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return traversal("link %q does not resolve inside the package", name)
		}
	}
	return nil
}

// writeErr reports a failed write; os.Root refuses paths that would leave the package.
func writeErr(name string, err error) error {
	if e := noSpace(err); e != nil {
		return e
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes") {
		return traversal("%q would be written outside the package", name)
	}
	return newErr(Invalid, CodeInvalidArchive, "cannot unpack %q: %v", name, err)
}

func (x *extractor) tooBig() error {
	return newErr(TooLarge, CodeTooLarge, "the archive unpacks to more than %s (limit %s)",
		humanize.IBytes(uint64(x.limits.Unpacked)), UnpackedSetting)
}

// entryName validates an entry's name and returns it cleaned, or "" for the archive root.
func entryName(name string) (string, error) {
	switch {
	case strings.ContainsRune(name, 0):
		return "", traversal("an entry name contains a NUL byte")
	case strings.Contains(name, `\`):
		return "", traversal("%q uses backslashes; archive paths use '/'", name)
	case strings.HasPrefix(name, "/") || hasDrive(name):
		return "", traversal("%q is an absolute path", name)
	}
	for _, elem := range strings.Split(name, "/") {
		if elem == ".." {
			return "", traversal("%q leaves the package through '..'", name)
		}
	}
	clean := path.Clean(name)
	if clean == "." {
		return "", nil
	}
	return clean, nil
}

func hasDrive(p string) bool {
	return len(p) >= 2 && p[1] == ':' && (p[0] >= 'a' && p[0] <= 'z' || p[0] >= 'A' && p[0] <= 'Z')
}

func traversal(format string, args ...any) error {
	return newErr(Invalid, CodePathTraversal, format, args...)
}

func corrupt(err error) error {
	if e := new(Error); errors.As(err, &e) { // the upload's own, e.g. over its limit
		return e
	}
	if e := noSpace(err); e != nil { // a write of the unpacked file
		return e
	}
	return newErr(Invalid, CodeInvalidArchive, "the archive is corrupt or truncated: %v", err)
}
