package wasm

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults of the disk cache's pruning.
const (
	// DefaultCacheSize bounds the compiled modules kept on disk; past it the least recently
	// used go.
	DefaultCacheSize = 1 << 30
	// DefaultCacheAge is how long a compiled module no start or request used stays on disk.
	DefaultCacheAge = 30 * 24 * time.Hour
)

// staleTemp is the age past which a file wazero was writing into the cache, and never
// renamed (the process stopped meanwhile), is removed.
const staleTemp = time.Hour

// SetCacheSize sets the bytes of compiled modules the disk cache may hold (0: DefaultCacheSize);
// PruneCache enforces it.
func (e *Engine) SetCacheSize(n int64) {
	if n <= 0 {
		n = DefaultCacheSize
	}
	e.cacheSize.Store(n)
}

// cachedFile is one compiled module in the disk cache.
type cachedFile struct {
	path string
	size int64
	used time.Time
}

// PruneCache removes from the disk cache the compiled modules not used since now minus the
// cache age (Options.CacheAge), then the least recently used while the rest hold more than
// the cache size, and what wazero left half written. A module removed is compiled again when
// next loaded. It returns how many files it removed and their bytes.
//
// A file's last use is the later of its modification, when wazero wrote it, and its last
// access, when a start or a request read it back (where the file system and the platform keep
// access times; Linux's default, relatime, updates them at most once a day).
func (e *Engine) PruneCache(now time.Time) (removed int, freed int64, err error) {
	if e.opts.CacheDir == "" {
		return 0, 0, nil
	}
	// Compilations count the folder's files to tell a cache hit (see compile).
	for i := range e.compiling {
		e.compiling[i].Lock()
		defer e.compiling[i].Unlock()
	}
	age := e.opts.CacheAge
	if age <= 0 {
		age = DefaultCacheAge
	}
	var files []cachedFile
	var total int64
	var errs []error
	remove := func(f cachedFile) {
		if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			return
		}
		removed++
		freed += f.size
	}
	// wazero keeps a folder per version of itself and platform: the files of other versions
	// are never read again, and age out like the rest. The folders stay: wazero writes into
	// its own without making it again.
	dirs, err := os.ReadDir(e.opts.CacheDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, 0, nil
		}
		return 0, 0, err
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		dir := filepath.Join(e.opts.CacheDir, d.Name())
		entries, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, entry := range entries {
			info, err := entry.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			f := cachedFile{path: filepath.Join(dir, entry.Name()), size: info.Size(), used: lastUse(info)}
			switch {
			case strings.HasSuffix(entry.Name(), ".tmp"):
				if now.Sub(info.ModTime()) > staleTemp {
					remove(f)
				}
			case now.Sub(f.used) > age:
				remove(f)
			default:
				files = append(files, f)
				total += f.size
			}
		}
	}
	// The most recently used first: those past the size go.
	slices.SortFunc(files, func(a, b cachedFile) int { return b.used.Compare(a.used) })
	for limit := e.cacheSize.Load(); total > limit && len(files) > 0; files = files[:len(files)-1] {
		f := files[len(files)-1]
		remove(f)
		total -= f.size
	}
	return removed, freed, errors.Join(errs...)
}

// lastUse is the later of info's modification and access times.
func lastUse(info fs.FileInfo) time.Time {
	if at := accessTime(info); at.After(info.ModTime()) {
		return at
	}
	return info.ModTime()
}
