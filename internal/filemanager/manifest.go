package filemanager

import (
	"errors"
	"os"
	"slices"
	"sync"

	"github.com/caddy-runtime/runtime/packages"
)

// Admit decides whether a write may leave a unit's metadata as md, read as the write would
// leave it; it returns nil when it may, else the error to answer with. The file manager asks
// only about writes that create, change or remove a metadata file (manifest.yaml,
// manifest.yml, package.json) at the top of a writable folder, where the unit's metadata is
// read from, so the file manager is no way around the checks of an upload.
type Admit func(unit string, md packages.Metadata) error

// WithAdmit makes s ask admit about every write of a unit's metadata, and returns s.
func (s *Surface) WithAdmit(admit Admit) *Surface {
	s.admit = admit
	return s
}

// metaMu serializes the writes of metadata files, so each is admitted against the metadata
// the others leave.
var metaMu sync.Mutex

// lockMeta takes the metadata lock when one of names is a metadata file and s admits; call
// the result to release it.
func (s *Surface) lockMeta(names ...string) func() {
	if s.admit == nil || !slices.ContainsFunc(names, isMetadata) {
		return func() {}
	}
	metaMu.Lock()
	return metaMu.Unlock
}

func isMetadata(name string) bool { return slices.Contains(packages.MetadataFiles, name) }

// metaEdit is a change to the files of one folder: for each file it creates or replaces, a
// function reading the new content; nil for a file it removes.
type metaEdit map[string]func() ([]byte, error)

// dir is a folder an operation writes in, opened once: as a root to reach its entries by
// name, and as a file to rename entries between folders. Whatever links led to it, every
// change goes to the folder whose identity was checked.
type dir struct {
	root *os.Root
	file *os.File
	info os.FileInfo
}

// openDir opens the folder rel (vpath in messages) of base.
func openDir(base *os.Root, rel, vpath string) (*dir, error) {
	if info, err := base.Stat(orDot(rel)); err == nil && !info.IsDir() {
		return nil, notADirectory("%s is a file, not a folder", vpath)
	}
	r, err := base.OpenRoot(orDot(rel))
	if err != nil {
		return nil, fsError(vpath, err)
	}
	d := &dir{root: r}
	if d.file, err = r.Open("."); err == nil {
		d.info, err = d.file.Stat()
	}
	if err != nil {
		d.Close()
		return nil, fsError(vpath, err)
	}
	return d, nil
}

func (d *dir) Close() {
	if d.file != nil {
		d.file.Close()
	}
	d.root.Close()
}

// admitIn admits the metadata the writable folder of loc (opened as v) would have after edit,
// when d is that folder (a link inside a unit can lead back to it) and edit changes a
// metadata file; hold the metadata lock. It returns the new content of each metadata file it
// admitted, which the caller writes rather than what the file holds by then.
func (s *Surface) admitIn(loc Location, v view, d *dir, edit metaEdit) (map[string][]byte, error) {
	edit = keepMetadata(edit)
	if s.admit == nil || len(edit) == 0 {
		return nil, nil
	}
	top, err := v.base.Stat(".")
	if err != nil || !os.SameFile(top, d.info) {
		return nil, err
	}
	admitted := map[string][]byte{}
	md, err := packages.ReadMetadataFiles(func(name string) ([]byte, error) {
		read, changed := edit[name]
		switch {
		case !changed:
			return packages.ReadMetadataFile(v.base, name)
		case read == nil:
			return nil, os.ErrNotExist
		}
		body, err := read()
		if err == nil {
			admitted[name] = append([]byte{}, body...)
		}
		return body, err
	})
	switch {
	case errors.Is(err, packages.ErrNoMetadata):
		return admitted, nil // no longer a package: nothing is served from it
	case err != nil:
		return nil, err
	}
	md.FindEntry(v.base, ".") // the folder's entry decides its kind (index.ts: a JavaScript worker)
	return admitted, s.admit(loc.Unit, md)
}

func keepMetadata(edit metaEdit) metaEdit {
	for name := range edit {
		if !isMetadata(name) {
			delete(edit, name)
		}
	}
	return edit
}
