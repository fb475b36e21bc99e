package caddymodule

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/packages"
	"github.com/caddy-runtime/runtime/internal/serving"
	"github.com/caddy-runtime/runtime/internal/wasm"
	workerspkg "github.com/caddy-runtime/runtime/internal/workers"
)

// wasmCacheDir is the folder in state_dir where compiled WebAssembly modules are kept across
// restarts.
const wasmCacheDir = "wasm-cache"

// wasmState is the state's part for WebAssembly workers: the engine, with its compilation
// cache in state_dir, and the output log their standard error goes to.
type wasmState struct {
	engine *wasm.Engine
	output *workerspkg.OutputLog
	// secrets keeps each worker's opened secrets between requests, dropped when they change
	// (forgetWasmSecrets); gen counts the drops, so a read that a change overtook is not kept.
	mu      sync.Mutex
	secrets map[string]map[string]string
	gen     uint64
}

// maxWasmSecrets bounds the workers whose secrets are kept; past it they start afresh.
const maxWasmSecrets = 4096

// wasmSecrets returns worker's secrets for a WebAssembly instance: kept from an earlier
// request, else opened (workerSecrets) and kept.
func (s *state) wasmSecrets(ctx context.Context, worker string) (map[string]string, error) {
	w := s.wasm.Load()
	if w == nil {
		return s.workerSecrets(ctx, worker)
	}
	w.mu.Lock()
	kept, ok := w.secrets[worker]
	gen := w.gen
	w.mu.Unlock()
	if ok {
		return kept, nil
	}
	opened, err := s.workerSecrets(ctx, worker)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gen == gen {
		if len(w.secrets) >= maxWasmSecrets {
			w.secrets = map[string]map[string]string{}
		}
		w.secrets[worker] = opened
	}
	return opened, nil
}

// forgetWasmSecrets drops the kept secrets of worker, whose secrets changed: the next request
// opens them again.
func (s *state) forgetWasmSecrets(worker string) {
	if w := s.wasm.Load(); w != nil {
		w.mu.Lock()
		delete(w.secrets, worker)
		w.gen++
		w.mu.Unlock()
	}
}

// setWasmBudget applies wasm_compiled_memory, the latest config's, now or when the engine
// starts.
func (s *state) setWasmBudget(n int64) {
	s.wasmBudget.Store(n)
	if w := s.wasm.Load(); w != nil {
		w.engine.SetBudget(n)
	}
}

// openWasm starts the engine of WebAssembly workers; their lines go into logs, the process
// workers' log book, so GET workers/…/logs reads both kinds alike.
func (s *state) openWasm(logs *workerspkg.LogBook) error {
	engine, err := wasm.New(wasm.Options{
		CacheDir: filepath.Join(s.settings.StateDir, wasmCacheDir),
		Budget:   s.wasmBudget.Load(),
		Observe:  runtimeMetrics.WasmModule,
	})
	if err != nil {
		return fmt.Errorf("WebAssembly workers: %v", err)
	}
	w := &wasmState{engine: engine, output: workerspkg.NewOutputLog(logs, s.logger.Named("workers"), s.settings.WorkerLogRate),
		secrets: map[string]map[string]string{}}
	// A version's compiled module goes when the version goes or changes; a later request
	// compiles it again (from the cache when its bytes are the same).
	s.workerChanges.Subscribe(func(ch packages.Change) {
		switch ch.Op {
		case packages.OpInstalled, packages.OpRemoved, packages.OpDisabled, packages.OpFiles:
			engine.Forget(serving.WasmVersionKey(ch.Name, ch.Version))
		}
	})
	s.wasm.Store(w)
	return nil
}

func (s *state) closeWasm() {
	if w := s.wasm.Swap(nil); w != nil {
		w.engine.Close()
	}
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
			Secrets: s.wasmSecrets}
		cached.Store(h)
		return h
	}
}
