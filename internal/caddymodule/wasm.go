package caddymodule

import (
	"fmt"
	"path/filepath"
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
	w := &wasmState{engine: engine, output: workerspkg.NewOutputLog(logs, s.logger.Named("workers"), s.settings.WorkerLogRate)}
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
		h := &serving.WasmHost{Engine: w.engine, Output: w.output, Allowed: settings.WasmWorkers.Allows, Memory: settings.WasmMemory}
		cached.Store(h)
		return h
	}
}
