package workers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestFreshGate: concurrency requests enter at once, queue more wait, the next is refused with
// the gate's state; a waiter whose context ends leaves the queue, and a slot freed lets the
// next waiter in.
func TestFreshGate(t *testing.T) {
	g := newFreshGate(2, 1)
	quit := make(chan struct{})
	ctx := context.Background()
	for range 2 {
		if err := g.enter(ctx, quit); err != nil {
			t.Fatal(err)
		}
	}
	entered := make(chan error, 1)
	go func() { entered <- g.enter(ctx, quit) }()
	testkit.Eventually(t, "a request queued", 5*time.Second, func() bool { return g.queued.Load() == 1 })
	var full *GateFullError
	if err := g.enter(ctx, quit); !errors.As(err, &full) || *full != (GateFullError{Running: 2, MaxRunning: 2, Queued: 1, MaxQueue: 1}) {
		t.Fatalf("past the queue: %v, want the gate's state", err)
	}
	g.leave()
	if err := <-entered; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := g.enter(short, quit); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a waiter whose context ended: %v", err)
	}
	if n := g.queued.Load(); n != 0 {
		t.Errorf("%d left in the queue", n)
	}
	close(quit)
	if err := g.enter(ctx, quit); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("a waiter when the pool closes: %v", err)
	}
}

// TestPoolFreshProcesses: a manifest with ttl: 0 gets a process of its own for each request,
// in no table of the pool, each stopped once its request is done.
func TestPoolFreshProcesses(t *testing.T) {
	p, logs := newPool(t, 4)
	dir := t.TempDir()
	m := manifest(t, nil)
	m.TTL = TTL{Fresh: true}
	l, err := p.Acquire(context.Background(), "app", "1.0.0", dir, m)
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Status(); len(st) != 1 || st[0].State != Running {
		t.Errorf("a fresh process serving its request: %+v, want it running", st)
	}
	l.Release()
	seen := map[int]bool{}
	for range 3 {
		e, err := get(t, p, "app", dir, m, "/")
		if err != nil {
			t.Fatal(err)
		}
		seen[e.PID] = true
		if n := p.Running(); n != 0 {
			t.Errorf("%d processes in the pool's table", n)
		}
	}
	if len(seen) != 3 {
		t.Errorf("3 requests had the processes %v", seen)
	}
	testkit.Eventually(t, "the fresh processes stopped", 10*time.Second, func() bool {
		return logs.FilterMessage("worker stopped").Len() == 4
	})
}
