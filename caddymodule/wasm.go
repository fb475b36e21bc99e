package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/lifecycle"
	"github.com/caddy-runtime/runtime/internal/serving"
	"github.com/caddy-runtime/runtime/internal/wasm"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/packages"
)

// wasmCacheDir is the folder in state_dir where compiled WebAssembly modules are kept across
// restarts.
const wasmCacheDir = "wasm-cache"

// wasmRecentFile names, in state_dir, the modules kept compiled in memory when the runtime
// last stopped, the most recently used first: the next start loads them again (from the
// compilation cache) before it reports ready, so their first requests only run them.
const wasmRecentFile = "wasm-recent.json"

// wasmWarmLimit bounds how long readiness waits for that warm-up; past it the runtime
// reports ready and the warm-up goes on (a request for a module not warm yet loads it itself,
// or waits for the warm-up's load of it).
const wasmWarmLimit = 10 * time.Second

var errWarming = errors.New("the runtime is loading the compiled WebAssembly modules it kept before its restart")

// wasmState is the state's part for WebAssembly workers: the engine, with its compilation
// cache in state_dir, and the output log their standard error goes to.
type wasmState struct {
	engine *wasm.Engine
	output *workers.OutputLog
	// warmed is closed when the warm-up (warm) has ended, which Stop cuts short; readiness
	// waits for it until warmUntil. loop runs the warm-up, then the pruning of the disk cache.
	warmed    chan struct{}
	warmUntil time.Time
	loop      lifecycle.Loop
	// What the warm-up and the secrets work with.
	logger        *zap.Logger
	stateDir      string
	workerCatalog *packages.Catalog
	versions      *serving.Versions
	secretsOf     func(ctx context.Context, worker string) (map[string]string, error) // state.workerSecrets
}

// setWasmBudget applies wasm_compiled_memory, wasm_cache_size, wasm_max_module_size and
// wasm_memory_budget, the latest config's, now or when the engine starts.
func (s *state) setWasmBudget(settings config.Settings) {
	s.wasmBudget.Store(settings.WasmCompiledMemory)
	s.wasmCache.Store(settings.WasmCacheSize)
	s.wasmModule.Store(settings.WasmMaxModuleSize)
	s.wasmInstances.Store(settings.WasmMemoryBudget)
	if w := s.wasm.Load(); w != nil {
		w.engine.SetBudget(settings.WasmCompiledMemory)
		w.engine.SetCacheSize(settings.WasmCacheSize)
		w.engine.SetLimits(settings.WasmMaxModuleSize, settings.WasmMemoryBudget)
	}
}

// openWasm starts the engine of WebAssembly workers; their lines go into the process
// workers' log book, so GET workers/…/logs reads both kinds alike.
func (s *state) openWasm() error {
	engine, err := wasm.New(wasm.Options{
		CacheDir:  filepath.Join(s.settings.StateDir, wasmCacheDir),
		Budget:    s.wasmBudget.Load(),
		CacheSize: s.wasmCache.Load(),
		Observe:   runtimeMetrics.WasmModule,

		MaxModuleSize: s.wasmModule.Load(),
		MemoryBudget:  s.wasmInstances.Load(),
	})
	if err != nil {
		return fmt.Errorf("WebAssembly workers: %w", err)
	}
	w := &wasmState{engine: engine, output: workers.NewOutputLog(s.procs.logs, s.logger.Named("workers"), s.settings.WorkerLogRate),
		logger: s.logger, stateDir: s.settings.StateDir, workerCatalog: s.workerCatalog, versions: s.versions, secretsOf: s.workerSecrets}
	// A version's compiled module goes when the version goes or changes; a later request
	// compiles it again (from the cache when its bytes are the same).
	s.workerChanges.Subscribe(func(ch packages.Change) {
		switch ch.Op {
		case packages.OpInstalled, packages.OpRemoved, packages.OpDisabled, packages.OpFiles:
			engine.Forget(serving.WasmVersionKey(ch.Name, ch.Version))
		}
	})
	w.warmed, w.warmUntil = make(chan struct{}), time.Now().Add(wasmWarmLimit)
	s.wasm.Store(w)
	w.loop.Go(func(ctx context.Context) {
		w.warm(ctx)
		close(w.warmed)
		w.prune(ctx)
	})
	return nil
}

