// Package wasm runs WebAssembly workers: WASI preview 1 modules, compiled once per version
// with wazero (its compiler where Go has one for the platform, its interpreter elsewhere),
// kept compiled in memory within a budget and on disk across restarts, and run in a fresh
// instance for every request with the CGI contract (see Run).
package wasm

import (
	"bytes"
	"container/list"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sync/singleflight"
)

// Defaults of the engine and of a request.
const (
	// DefaultBudget is the memory compiled modules may take before the least recently used
	// are dropped.
	DefaultBudget = 256 << 20
	// DefaultMemory caps an instance's linear memory.
	DefaultMemory = 128 << 20
	// DefaultMaxOutput caps what one request may write to standard output, headers included.
	DefaultMaxOutput = 32 << 20
)

// entryOverhead, codeFactor and functionCost estimate what a compiled module costs in memory:
// a fixed part (the module's records in the engine, its executable mapping rounded to pages),
// a part proportional to the binary (machine code and metadata are a few times its size), and
// a part per function (the engine's records of each: a module of many tiny functions takes
// far more than its size suggests, about 80 bytes a function measured).
const (
	entryOverhead = 16 << 10
	codeFactor    = 4
	functionCost  = 128
)

// Options configure an Engine.
type Options struct {
	// CacheDir keeps compiled modules on disk, so a restart compiles nothing again; "" keeps
	// them in memory only.
	CacheDir string
	// Budget bounds the estimated memory of the compiled modules kept; 0 is DefaultBudget.
	Budget int64
	// CacheSize bounds the bytes of the disk cache (see PruneCache); 0 is DefaultCacheSize.
	CacheSize int64
	// CacheAge is how long a module unused stays in the disk cache; 0 is DefaultCacheAge.
	CacheAge time.Duration
	// MaxModuleSize is the largest module compiled (wasm_max_module_size); 0 is
	// DefaultMaxModuleSize.
	MaxModuleSize int64
	// MemoryBudget bounds the memory the running instances reserve together
	// (wasm_memory_budget); 0 is DefaultMemoryBudget.
	MemoryBudget int64
	// Observe, when set, is told of every module made ready to run: cached when it came from
	// the disk cache (or another version with the same bytes) rather than a compilation.
	Observe func(cached bool)
}

// Engine compiles and runs modules. Its methods are safe for concurrent use.
type Engine struct {
	opts    Options
	runtime wazero.Runtime
	cache   wazero.CompilationCache
	flight  singleflight.Group
	// compiling serialises the compilations of a lane, so that the cache folder's files before
	// and after one mostly tell a compilation from a cache hit; a large module compiles in a
	// lane of its own, so that the seconds it may take (see largeModule) hold back no other
	// module's first request.
	compiling [2]sync.Mutex
	budget    atomic.Int64
	cacheSize atomic.Int64
	maxModule atomic.Int64
	slots     slots // the running instances' room
	freed     giver // gives the memory of large instances and modules back when they end

	mu      sync.Mutex
	entries map[string]*entry
	lru     *list.List // of *entry, most recently used first
	used    int64      // estimated bytes of the entries

	compiled, cached atomic.Int64
}

// entry is one compiled module kept ready.
type entry struct {
	key     string
	serial  uint64
	module  wazero.CompiledModule
	memory  info // its memories' limits
	cost    int64
	elem    *list.Element
	refs    int  // requests running it
	dropped bool // out of the map: closed when the last request ends
	closed  bool
}

