package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/config"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
	workerspkg "github.com/caddy-runtime/runtime/workers"
)

// states holds the long-lived runtime state, keyed by the settings it depends on, so a config
// reload with the same settings reuses it instead of rebuilding it.
var states = caddy.NewUsagePool()

// stateKey identifies the state a handler needs; handlers with equal keys share one state.
func stateKey(s config.Settings) string {
	return strings.Join([]string{
		fmt.Sprintf("limits=%d/%d/%d pool=%d", s.MaxUploadSize, s.MaxUnpackedSize, s.MaxArchiveEntries, s.PoolSize),
		"workers=" + strings.Join(s.WorkerDirs, "\x00"),
		"plugins=" + strings.Join(s.PluginDirs, "\x00"),
		"state=" + s.StateDir,
		"keystore=" + s.KeyStore,
	}, "\n")
}

const (
	phaseStarting int32 = iota
	phaseReady
	phaseStopped
)

// state is the runtime's long-lived state. Creating it is free of side effects; start opens
// what it needs, once, when the runtime app starts; Destruct releases it when the last config
// using it goes away.
type state struct {
	settings  config.Settings
	logger    *zap.Logger
	phase     atomic.Int32
	startOnce sync.Once
	startErr  error
	keys      atomic.Pointer[keystore.Store]
	workers   *packages.Catalog
	plugins   *packages.Catalog
	pool      atomic.Pointer[workerspkg.Pool]
	versions  *workerspkg.Versions
}

func newState(s config.Settings, logger *zap.Logger) *state {
	limits := packages.Limits{Upload: s.MaxUploadSize, Unpacked: s.MaxUnpackedSize, Entries: s.MaxArchiveEntries}
	return &state{
		settings: s, logger: logger,
		workers:  packages.NewCatalog(packages.WorkerLayout, s.WorkerDirs, limits),
		plugins:  packages.NewCatalog(packages.PluginLayout, s.PluginDirs, limits),
		versions: workerspkg.NewVersions(),
	}
}

// start prepares the state on the first start of a config that uses it; later starts (config
// reloads) find it ready.
func (s *state) start() error {
	s.startOnce.Do(func() {
		if s.startErr = s.open(); s.startErr != nil {
			return
		}
		s.phase.CompareAndSwap(phaseStarting, phaseReady)
		s.logger.Info("runtime state started",
			zap.Strings("worker_dirs", s.settings.WorkerDirs),
			zap.Strings("plugin_dirs", s.settings.PluginDirs),
			zap.String("state_dir", s.settings.StateDir),
			zap.String("key_store", s.settings.KeyStore))
	})
	return s.startErr
}

// open creates the state folder and the writable unit folders; built-in folders (names
// starting with ".") are provided by the image and never created.
func (s *state) open() error {
	for _, dirs := range []struct {
		setting string
		list    []string
	}{{"worker_dirs", s.settings.WorkerDirs}, {"plugin_dirs", s.settings.PluginDirs}} {
		for _, dir := range dirs.list {
			if strings.HasPrefix(filepath.Base(dir), ".") {
				continue
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("creating %s entry: %v", dirs.setting, err)
			}
		}
	}
	// Last, so that shared parent folders get the unit folders' mode, not this one's.
	if err := os.MkdirAll(s.settings.StateDir, 0o700); err != nil {
		return fmt.Errorf("creating state_dir: %v", err)
	}
	for _, c := range []*packages.Catalog{s.workers, s.plugins} {
		if err := c.CleanTemp(); err != nil {
			return fmt.Errorf("cleaning up after an interrupted upload: %v", err)
		}
	}
	store, err := keystore.Open(context.Background(), filepath.Join(s.settings.StateDir, keyStoreFile))
	if err != nil {
		return err
	}
	s.keys.Store(store)
	pool := workerspkg.NewPool(workerspkg.PoolOptions{
		Size: s.settings.PoolSize, Logger: s.logger.Named("workers"), Path: os.Getenv("PATH"),
	})
	// A version's process goes when the version is disabled, replaced, removed or edited.
	s.workers.Subscribe(func(ch packages.Change) {
		switch ch.Op {
		case "installed", "removed", "disabled", "files":
			pool.StopUnit(ch.Name, ch.Version)
		}
	})
	s.pool.Store(pool)
	return nil
}

