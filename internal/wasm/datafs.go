package wasm

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"
)

// DataDir is where an instance finds its worker's data folder (Request.Data), read-write.
const DataDir = "/.database"

// dataFS is a worker's data folder as an instance sees it: wazero's folder mount, which
// follows symbolic links on the host, confined to the folder. An instance may make no link,
// and no path through a symbolic link is followed (one could only have been planted by a
// process version of the same worker): a relative link such as ../other would otherwise
// reach another worker's folder with the runtime's own rights. What its files are written is
// bounded by room, the bytes the folder may still take (limits.database), which the instances
// of a worker running at once share.
type dataFS struct {
	experimentalsys.FS
	dir  string
	room *atomic.Int64 // nil: unbounded
	full func()        // told of each write refused for want of room; may be nil
}

// hidden starts the names of the database's files (databases.File, its -wal, -shm and
// -journal), which the runtime opens for the instance: an instance writing them could hand the
// runtime's SQLite a crafted file.
const hidden = "db.sqlite"

// newDataFS confines dir; a nil room leaves its files unbounded.
func newDataFS(dir string, room *atomic.Int64, full func()) *dataFS {
	return &dataFS{FS: sysfs.DirFS(dir), dir: dir, room: room, full: full}
}

// confined refuses a path that goes through a symbolic link in the folder; a part that does
// not exist ends the walk (what follows is made by the call, inside the folder).
func (d *dataFS) confined(path string) experimentalsys.Errno {
	host := d.dir
	for _, part := range strings.Split(filepath.ToSlash(path), "/") {
		if part == "" || part == "." {
			continue
		}
		if host == d.dir && strings.HasPrefix(part, hidden) {
			return experimentalsys.EPERM
		}
		host = filepath.Join(host, part)
		info, err := os.Lstat(host)
		switch {
		case err != nil:
			return 0
		case info.Mode()&fs.ModeSymlink != 0:
			return experimentalsys.EPERM
		}
	}
	return 0
}

func (d *dataFS) OpenFile(path string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if errno := d.confined(path); errno != 0 {
		return nil, errno
	}
	f, errno := d.FS.OpenFile(path, flag|experimentalsys.O_NOFOLLOW, perm)
	if errno != 0 || d.room == nil {
		return f, errno
	}
	return &dataFile{File: f, fs: d}, 0
}

func (d *dataFS) Lstat(path string) (st sys.Stat_t, errno experimentalsys.Errno) {
	if errno = d.confined(filepath.Dir(path)); errno != 0 {
		return st, errno
	}
	return d.FS.Lstat(path)
}

func (d *dataFS) Stat(path string) (st sys.Stat_t, errno experimentalsys.Errno) {
	if errno = d.confined(path); errno != 0 {
		return st, errno
	}
	return d.FS.Stat(path)
}

func (d *dataFS) Mkdir(path string, perm fs.FileMode) experimentalsys.Errno {
	return d.both(path, path, func() experimentalsys.Errno { return d.FS.Mkdir(path, perm) })
}

func (d *dataFS) Chmod(path string, perm fs.FileMode) experimentalsys.Errno {
	return d.both(path, path, func() experimentalsys.Errno { return d.FS.Chmod(path, perm) })
}

func (d *dataFS) Rename(from, to string) experimentalsys.Errno {
	return d.both(from, to, func() experimentalsys.Errno { return d.FS.Rename(from, to) })
}

func (d *dataFS) Rmdir(path string) experimentalsys.Errno {
	return d.both(path, path, func() experimentalsys.Errno { return d.FS.Rmdir(path) })
}

func (d *dataFS) Unlink(path string) experimentalsys.Errno {
	// Removing a link planted in the folder is harmless: only its parents are checked, and
	// whether it is the database's.
	if filepath.Dir(filepath.Clean(path)) == "." && strings.HasPrefix(filepath.Base(path), hidden) {
		return experimentalsys.EPERM
	}
	return d.both(filepath.Dir(path), filepath.Dir(path), func() experimentalsys.Errno { return d.FS.Unlink(path) })
}

func (d *dataFS) Utimens(path string, atim, mtim int64) experimentalsys.Errno {
	return d.both(path, path, func() experimentalsys.Errno { return d.FS.Utimens(path, atim, mtim) })
}

// Link and Symlink are refused: a symbolic link could lead out of the folder, and a database
// needs no hard one.
func (d *dataFS) Link(string, string) experimentalsys.Errno { return experimentalsys.EPERM }

func (d *dataFS) Symlink(string, string) experimentalsys.Errno { return experimentalsys.EPERM }

// both runs op once neither path goes through a symbolic link.
func (d *dataFS) both(a, b string, op func() experimentalsys.Errno) experimentalsys.Errno {
	if errno := d.confined(a); errno != 0 {
		return errno
	}
	if errno := d.confined(b); errno != 0 {
		return errno
	}
	return op()
}

// dataFile is a file of the data folder whose writes take from the folder's room: a write
// past it fails (EIO, WASI preview 1 having no ENOSPC in wazero) and writes nothing.
type dataFile struct {
	experimentalsys.File
	fs *dataFS
}

func (f *dataFile) take(n int) experimentalsys.Errno {
	if f.fs.room.Add(-int64(n)) < 0 {
		f.fs.room.Add(int64(n))
		if f.fs.full != nil {
			f.fs.full()
		}
		return experimentalsys.EIO
	}
	return 0
}

func (f *dataFile) Write(b []byte) (int, experimentalsys.Errno) {
	if errno := f.take(len(b)); errno != 0 {
		return 0, errno
	}
	return f.File.Write(b)
}

func (f *dataFile) Pwrite(b []byte, off int64) (int, experimentalsys.Errno) {
	if errno := f.take(len(b)); errno != 0 {
		return 0, errno
	}
	return f.File.Pwrite(b, off)
}
