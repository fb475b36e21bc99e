package serving

import (
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/packages"
)

// Versions caches, per served worker version, its decoded manifest and an open os.Root of its
// folder, so a request decodes nothing and opens no folder. An entry holds while the catalog's
// metadata of the version is the same read (see packages.Metadata.Serial): an install, an edit
// or any change the catalog notices opens the folder afresh.
//
// Readers take no lock: the entries are an immutable map swapped whole, copied on the rare
// write (a version served for the first time or changed, and the sweep of idle ones).
type Versions struct {
	m     atomic.Pointer[map[string]*Served]
	mu    sync.Mutex   // serialises writers
	swept atomic.Int64 // Unix nanoseconds of the last sweep
}

// Served is what serving a version needs.
type Served struct {
	serial   uint64
	used     atomic.Int64 // Unix nanoseconds of the last request
	Manifest workers.Manifest
	Root     *os.Root // the version folder
	pages    basePages
}

// NewVersions returns an empty cache; Close releases it.
func NewVersions() *Versions {
	vs := &Versions{}
	vs.m.Store(&map[string]*Served{})
	vs.swept.Store(time.Now().UnixNano())
	return vs
}

// rootGrace keeps a replaced folder handle open for requests still using it; idleAfter drops
// entries of versions no longer served, so a removed folder is not held open.
const (
	rootGrace  = 30 * time.Second
	idleAfter  = 10 * time.Minute
	sweepEvery = time.Minute
)

// Get returns the cached manifest (its .env merged: workers.ReadVersion) and folder of v, reading them when v changed.
func (vs *Versions) Get(v packages.Version) (*Served, error) {
	serial := v.Metadata.Serial()
	now := time.Now().UnixNano()
	if last := vs.swept.Load(); now-last > int64(sweepEvery) && vs.swept.CompareAndSwap(last, now) {
		vs.sweep(now)
	}
	if s, ok := (*vs.m.Load())[v.Path]; ok && s.serial == serial {
		if s.used.Load() < now-int64(time.Second) {
			s.used.Store(now) // at most once a second: the line stays shared between cores
		}
		return s, nil
	}
	return vs.load(v, serial, now)
}

// load reads v's manifest, opens its folder and publishes the entry.
func (vs *Versions) load(v packages.Version, serial uint64, now int64) (*Served, error) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	cur := *vs.m.Load()
	if s, ok := cur[v.Path]; ok && s.serial == serial {
		return s, nil // another request loaded it meanwhile
	}
	root, err := os.OpenRoot(v.Path)
	if err != nil {
		return nil, err
	}
	m, err := workers.ReadVersion(v.Metadata, root)
	if err != nil {
		root.Close()
		return nil, err
	}
	s := &Served{serial: serial, Manifest: m, Root: root}
	s.used.Store(now)
	next := maps.Clone(cur)
	if old, ok := cur[v.Path]; ok {
		closeLater(old)
	}
	next[v.Path] = s
	vs.m.Store(&next)
	return s, nil
}

// sweep drops entries unused for idleAfter.
func (vs *Versions) sweep(now int64) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	cur := *vs.m.Load()
	next := maps.Clone(cur)
	for k, s := range cur {
		if now-s.used.Load() > int64(idleAfter) {
			delete(next, k)
			closeLater(s)
		}
	}
	if len(next) != len(cur) {
		vs.m.Store(&next)
	}
}

// closeLater closes a dropped entry's folder once requests still using it are done.
func closeLater(s *Served) { time.AfterFunc(rootGrace, func() { s.Root.Close() }) }

// Close releases every folder handle.
func (vs *Versions) Close() {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	for _, s := range *vs.m.Load() {
		s.Root.Close()
	}
	vs.m.Store(&map[string]*Served{})
}