// New returns an engine; Close releases it.
func New(opts Options) (*Engine, error) {
	e := &Engine{opts: opts, entries: map[string]*entry{}, lru: list.New(), slots: slots{groups: map[string]*group{}}}
	e.SetBudget(opts.Budget)
	e.SetLimits(opts.MaxModuleSize, opts.MemoryBudget)
	e.SetCacheSize(opts.CacheSize)
	e.cache = wazero.NewCompilationCache()
	if opts.CacheDir != "" {
		var err error
		if e.cache, err = wazero.NewCompilationCacheWithDir(opts.CacheDir); err != nil {
			return nil, fmt.Errorf("the compilation cache in %s: %w", opts.CacheDir, err)
		}
	}
	ctx := context.Background()
	// Closing on a done context stops a request at its time limit, however it loops.
	e.runtime = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true).WithCompilationCache(e.cache))
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, e.runtime); err != nil {
		e.runtime.Close(ctx)
		return nil, fmt.Errorf("WASI: %w", err)
	}
	if err := instantiateDatabase(ctx, e.runtime); err != nil {
		e.runtime.Close(ctx)
		return nil, fmt.Errorf("the database module: %w", err)
	}
	return e, nil
}

// SetBudget sets the memory budget of compiled modules (0: DefaultBudget); entries past it
// go as requests end.
func (e *Engine) SetBudget(n int64) {
	if n <= 0 {
		n = DefaultBudget
	}
	e.budget.Store(n)
}

// SetLimits sets the largest module compiled (0: DefaultMaxModuleSize) and the memory the
// running instances reserve together (0: DefaultMemoryBudget); instances running keep their
// reservation under the budget they started in.
func (e *Engine) SetLimits(maxModule, memoryBudget int64) {
	if maxModule <= 0 {
		maxModule = DefaultMaxModuleSize
	}
	e.maxModule.Store(maxModule)
	e.slots.setBudget(memoryBudget)
}

// Close releases every compiled module and the runtime.
func (e *Engine) Close() {
	ctx := context.Background()
	e.mu.Lock()
	e.entries, e.used = map[string]*entry{}, 0
	e.lru.Init()
	e.mu.Unlock()
	e.runtime.Close(ctx)
	e.cache.Close(ctx)
}

// Stats are counts of the engine's work.
type Stats struct {
	Compiled int64 // modules compiled
	Cached   int64 // modules made ready without compiling (disk cache)
	Modules  int   // compiled modules kept in memory
	Bytes    int64 // their estimated memory
}

// Stats returns the engine's counts.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Stats{Compiled: e.compiled.Load(), Cached: e.cached.Load(), Modules: len(e.entries), Bytes: e.used}
}

// Recent returns the keys of the modules kept compiled, the most recently used first.
func (e *Engine) Recent() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	keys := make([]string, 0, e.lru.Len())
	for el := e.lru.Front(); el != nil; el = el.Next() {
		keys = append(keys, el.Value.(*entry).key)
	}
	return keys
}

// Warm makes mod ready to run as its first request would (from the disk cache when that
// holds it), so that request only runs it. It reports false, doing nothing, when the modules
// kept already fill the budget: a warm-up never pushes out what it loaded before.
func (e *Engine) Warm(ctx context.Context, mod Module) (bool, error) {
	e.mu.Lock()
	full := e.used >= e.budget.Load()
	e.mu.Unlock()
	if full {
		return false, nil
	}
	en, err := e.acquire(ctx, mod)
	if err != nil {
		return true, err
	}
	e.release(en)
	return true, nil
}

// Module names the module a request runs.
type Module struct {
	// Key identifies the module file, e.g. its path; Serial changes when the file may have
	// changed (a new read of the version), which compiles it again.
	Key    string
	Serial uint64
	// Read returns the module's bytes, when it must be compiled, refusing a module larger than
	// limit bytes with a SizeError before it reads it (see ReadModule).
	Read func(limit int64) ([]byte, error)
}

