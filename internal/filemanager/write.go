package filemanager

import (
	"errors"
	"io/fs"
	"path"
	"strings"

	"github.com/caddy-runtime/runtime/packages"
)

// openWrite resolves vpath for a write and opens its confined view; the caller closes it.
func (s *Surface) openWrite(g Guard, vpath string) (Location, view, error) {
	loc, err := s.resolveWrite(g, vpath, false)
	if err != nil {
		return loc, view{}, err
	}
	v, err := s.writeView(loc)
	return loc, v, err
}

// Mkdir creates a folder, with its missing parents, inside a writable folder.
func (s *Surface) Mkdir(g Guard, vpath string) (Location, error) {
	loc, v, err := s.openWrite(g, vpath)
	if err != nil {
		return loc, err
	}
	defer v.Close()
	if _, err := v.base.Lstat(loc.Inner); err == nil {
		return loc, exists("%s already exists", loc.Path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return loc, fsError(loc.Path, err)
	}
	if err := v.base.MkdirAll(loc.Inner, 0o755); err != nil {
		return loc, fsError(loc.Path, err)
	}
	s.changed(loc)
	return loc, nil
}

// Delete removes a file, a link (not its target) or a folder with its content.
func (s *Surface) Delete(g Guard, vpath string) (Location, error) {
	loc, v, err := s.openWrite(g, vpath)
	if err != nil {
		return loc, err
	}
	defer v.Close()
	d, name, err := openParent(v, loc)
	if err != nil {
		return loc, err
	}
	defer d.Close()
	defer s.lockMeta(name)()
	if _, err := s.admitIn(loc, v, d, metaEdit{name: nil}); err != nil {
		return loc, err
	}
	if err := d.root.RemoveAll(name); err != nil {
		return loc, fsError(loc.Path, err)
	}
	s.changed(loc)
	return loc, nil
}

// Rename gives a file, link or folder a new name in the same folder and returns its new
// location. Renaming to the current name changes nothing.
func (s *Surface) Rename(g Guard, vpath, newName string) (Location, error) {
	if err := validName(newName); err != nil {
		return Location{}, err
	}
	loc, v, err := s.openWrite(g, vpath)
	if err != nil {
		return loc, err
	}
	defer v.Close()
	dest, err := s.resolveWrite(g, join(path.Dir(loc.Path), newName), false)
	if err != nil {
		return loc, err
	}
	d, name, err := openParent(v, loc)
	if err != nil {
		return loc, err
	}
	defer d.Close()
	if dest.Inner == loc.Inner {
		return dest, nil
	}
	if _, err := d.root.Lstat(newName); err == nil {
		return loc, exists("%s already exists", dest.Path)
	}
	defer s.lockMeta(name, newName)()
	admitted, err := s.admitIn(loc, v, d, metaEdit{name: nil, newName: func() ([]byte, error) {
		return packages.ReadMetadataFile(d.root, name)
	}})
	if err != nil {
		return loc, err
	}
	if err := replace(d, name, d, newName, admitted); err != nil {
		return loc, fsError(loc.Path, err)
	}
	s.changed(loc)
	return dest, nil
}

// Move moves a file, link or folder into the folder destDir, within one root, and returns its
// new location. Source and destination are each confined to their writable folder, so a move
// between two versions or two units never passes through a link.
func (s *Surface) Move(g Guard, vpath, destDir string) (Location, error) {
	src, err := s.resolveWrite(g, vpath, false)
	if err != nil {
		return src, err
	}
	dst, err := s.resolveWrite(g, destDir, true)
	if err != nil {
		return src, err
	}
	if dst.root != src.root {
		return src, badRequest("moves stay within one folder: %s and %s are in different roots", src.Path, dst.Path)
	}
	if dst.Path == src.Path || strings.HasPrefix(dst.Path, src.Path+"/") {
		return src, badRequest("cannot move %s into itself", src.Path)
	}
	name := path.Base(src.Inner)
	moved, err := s.Resolve(join(dst.Path, name))
	if err != nil {
		return src, err
	}
	sv, err := s.writeView(src)
	if err != nil {
		return src, err
	}
	defer sv.Close()
	dv, err := s.writeView(dst)
	if err != nil {
		return src, err
	}
	defer dv.Close()
	sd, _, err := openParent(sv, src)
	if err != nil {
		return src, err
	}
	defer sd.Close()
	dd, err := openDir(dv.base, dst.Inner, dst.Path)
	if err != nil {
		return src, err
	}
	defer dd.Close()
	if _, err := dd.root.Lstat(name); err == nil {
		return src, exists("%s already exists", moved.Path)
	}
	defer s.lockMeta(name)()
	if _, err := s.admitIn(src, sv, sd, metaEdit{name: nil}); err != nil {
		return src, err
	}
	admitted, err := s.admitIn(dst, dv, dd, metaEdit{name: func() ([]byte, error) { return packages.ReadMetadataFile(sd.root, name) }})
	if err != nil {
		return src, err
	}
	if err := replace(sd, name, dd, name, admitted); err != nil {
		return src, fsError(src.Path, err)
	}
	s.changed(src)
	if dst.Unit != src.Unit || dst.Version != src.Version {
		s.changed(dst)
	}
	return moved, nil
}

// openParent opens the folder holding the entry loc names, inside the writable folder v, and
// checks that the entry exists; it returns the folder and the entry's name.
func openParent(v view, loc Location) (*dir, string, error) {
	d, err := openDir(v.base, path.Dir(loc.Inner), loc.Path)
	if err != nil {
		return nil, "", err
	}
	name := path.Base(loc.Inner)
	if _, err := d.root.Lstat(name); err != nil {
		d.Close()
		return nil, "", fsError(loc.Path, err)
	}
	return d, name, nil
}

// replace moves the entry oldName of from to newName in to. A metadata file admitted with its
// content is written from that content and the entry removed, so what lands is what was
// admitted even if the file changed meanwhile; anything else is renamed, acting on the entry
// itself (a link is moved, not followed).
func replace(from *dir, oldName string, to *dir, newName string, admitted map[string][]byte) error {
	if body, ok := admitted[newName]; ok {
		if err := packages.WriteFileAtomic(to.root, newName, body); err != nil {
			return err
		}
		return from.root.Remove(oldName)
	}
	return renameAt(from.file, oldName, to.file, newName)
}

// CheckDestination checks that the folder destDir can receive moved entries: it passes the
// guard and the write policy, and exists.
func (s *Surface) CheckDestination(g Guard, destDir string) error {
	dst, err := s.resolveWrite(g, destDir, true)
	if err != nil {
		return err
	}
	v, err := s.writeView(dst)
	if err != nil {
		return err
	}
	defer v.Close()
	info, err := v.base.Stat(v.rel)
	if err != nil {
		return fsError(dst.Path, err)
	}
	if !info.IsDir() {
		return notADirectory("%s is a file, not a folder", dst.Path)
	}
	return nil
}
