package filemanager

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
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
	if _, err := v.base.Lstat(loc.Inner); err != nil {
		return loc, fsError(loc.Path, err)
	}
	if err := v.base.RemoveAll(loc.Inner); err != nil {
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
	if _, err := v.base.Lstat(loc.Inner); err != nil {
		return loc, fsError(loc.Path, err)
	}
	if dest.Inner == loc.Inner {
		return dest, nil
	}
	if _, err := v.base.Lstat(dest.Inner); err == nil {
		return loc, exists("%s already exists", dest.Path)
	}
	if err := v.base.Rename(loc.Inner, dest.Inner); err != nil {
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
	if _, err := sv.base.Lstat(src.Inner); err != nil {
		return src, fsError(src.Path, err)
	}
	if _, err := dv.base.Lstat(moved.Inner); err == nil {
		return src, exists("%s already exists", moved.Path)
	}
	if err := renameBetween(sv.base, src.Inner, dv.base, orDot(dst.Inner), dst.Path); err != nil {
		return src, fsError(src.Path, err)
	}
	s.changed(src)
	if dst.Unit != src.Unit || dst.Version != src.Version {
		s.changed(dst)
	}
	return moved, nil
}

// renameBetween moves the entry rel of one root into the folder dir of another root (or the
// same), keeping its base name. Both folders are opened through their roots and the entry is
// renamed between the two descriptors, so neither side can leave its root; the entry itself
// (a link included) is moved, not followed.
func renameBetween(from *os.Root, rel string, to *os.Root, dir, dirPath string) error {
	srcDir, err := from.Open(path.Dir(rel))
	if err != nil {
		return err
	}
	defer srcDir.Close()
	dstDir, err := to.Open(dir)
	if err != nil {
		return fsError(dirPath, err)
	}
	defer dstDir.Close()
	if info, err := dstDir.Stat(); err != nil {
		return err
	} else if !info.IsDir() {
		return notADirectory("%s is a file, not a folder", dirPath)
	}
	name := path.Base(rel)
	return renameAt(srcDir, name, dstDir, name)
}

// renameAt renames oldName in the folder oldDir to newName in the folder newDir.
func renameAt(oldDir *os.File, oldName string, newDir *os.File, newName string) error {
	err := syscall.Renameat(int(oldDir.Fd()), oldName, int(newDir.Fd()), newName)
	if err != nil {
		return &os.LinkError{Op: "renameat", Old: oldName, New: newName, Err: err}
	}
	return nil
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