// wasmPruneEvery is how often the disk cache of compiled modules is pruned while the runtime
// runs; it is pruned at start too, once the warm-up has read what it loads.
const wasmPruneEvery = 24 * time.Hour

// prune prunes the disk cache of compiled modules (wasm.Engine.PruneCache) at once (after the
// warm-up) and then every wasmPruneEvery, until ctx ends.
func (w *wasmState) prune(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	tick := time.NewTicker(wasmPruneEvery)
	defer tick.Stop()
	for {
		removed, freed, err := w.engine.PruneCache(time.Now())
		if removed > 0 {
			w.logger.Info("removed compiled WebAssembly modules unused for a while or past wasm_cache_size from the disk cache",
				zap.Int("files", removed), zap.Int64("bytes", freed))
		}
		if err != nil {
			w.logger.Info("the disk cache of compiled WebAssembly modules was not pruned whole; the next pass tries again", zap.Error(err))
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// warming reports errWarming while the warm-up runs, for at most wasmWarmLimit.
func (w *wasmState) warming() error {
	select {
	case <-w.warmed:
		return nil
	default:
	}
	if time.Now().After(w.warmUntil) {
		return nil
	}
	return errWarming
}

// warm loads the modules named in wasmRecentFile, the most recently used first, while the
// budget has room: each still installed as it was (the same version folder and module file,
// enabled) is made ready as its first request would make it.
func (w *wasmState) warm(ctx context.Context) {
	data, err := os.ReadFile(filepath.Join(w.stateDir, wasmRecentFile))
	if err != nil {
		return
	}
	var keys []string
	if err := json.Unmarshal(data, &keys); err != nil {
		// Nothing to do about it: the next stop writes the file afresh.
		w.logger.Info("ignoring the list of WebAssembly modules to load at start", zap.String("file", wasmRecentFile), zap.Error(err))
		return
	}
	for _, key := range keys {
		if ctx.Err() != nil {
			return
		}
		name, version, dir, module, ok := serving.ParseModuleKey(key)
		if !ok {
			continue
		}
		u, found := w.workerCatalog.Find(name)
		if !found {
			continue
		}
		i := slices.IndexFunc(u.Versions, func(v packages.Version) bool { return v.Version == version && v.Path == dir && v.Enabled })
		if i < 0 {
			continue
		}
		v := u.Versions[i]
		served, err := w.versions.Get(v)
		if err != nil || served.Manifest.Runtime != workers.RuntimeWasm || served.Manifest.Module != module {
			continue
		}
		more, err := w.engine.Warm(ctx, serving.WasmModule(name, v, served))
		if err != nil {
			w.logger.Debug("a WebAssembly module was not loaded at start", zap.String("worker", name), zap.String("version", version), zap.Error(err))
		}
		if !more {
			return
		}
	}
}

// closeWasm ends the warm-up and the pruning, records which modules are kept compiled for
// the next start, and closes the engine.
func (s *state) closeWasm() error {
	w := s.wasm.Swap(nil)
	if w == nil {
		return nil
	}
	w.loop.Stop()
	if err := writeRecent(filepath.Join(s.settings.StateDir, wasmRecentFile), w.engine.Recent()); err != nil {
		s.logger.Warn("the list of WebAssembly modules to load at the next start was not written", zap.Error(err))
	}
	w.engine.Close()
	return nil
}

// writeRecent replaces the file at path with keys, whole or not at all.
func writeRecent(path string, keys []string) error {
	data, err := json.Marshal(keys)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// wasmHost is what the handler's serving of WebAssembly workers needs under settings, nil
// until the state has started.
func (s *state) wasmHost(settings config.Settings) func() *serving.WasmHost {
	var cached atomic.Pointer[serving.WasmHost]
	return func() *serving.WasmHost {
		if h := cached.Load(); h != nil {
			return h
		}
		w := s.wasm.Load()
		if w == nil {
			return nil
		}
		h := &serving.WasmHost{Engine: w.engine, Output: w.output, Allowed: settings.WasmWorkers.Allows, Memory: settings.WasmMemory,
			MaxHeader: settings.WorkerMaxHeaderSize, Concurrency: settings.WasmConcurrency, Secrets: w.secretsOf,
			Databases: s.databases, DatabaseSize: settings.WorkerDatabase}
		cached.Store(h)
		return h
	}
}
