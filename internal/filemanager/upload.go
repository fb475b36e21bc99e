package filemanager

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/caddy-runtime/runtime/packages"
)

// UploadFile is one uploaded file.
type UploadFile struct {
	// Name is the file's path relative to the destination folder: its file name, or the
	// relative path of a folder upload ("dist/app.js").
	Name string
	Data io.ReaderAt
	Size int64
}

// UploadResult describes a completed upload.
type UploadResult struct {
	Path  string // the destination folder
	Files int    // regular files written, extracted ones included
	Bytes int64  // their total size
}

// Upload writes files into the folder destDir (created when missing), inside a writable
// folder. A file whose name ends in .zip is extracted in place with packages.Extract, under
// the same defences and the unpacked-size and entry limits of limits. Everything is staged in
// a temporary folder of the root first and moved into place only when all of it unpacked, so
// a refused upload changes nothing; existing files are replaced, existing folders merged, and
// a file meeting a folder (or the reverse) is a conflict.
func (s *Surface) Upload(g Guard, destDir string, files []UploadFile, limits packages.Limits) (UploadResult, error) {
	dst, err := s.resolveWrite(g, destDir, true)
	if err != nil {
		return UploadResult{}, err
	}
	if len(files) == 0 {
		return UploadResult{}, badRequest("the upload holds no files")
	}
	names := make([]string, len(files))
	for i, f := range files {
		if names[i], err = cleanPath(f.Name, "file name"); err != nil {
			return UploadResult{}, err
		}
		if names[i] == "" {
			return UploadResult{}, badRequest("an uploaded file has no name")
		}
	}
	v, err := s.writeView(dst)
	if err != nil {
		return UploadResult{}, err
	}
	defer v.Close()
	if info, err := v.base.Stat(orDot(dst.Inner)); err == nil && !info.IsDir() {
		return UploadResult{}, notADirectory("%s is a file, not a folder", dst.Path)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return UploadResult{}, fsError(dst.Path, err)
	}

	stage := tempPrefix + randomSuffix()
	if err := v.top.Mkdir(stage, 0o700); err != nil {
		return UploadResult{}, err
	}
	defer v.top.RemoveAll(stage)
	staged, err := v.top.OpenRoot(stage)
	if err != nil {
		return UploadResult{}, err
	}
	defer staged.Close()
	res := UploadResult{Path: dst.Path}
	for i, f := range files {
		st, err := stageFile(staged, names[i], f, limits)
		if err != nil {
			return UploadResult{}, err
		}
		res.Files += st.Files
		res.Bytes += st.Bytes
	}
	if err := s.merge(dst, v, stage, staged); err != nil {
		return UploadResult{}, err
	}
	s.changed(dst)
	return res, nil
}

// stageFile writes one upload into the staging root: a zip is extracted into the folder it
// was uploaded to, any other file is copied.
func stageFile(staged *os.Root, name string, f UploadFile, limits packages.Limits) (packages.Stats, error) {
	dir := path.Dir(name)
	if err := staged.MkdirAll(dir, 0o755); err != nil {
		return packages.Stats{}, conflictIn(name, err)
	}
	if strings.HasSuffix(strings.ToLower(name), ".zip") {
		into, err := staged.OpenRoot(dir)
		if err != nil {
			return packages.Stats{}, err
		}
		defer into.Close()
		return packages.Extract(f.Data, f.Size, packages.Zip, into, limits)
	}
	if info, err := staged.Lstat(name); err == nil && info.IsDir() {
		return packages.Stats{}, badRequest("the upload holds %s both as a folder and as a file", name)
	}
	out, err := staged.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return packages.Stats{}, conflictIn(name, err)
	}
	n, err := io.Copy(out, io.NewSectionReader(f.Data, 0, f.Size))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return packages.Stats{Files: 1, Bytes: n}, err
}

// conflictIn reports that the upload's own files clash: one is another's folder.
func conflictIn(name string, err error) error {
	if errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrInvalid) || strings.Contains(err.Error(), "not a directory") {
		return badRequest("the upload holds %s below a file of the same upload", name)
	}
	return err
}

