package caddymodule

import (
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
)

// states holds the long-lived runtime state, keyed by the settings it depends on, so a config
// reload with the same settings reuses it instead of rebuilding it.
var states = caddy.NewUsagePool()

// stateKey identifies the state a handler needs; handlers with equal keys share one state.
func stateKey(s config.Settings) string {
	return strings.Join([]string{
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
}

func newState(s config.Settings, logger *zap.Logger) *state {
	return &state{settings: s, logger: logger}
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
	if s.phase.Swap(phaseStopped) != phaseStopped {
		s.logger.Info("runtime state released", zap.String("state_dir", s.settings.StateDir))
	}
	return nil
}

const appID = "runtime"

// App is the runtime app module. It holds no configuration; it exists so that the states
// used by a config are started when Caddy starts that config, and never by caddy validate.
type App struct {
	mu     sync.Mutex
	states []*state
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: appID, New: func() caddy.Module { return new(App) }}
}

func (a *App) track(s *state) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.states = append(a.states, s)
}

// Start starts every state the config's handlers use.
func (a *App) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.states {
		if err := s.start(); err != nil {
			return err
		}
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
