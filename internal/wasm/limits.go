package wasm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Defaults of the limits on modules and instances.
const (
	// DefaultMaxModuleSize is the largest module compiled, and accepted at upload.
	DefaultMaxModuleSize = 64 << 20
	// DefaultConcurrency is how many instances of one worker run at once.
	DefaultConcurrency = 8
	// DefaultMemoryBudget is the memory all running instances may reserve together.
	DefaultMemoryBudget = 1 << 30
)

// giveBackAt is the memory of an instance, or the estimated memory of a compiled module, from
// which its end gives the freed memory back to the system at once: Go's collector would
// otherwise keep it until the heap grows again, which an idle runtime never does.
const giveBackAt = 16 << 20

// SizeError is a module larger than the limit on modules (wasm_max_module_size).
type SizeError struct{ Size, Limit int64 }

func (e *SizeError) Error() string {
	return fmt.Sprintf("is %d bytes, larger than the %d bytes wasm_max_module_size allows: build it smaller (strip debug information: -ldflags=-s -w)", e.Size, e.Limit)
}

// ReadModule reads the module file name of fsys, refusing one larger than limit bytes before
// it reads it (0: DefaultMaxModuleSize).
func ReadModule(fsys fs.FS, name string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxModuleSize
	}
	f, err := fsys.Open(path.Clean(name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > limit {
		return nil, &SizeError{Size: info.Size(), Limit: limit}
	}
	// The file may grow after Stat: what is read is bounded too.
	binary, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(binary)) > limit {
		return nil, &SizeError{Size: int64(len(binary)), Limit: limit}
	}
	return binary, nil
}

// BusyError is a request that found no room to run: its worker runs wasm_concurrency
// instances already, or the running instances hold the memory budget, and none ended within
// its wait.
type BusyError struct{ Reason string }

func (e *BusyError) Error() string { return e.Reason }

// slots bound the running instances: per group (a worker) by count, and all together by the
// memory they reserve.
type slots struct {
	mu     sync.Mutex
	budget *semaphore.Weighted // replaced when the budget changes; a slot gives back to its own
	size   int64
	groups map[string]*group
}

// group is one worker's running and waiting instances.
type group struct {
	sem     *semaphore.Weighted
	size    int64
	users   int // running or waiting: the group is dropped at 0
	waiting int
}

// maxWaitingFactor bounds the requests waiting for a worker's instances to
// maxWaitingFactor × wasm_concurrency; past it a request is refused at once rather than
// queued, since each waiting request holds its body.
const maxWaitingFactor = 4

func (s *slots) setBudget(n int64) {
	if n <= 0 {
		n = DefaultMemoryBudget
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.budget == nil || n != s.size {
		s.budget, s.size = semaphore.NewWeighted(n), n
	}
}

// slot is a running instance's room: its group's place and its memory's reservation.
type slot struct {
	s      *slots
	name   string
	g      *group
	budget *semaphore.Weighted
	memory int64
}

// errWaited ends the wait of a request for room to run, at its timeout.
var errWaited = errors.New("waited for room to run as long as the timeout")

// take waits until an instance of group name (at most concurrency at once) may reserve
// memory bytes, or ctx ends: then it returns a BusyError saying why if ctx ended with
// errWaited as its cause, ctx's cause otherwise.
func (s *slots) take(ctx context.Context, name string, concurrency int, memory int64) (*slot, error) {
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
	}
	s.mu.Lock()
	budget, size := s.budget, s.size
	if memory > size {
		s.mu.Unlock()
		return nil, &BusyError{Reason: fmt.Sprintf("an instance of it reserves %d bytes of memory (limits.memory, wasm_memory, or the module's declared maximum), more than the whole wasm_memory_budget of %d bytes: lower limits.memory or raise wasm_memory_budget", memory, size)}
	}
	g := s.groups[name]
	if g == nil || g.size != int64(concurrency) {
		// A new wasm_concurrency applies at once; the instances of the old group end in it.
		g = &group{sem: semaphore.NewWeighted(int64(concurrency)), size: int64(concurrency)}
		s.groups[name] = g
	}
	if g.waiting >= maxWaitingFactor*concurrency {
		s.mu.Unlock()
		return nil, &BusyError{Reason: fmt.Sprintf("it runs %d instances at once already, the limit wasm_concurrency sets, and %d more requests wait for them: try again shortly", concurrency, g.waiting)}
	}
	g.users++
	g.waiting++
	s.mu.Unlock()
	sl := &slot{s: s, name: name, g: g, budget: budget, memory: memory}
	err := g.sem.Acquire(ctx, 1)
	if err == nil {
		if err = budget.Acquire(ctx, memory); err != nil {
			g.sem.Release(1)
			err = &BusyError{Reason: fmt.Sprintf("the WebAssembly instances running hold the memory wasm_memory_budget allows (%d bytes; this one reserves %d) and none ended within its wait: try again shortly", size, memory)}
		}
	} else {
		err = &BusyError{Reason: fmt.Sprintf("it runs %d instances at once already, the limit wasm_concurrency sets, and none ended within its wait: try again shortly", concurrency)}
	}
	s.mu.Lock()
	g.waiting--
	s.mu.Unlock()
	if err != nil {
		sl.leave()
		if cause := context.Cause(ctx); !errors.Is(cause, errWaited) {
			return nil, cause // the client went, or its own deadline passed
		}
		return nil, err
	}
	return sl, nil
}

// release gives the slot back.
func (sl *slot) release() {
	sl.budget.Release(sl.memory)
	sl.g.sem.Release(1)
	sl.leave()
}

func (sl *slot) leave() {
	sl.s.mu.Lock()
	defer sl.s.mu.Unlock()
	if sl.g.users--; sl.g.users == 0 && sl.s.groups[sl.name] == sl.g {
		delete(sl.s.groups, sl.name)
	}
}

// giveBackEvery spaces the passes that give memory back: each is a whole collection, which a
// steady stream of large instances would otherwise run after every request.
const giveBackEvery = time.Second

// giver gives freed memory back to the system: at most one pass every giveBackEvery, and one
// after the last request for it, so the memory of the last large instance goes back too.
type giver struct {
	mu      sync.Mutex
	last    time.Time
	pending bool // a pass is due or running
}

func (g *giver) giveBack() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending {
		return // the pass due comes after this request
	}
	g.pending = true
	time.AfterFunc(time.Until(g.last.Add(giveBackEvery)), func() {
		g.mu.Lock()
		// A request from now on asks for another pass: this one may have run past its memory.
		g.pending = false
		g.last = time.Now()
		g.mu.Unlock()
		debug.FreeOSMemory()
	})
}
