package serving

import (
	"os"
	"sync"
	"time"

	"github.com/caddy-runtime/runtime/packages"
	"github.com/caddy-runtime/runtime/workers"
)

// Versions caches, per served worker version, its decoded manifest and an open os.Root of its
// folder, so a request decodes nothing and opens no folder. An entry holds while the catalog's
// metadata of the version is the same read (see packages.Metadata.Serial): an install, an edit
// or any change the catalog notices opens the folder afresh.
type Versions struct {
	mu    sync.Mutex
	m     map[string]*Served
	swept time.Time
}

// Served is what serving a version needs.
type Served struct {
	serial   uint64
	used     time.Time
	Manifest workers.Manifest
	Root     *os.Root // the version folder
}

// NewVersions returns an empty cache; Close releases it.
func NewVersions() *Versions { return &Versions{m: map[string]*Served{}} }

// rootGrace keeps a replaced folder handle open for requests still using it; idleAfter drops
// entries of versions no longer served, so a removed folder is not held open.
const (
	rootGrace = 30 * time.Second
	idleAfter = 10 * time.Minute
)

// Get returns the cached manifest and folder of v, reading them when v changed.
func (vs *Versions) Get(v packages.Version) (*Served, error) {
	serial := v.Metadata.Serial()
	now := time.Now()
	vs.mu.Lock()
	defer vs.mu.Unlock()
	vs.sweepLocked(now)
	if s, ok := vs.m[v.Path]; ok && s.serial == serial {
		s.used = now
		return s, nil
	}
	m, err := workers.ReadManifest(v.Metadata)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(v.Path)
	if err != nil {
		return nil, err
	}
	if old, ok := vs.m[v.Path]; ok {
		time.AfterFunc(rootGrace, func() { old.Root.Close() })
	}
	s := &Served{serial: serial, used: now, Manifest: m, Root: root}
	vs.m[v.Path] = s
	return s, nil
}

// sweepLocked drops entries unused for idleAfter, at most once a minute.
func (vs *Versions) sweepLocked(now time.Time) {
	if now.Sub(vs.swept) < time.Minute {
		return
	}
	vs.swept = now
	for k, s := range vs.m {
		if now.Sub(s.used) > idleAfter {
			delete(vs.m, k)
			time.AfterFunc(rootGrace, func() { s.Root.Close() })
		}
	}
}

// Close releases every folder handle.
func (vs *Versions) Close() {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	for k, s := range vs.m {
		s.Root.Close()
		delete(vs.m, k)
	}
}