// workerPool returns the process pool once the state has started.
func (s *state) workerPool() *workerspkg.Pool { return s.pool.Load() }

// keyStoreFile is the key store's file name inside state_dir.
const keyStoreFile = "api-keys.db"

// keyStore returns the key store once the state has started.
func (s *state) keyStore() (*keystore.Store, error) {
	if store := s.keys.Load(); store != nil {
		return store, nil
	}
	if err := s.ready(); err != nil {
		return nil, err
	}
	return nil, errStarting
}

// ensureBootstrap creates the first admin key when there is no root key and no active key,
// so a fresh runtime can be managed at all; it logs where the secret is, never the secret.
func (s *state) ensureBootstrap() error {
	store, err := s.keyStore()
	if err != nil {
		return err
	}
	created, err := store.EnsureBootstrap(context.Background(), s.settings.StateDir)
	if err != nil {
		return fmt.Errorf("creating the bootstrap key: %v", err)
	}
	if created != nil {
		s.logger.Warn("no root key and no API key: created the bootstrap admin key; read it from the file, create your own keys, then revoke it",
			zap.String("file", filepath.Join(s.settings.StateDir, keystore.BootstrapFile)),
			zap.String("key_prefix", created.KeyPrefix))
	}
	return nil
}

var (
	errStarting     = errors.New("the runtime is starting")
	errShuttingDown = errors.New("the runtime is shutting down")
)

// ready reports whether the runtime takes traffic.
func (s *state) ready() error {
	if caddy.Exiting() {
		return errShuttingDown
	}
	switch s.phase.Load() {
	case phaseStarting:
		return errStarting
	case phaseStopped:
		return errShuttingDown
	}
	return nil
}

// Destruct releases the state when no config uses it any more.
func (s *state) Destruct() error {
	if s.phase.Swap(phaseStopped) == phaseStopped {
		return nil
	}
	if pool := s.pool.Swap(nil); pool != nil {
		pool.Close()
	}
	s.workers.Close()
	s.plugins.Close()
	s.versions.Close()
	var err error
	if store := s.keys.Swap(nil); store != nil {
		err = store.Close()
	}
	s.logger.Info("runtime state released", zap.String("state_dir", s.settings.StateDir))
	return err
}

const appID = "runtime"

// App is the runtime app module. It holds no configuration; it exists so that the states
// used by a config are started when Caddy starts that config, and never by caddy validate.
type App struct {
	mu sync.Mutex
	// states maps each state the config uses to whether any handler using it has a root key.
	states map[*state]bool
	// hosts are the handlers' plugin hosts, loaded when the config starts.
	hosts []*pluginHost
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: appID, New: func() caddy.Module { return new(App) }}
}

func (a *App) track(s *state, hasRootKey bool, host *pluginHost) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.states == nil {
		a.states = map[*state]bool{}
	}
	a.states[s] = a.states[s] || hasRootKey
	a.hosts = append(a.hosts, host)
}

// Start starts every state the config's handlers use, and creates the bootstrap key where no
// handler has a root key.
func (a *App) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for s, hasRootKey := range a.states {
		if err := s.start(); err != nil {
			return err
		}
		if !hasRootKey {
			if err := s.ensureBootstrap(); err != nil {
				return err
			}
		}
	}
	for _, host := range a.hosts {
		host.reload()
	}
	return nil
}

// Stop does nothing: states outlive a config and are released by their last handler.
func (a *App) Stop() error { return nil }

// Interface guards
var (
	_ caddy.App        = (*App)(nil)
	_ caddy.Destructor = (*state)(nil)
)