// Request is what one instance gets.
type Request struct {
	// Args are the program's arguments, its name first.
	Args []string
	// Env is its whole environment, "NAME=value" each.
	Env []string
	// Stdin is the request body.
	Stdin []byte
	// Stderr receives what it writes to standard error.
	Stderr io.Writer
	// FS is its file system, read-only, mounted at /; nil gives none.
	FS fs.FS
	// Data, when not "", is a host folder mounted read-write at DataDir (a worker's database
	// folder), confined to it (see dataFS); DataRoom is the bytes writes there may still
	// take, taken as they are written (shared by the instances of a worker running at once),
	// nil for no bound; DataFull, when set, is told of each write refused past it.
	Data     string
	DataRoom *atomic.Int64
	DataFull func()
	// Database, when set, is the worker's database the instance reaches through
	// DatabaseModule; without it the module's calls answer that there is none.
	Database Database
	// Memory caps its linear memory in bytes (0: DefaultMemory); MaxOutput caps its
	// standard output (0: DefaultMaxOutput).
	Memory, MaxOutput int64
	// Timeout is the longest the instance may run (0: as long as the context lets it),
	// from its start: compiling the module first does not count. A request waits for room
	// to run (Concurrency, the memory budget) as long at most.
	Timeout time.Duration
	// Group names the worker: at most Concurrency (0: DefaultConcurrency) instances of one
	// group run at once (wasm_concurrency).
	Group       string
	Concurrency int
}

// Errors of Run besides the context's.
var (
	// ErrOutput stops a module whose output passes MaxOutput.
	ErrOutput = errors.New("output past its limit")
)

// MemoryError is a request stopped by its memory limit: the module asked for more.
type MemoryError struct{ Limit int64 }

func (e *MemoryError) Error() string {
	return fmt.Sprintf("the module needs more memory than its limit of %d bytes", e.Limit)
}

// ExitError is a module that exited with a status other than 0, or trapped (Code -1).
type ExitError struct {
	Code int
	Err  error // the trap
}

func (e *ExitError) Error() string {
	if e.Code < 0 {
		return fmt.Sprintf("the module failed: %v", e.Err)
	}
	return "the module exited with status " + strconv.Itoa(e.Code)
}

// CompileError is a module that cannot be run at all.
type CompileError struct{ Err error }

func (e *CompileError) Error() string { return "the module " + e.Err.Error() }

func (e *CompileError) Unwrap() error { return e.Err }

// Run runs mod in a fresh instance for one request: the request's environment, arguments,
// standard input, a read-only file system and, when the request has one, its worker's
// database (DatabaseModule), nothing else (no network), under its memory limit, until its timeout or ctx ends it (the instance is then
// closed, whatever it runs, and Run returns context.DeadlineExceeded or ctx's error). Before
// it starts, the instance takes a place among its group's (Request.Concurrency) and reserves
// its largest memory against the engine's memory budget, waiting up to Timeout for them; a
// BusyError says why it could not. It returns the instance's standard output, after the
// instance has ended.
func (e *Engine) Run(ctx context.Context, mod Module, req Request) ([]byte, error) {
	en, err := e.acquire(ctx, mod)
	if err != nil {
		return nil, err
	}
	defer e.release(en)
	limit := req.Memory
	if limit <= 0 {
		limit = DefaultMemory
	}
	if uint64(en.memory.minPages)<<16 > uint64(limit) {
		return nil, &MemoryError{Limit: limit}
	}
	sl, err := e.take(ctx, req, en.memory.reserve(limit))
	if err != nil {
		return nil, err
	}
	defer sl.release()
	if req.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, req.Timeout)
		defer stop()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var refused atomic.Bool
	var peak atomic.Uint64
	ctx = experimental.WithMemoryAllocator(ctx, allocator(uint64(limit), &refused, &peak))
	ctx = context.WithValue(ctx, databaseKey{}, &databaseCall{db: req.Database})
	out := &capped{limit: req.MaxOutput, stop: cancel}
	if out.limit <= 0 {
		out.limit = DefaultMaxOutput
	}
	stderr := req.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	cfg := wazero.NewModuleConfig().WithName("").WithArgs(req.Args...).
		WithStdin(bytes.NewReader(req.Stdin)).WithStdout(out).WithStderr(stderr).
		WithSysWalltime().WithSysNanotime().WithNanosleep(sleeper(ctx)).WithRandSource(rand.Reader)
	if req.FS != nil || req.Data != "" {
		mounts := wazero.NewFSConfig()
		if req.FS != nil {
			mounts = mounts.WithFSMount(req.FS, "/")
		}
		if req.Data != "" {
			mounts = mounts.(sysfs.FSConfig).WithSysFSMount(newDataFS(req.Data, req.DataRoom, req.DataFull), DataDir)
		}
		cfg = cfg.WithFSConfig(mounts)
	}
	for _, kv := range req.Env {
		if k, v, ok := bytes.Cut([]byte(kv), []byte("=")); ok {
			cfg = cfg.WithEnv(string(k), string(v))
		}
	}
	inst, err := e.runtime.InstantiateModule(ctx, en.module, cfg)
	if inst != nil {
		inst.Close(context.Background())
	}
	if peak.Load() >= giveBackAt {
		e.freed.giveBack()
	}
	var exit *sys.ExitError
	switch {
	case out.over:
		return nil, ErrOutput
	case err == nil:
		return out.buf.Bytes(), nil
	case refused.Load():
		return nil, &MemoryError{Limit: limit}
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case errors.As(err, &exit):
		return nil, &ExitError{Code: int(exit.ExitCode())}
	}
	return nil, &ExitError{Code: -1, Err: err}
}

