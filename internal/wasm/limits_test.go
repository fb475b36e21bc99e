package wasm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestInstanceLimits: at most Concurrency instances of a group run at once and the running
// instances reserve their memory against the budget; past either a request waits up to its
// timeout and then gets a BusyError naming the setting, or its context's own error when the
// client went; an instance reserving more than the whole budget is refused at once; a request
// waiting gets the room an ending instance gives back.
func TestInstanceLimits(t *testing.T) {
	t.Parallel()
	const memory = 16 << 20
	e := newEngine(t, Options{MemoryBudget: 3 * memory})
	mod := moduleOf("go", readTestModule(t))
	if _, err := e.Run(context.Background(), mod, Request{Memory: memory}); err != nil {
		t.Fatal(err) // compiled first
	}
	// hold runs an instance of group that sleeps ms, under its timeout.
	hold := func(ctx context.Context, group string, ms string, timeout time.Duration) error {
		_, err := e.Run(ctx, mod, Request{Env: []string{"PATH_INFO=/global", "QUERY_STRING=wait=" + ms}, Memory: memory,
			Group: group, Concurrency: 2, Timeout: timeout})
		return err
	}
	busy := func(t *testing.T, err error, setting string) {
		t.Helper()
		var b *BusyError
		if !errors.As(err, &b) || !strings.Contains(b.Error(), setting) {
			t.Fatalf("a request past the limit = %v, want a BusyError naming %s", err, setting)
		}
	}
	// holding starts n instances of group that sleep until release is closed (at most 20 s),
	// and waits until they all run.
	holding := func(t *testing.T, group string, n int) (release func()) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() { _ = hold(ctx, group, "20000", 0) })
		}
		testkit.Eventually(t, "the instances to run", 10*time.Second, func() bool {
			e.slots.mu.Lock()
			defer e.slots.mu.Unlock()
			g := e.slots.groups[group]
			return g != nil && g.users == n && g.waiting == 0
		})
		return func() { cancel(); wg.Wait() }
	}

	t.Run("concurrency", func(t *testing.T) {
		release := holding(t, "a", 2)
		busy(t, hold(context.Background(), "a", "0", 200*time.Millisecond), "wasm_concurrency")
		// Another group is not held back by this one's.
		if err := hold(context.Background(), "b", "0", 5*time.Second); err != nil {
			t.Errorf("another group: %v", err)
		}
		// A client that goes while its request waits gets its own error.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := hold(ctx, "a", "0", 0); !errors.Is(err, context.DeadlineExceeded) || errors.As(err, new(*BusyError)) {
			t.Errorf("a request whose context ends while it waits = %v, want the context's error", err)
		}
		done := make(chan error, 1)
		go func() { done <- hold(context.Background(), "a", "0", 20*time.Second) }()
		release()
		if err := <-done; err != nil {
			t.Errorf("a request waiting while an instance ends = %v, want it to run", err)
		}
	})
	t.Run("memory budget", func(t *testing.T) {
		release := holding(t, "c", 2)
		defer release()
		releaseD := holding(t, "d", 1)
		defer releaseD()
		busy(t, hold(context.Background(), "e", "0", 200*time.Millisecond), "wasm_memory_budget")
	})
	t.Run("more than the budget", func(t *testing.T) {
		_, err := e.Run(context.Background(), mod, Request{Memory: 4 * memory, Group: "f", Timeout: 20 * time.Second})
		busy(t, err, "wasm_memory_budget")
	})
	t.Run("the waiting line", func(t *testing.T) {
		release := holding(t, "g", 2)
		defer release()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range maxWaitingFactor * 2 {
			wg.Go(func() { _ = hold(ctx, "g", "0", 0) })
		}
		testkit.Eventually(t, "the requests to wait", 10*time.Second, func() bool {
			e.slots.mu.Lock()
			defer e.slots.mu.Unlock()
			return e.slots.groups["g"].waiting == maxWaitingFactor*2
		})
		busy(t, hold(context.Background(), "g", "0", 20*time.Second), "wasm_concurrency")
		cancel()
		wg.Wait()
	})
	// Everything given back: the groups are gone and the whole budget is free again.
	e.slots.mu.Lock()
	groups := len(e.slots.groups)
	e.slots.mu.Unlock()
	if groups != 0 || !e.slots.budget.TryAcquire(3*memory) {
		t.Errorf("after the requests: %d groups kept, or the budget is not whole", groups)
	}
}

// TestModuleLimits: a module over the size limit is not compiled, whether it is read by the
// engine or by ReadModule for an upload, and Check refuses a module of more than
// MaxFunctions functions.
func TestModuleLimits(t *testing.T) {
	t.Parallel()
	big := testkit.ManyFunctionsWasm(300_000) // 1.2 MB
	if err := Check(big, false); err != nil {
		t.Fatalf("a module of 300000 functions: %v", err)
	}
	e := newEngine(t, Options{MaxModuleSize: 1 << 20})
	_, err := e.Run(context.Background(), moduleOf("big", big), Request{})
	var size *SizeError
	var compile *CompileError
	if !errors.As(err, &compile) || !errors.As(err, &size) || !strings.Contains(err.Error(), "wasm_max_module_size") {
		t.Fatalf("running a module over the size limit = %v, want a CompileError naming wasm_max_module_size", err)
	}
	if n := e.Stats().Compiled; n != 0 {
		t.Errorf("%d modules compiled", n)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.wasm"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadModule(os.DirFS(dir), "./app.wasm", 1<<20); !errors.As(err, &size) || size.Size != int64(len(big)) {
		t.Errorf("ReadModule over the limit = %v, want a SizeError", err)
	}
	if b, err := ReadModule(os.DirFS(dir), "app.wasm", 2<<20); err != nil || len(b) != len(big) {
		t.Errorf("ReadModule within the limit = %d bytes, %v", len(b), err)
	}

	if err := Check(testkit.ManyFunctionsWasm(MaxFunctions+1), false); err == nil || !strings.Contains(err.Error(), "functions") {
		t.Errorf("a module of %d functions = %v, want it refused", MaxFunctions+1, err)
	}
}

// TestLargeCompileHoldsBackNoOther compiles a module of many functions, which takes seconds,
// and checks that a small module's first request is answered meanwhile: the large one
// compiles in a lane of its own.
func TestLargeCompileHoldsBackNoOther(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Options{})
	big := moduleOf("big", testkit.ManyFunctionsWasm(300_000))
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(context.Background(), big, Request{})
		done <- err
	}()
	compilingBig := func() bool {
		if e.compiling[1].TryLock() {
			e.compiling[1].Unlock()
			return false
		}
		return true
	}
	for deadline := time.Now().Add(30 * time.Second); !compilingBig(); time.Sleep(time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("the large module ran (%v) before it was seen compiling in its own lane", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the large module never compiled in the large modules' lane")
		}
	}
	tiny := moduleOf("tiny", testkit.TinyWasm("Content-Type: text/plain\n\nhi", WASI, "fd_write"))
	if _, err := e.Run(context.Background(), tiny, Request{}); err != nil {
		t.Fatalf("the small module: %v", err)
	}
	if !compilingBig() {
		t.Error("the small module's request was answered only after the large module compiled")
	}
	<-done
}