// merge moves the staged tree (the folder stage of v.top, opened as staged) into the folder
// dst of the writable folder v.base. Conflicts are found and metadata files written at the
// top of the writable folder admitted before anything moves; then new entries are renamed into
// place, folders that exist on both sides are merged and files or links on the destination
// side replaced.
func (s *Surface) merge(dst Location, v view, stage string, staged *os.Root) error {
	dest := orDot(dst.Inner)
	if err := checkMerge(v.top, stage, v.base, dest, dst.Path); err != nil {
		return err
	}
	entries, err := readDir(staged, ".")
	if err != nil {
		return err
	}
	edit := metaEdit{}
	var names []string
	for _, e := range entries {
		edit[e.Name()] = func() ([]byte, error) { return packages.ReadMetadataFile(staged, e.Name()) }
		names = append(names, e.Name())
	}
	defer s.lockMeta(names...)()
	var admitted map[string][]byte
	if info, err := v.base.Stat(dest); err == nil && info.IsDir() {
		d, err := openDir(v.base, dest, dst.Path)
		if err != nil {
			return err
		}
		admitted, err = s.admitIn(dst, v, d, edit)
		d.Close()
		if err != nil {
			return err
		}
	}
	if err := v.base.MkdirAll(dest, 0o755); err != nil {
		return fsError(dst.Path, err)
	}
	// Staging is private, so an admitted file lands as it was admitted. A metadata file that
	// reaches the top of the writable folder unadmitted came by a link made meanwhile.
	top, err := v.base.Stat(".")
	if err != nil {
		return err
	}
	guard := func(d *dir, name string) error {
		if _, ok := admitted[name]; s.admit != nil && isMetadata(name) && !ok && os.SameFile(top, d.info) {
			return forbidden("%s would land at the top of %s through a link created meanwhile; try again", name, dst.Unit)
		}
		return nil
	}
	return moveTree(v.top, stage, v.base, dest, dst.Path, guard)
}

// checkMerge refuses a merge that would put a file where a folder is or the reverse.
func checkMerge(top *os.Root, src string, base *os.Root, dest, destPath string) error {
	entries, err := readDir(top, src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		d, dp := path.Join(dest, e.Name()), join(destPath, e.Name())
		info, err := base.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return fsError(dp, err)
		case e.IsDir() && info.IsDir():
			if err := checkMerge(top, path.Join(src, e.Name()), base, d, dp); err != nil {
				return err
			}
		case e.IsDir():
			return exists("%s exists and is not a folder; the upload has a folder there", dp)
		case info.IsDir():
			return exists("%s is a folder; the upload has a file there", dp)
		}
	}
	return nil
}

// moveTree renames the entries of src into dest, descending into folders present on both
// sides; guard may refuse an entry about to land in a folder.
func moveTree(top *os.Root, src string, base *os.Root, dest, destPath string, guard func(d *dir, name string) error) error {
	entries, err := readDir(top, src)
	if err != nil {
		return err
	}
	from, err := openDir(top, src, destPath)
	if err != nil {
		return err
	}
	defer from.Close()
	to, err := openDir(base, dest, destPath)
	if err != nil {
		return err
	}
	defer to.Close()
	for _, e := range entries {
		d, dp := path.Join(dest, e.Name()), join(destPath, e.Name())
		if info, err := base.Lstat(d); err == nil && e.IsDir() && info.IsDir() {
			if err := moveTree(top, path.Join(src, e.Name()), base, d, dp, guard); err != nil {
				return err
			}
			continue
		}
		if err := guard(to, e.Name()); err != nil {
			return err
		}
		if err := renameAt(from.file, e.Name(), to.file, e.Name()); err != nil {
			return fsError(dp, err)
		}
	}
	return nil
}

func readDir(r *os.Root, name string) ([]fs.DirEntry, error) {
	f, err := r.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

func randomSuffix() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