// take waits, up to the request's timeout, for room to run an instance reserving memory
// bytes.
func (e *Engine) take(ctx context.Context, req Request, memory int64) (*slot, error) {
	if req.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, req.Timeout, errWaited)
		defer stop()
	}
	return e.slots.take(ctx, req.Group, req.Concurrency, memory)
}

// sleeper is the instance's sleep: it ends early when ctx does, so a module asleep past its
// time limit is stopped there too (wazero closes an instance on a done context only between
// the module's own instructions, not inside a host call).
func sleeper(ctx context.Context) sys.Nanosleep {
	return func(ns int64) {
		t := time.NewTimer(time.Duration(ns))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// capped is standard output up to a limit; past it the instance is stopped.
type capped struct {
	buf   bytes.Buffer
	limit int64
	over  bool
	stop  context.CancelCauseFunc
}

func (c *capped) Write(b []byte) (int, error) {
	if c.over || int64(c.buf.Len()+len(b)) > c.limit {
		c.over = true
		c.stop(ErrOutput)
		return 0, ErrOutput
	}
	return c.buf.Write(b)
}

// acquire returns the compiled entry of mod, compiling it once however many requests ask
// at the same time; release gives it back.
func (e *Engine) acquire(ctx context.Context, mod Module) (*entry, error) {
	for {
		e.mu.Lock()
		if en := e.entries[mod.Key]; en != nil && en.serial == mod.Serial {
			en.refs++
			e.lru.MoveToFront(en.elem)
			e.mu.Unlock()
			return en, nil
		}
		e.mu.Unlock()
		// The compilation is not the asking request's: it goes on when that one gives up.
		ch := e.flight.DoChan(mod.Key+"\x00"+strconv.FormatUint(mod.Serial, 10), func() (any, error) { return e.compile(mod) })
		select {
		case res := <-ch:
			if res.Err != nil {
				return nil, res.Err
			}
			en := res.Val.(*entry)
			e.mu.Lock()
			if !en.closed {
				en.refs++
				e.mu.Unlock()
				return en, nil
			}
			e.mu.Unlock() // dropped for a newer one or the budget before this request ran it
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

func (e *Engine) release(en *entry) {
	e.mu.Lock()
	en.refs--
	closing := en.refs == 0 && en.dropped && !en.closed
	if closing {
		en.closed = true
	}
	e.mu.Unlock()
	if closing {
		e.close(en)
	}
}

// close closes compiled modules no request runs any more; the memory of a large one goes
// back to the system at once.
func (e *Engine) close(entries ...*entry) {
	large := false
	for _, en := range entries {
		en.module.Close(context.Background())
		large = large || en.cost >= giveBackAt
	}
	if large {
		e.freed.giveBack()
	}
}

// compile reads, checks and compiles mod, and keeps it, dropping the least recently used
// entries past the budget.
func (e *Engine) compile(mod Module) (*entry, error) {
	binary, err := mod.Read(e.maxModule.Load())
	var tooLarge *SizeError
	switch {
	case errors.As(err, &tooLarge):
		return nil, &CompileError{Err: tooLarge}
	case err != nil:
		return nil, &CompileError{Err: fmt.Errorf("cannot be read: %w", err)}
	}
	if limit := e.maxModule.Load(); int64(len(binary)) > limit {
		return nil, &CompileError{Err: &SizeError{Size: int64(len(binary)), Limit: limit}}
	}
	m, err := inspect(binary)
	if err == nil {
		err = m.check(true) // the upload refused the database's imports without database: true
	}
	if err != nil {
		return nil, &CompileError{Err: err}
	}
	lane := &e.compiling[0]
	if largeModule(len(binary), int(m.functions)) {
		lane = &e.compiling[1]
	}
	lane.Lock()
	before := e.cacheFiles()
	compiled, err := e.runtime.CompileModule(context.Background(), binary)
	cached := e.opts.CacheDir != "" && err == nil && e.cacheFiles() == before
	lane.Unlock()
	if err != nil {
		return nil, &CompileError{Err: fmt.Errorf("does not compile: %w", err)}
	}
	if cached {
		e.cached.Add(1)
	} else {
		e.compiled.Add(1)
	}
	if e.opts.Observe != nil {
		e.opts.Observe(cached)
	}
	m.imports, m.exports = nil, nil
	en := &entry{key: mod.Key, serial: mod.Serial, module: compiled, memory: m,
		cost: entryOverhead + codeFactor*int64(len(binary)) + functionCost*int64(m.functions)}
	var closing []*entry
	e.mu.Lock()
	if old := e.entries[mod.Key]; old != nil {
		closing = append(closing, e.dropLocked(old)...)
	}
	en.elem = e.lru.PushFront(en)
	e.entries[mod.Key] = en
	e.used += en.cost
	for budget := e.budget.Load(); e.used > budget && e.lru.Len() > 1; {
		closing = append(closing, e.dropLocked(e.lru.Back().Value.(*entry))...)
	}
	e.mu.Unlock()
	e.close(closing...)
	return en, nil
}

// largeModule tells a module whose compilation may take seconds (a Go program of some size,
// or one made of many functions to stall the compiler: up to MaxFunctions and
// wasm_max_module_size, about 12 s on one core) from the usual ones, which take milliseconds
// to a second: the large ones compile one at a time beside the others.
func largeModule(size, functions int) bool { return size > 16<<20 || functions > 50_000 }

// dropLocked takes en out of the map and the budget; it returns en to close when no request
// runs it.
func (e *Engine) dropLocked(en *entry) []*entry {
	delete(e.entries, en.key)
	e.lru.Remove(en.elem)
	e.used -= en.cost
	en.dropped = true
	if en.refs > 0 {
		return nil
	}
	en.closed = true
	return []*entry{en}
}

// Forget drops the compiled modules whose keys start with prefix (their version went away or
// changed); requests running one finish first.
func (e *Engine) Forget(prefix string) {
	e.mu.Lock()
	var closing []*entry
	for key, en := range e.entries {
		if strings.HasPrefix(key, prefix) {
			closing = append(closing, e.dropLocked(en)...)
		}
	}
	e.mu.Unlock()
	e.close(closing...)
}

// cacheFiles counts the files of the disk cache, which wazero keeps in a folder per version
// of itself and platform.
func (e *Engine) cacheFiles() int {
	if e.opts.CacheDir == "" {
		return 0
	}
	n := 0
	dirs, _ := os.ReadDir(e.opts.CacheDir)
	for _, d := range dirs {
		if d.IsDir() {
			files, _ := os.ReadDir(filepath.Join(e.opts.CacheDir, d.Name()))
			n += len(files)
		}
	}
	return n
}
