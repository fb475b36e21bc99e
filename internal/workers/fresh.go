package workers

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Defaults of the gate of fresh processes (ttl: 0), as the older implementation had them.
const (
	DefaultFreshConcurrency = 2
	DefaultFreshQueue       = 100
)

// freshGate bounds the fresh processes (ttl: 0) running at once, over all workers, and the
// requests waiting for one: each such request costs a process start.
type freshGate struct {
	slots    chan struct{} // one per running process, released when it has exited
	queued   atomic.Int64
	maxQueue int64
}

func newFreshGate(concurrency, queue int) *freshGate {
	if concurrency <= 0 {
		concurrency = DefaultFreshConcurrency
	}
	if queue <= 0 {
		queue = DefaultFreshQueue
	}
	return &freshGate{slots: make(chan struct{}, concurrency), maxQueue: int64(queue)}
}

// GateFullError refuses a request to a worker with ttl: 0 while the gate of fresh processes
// runs as many as it may and its queue is full.
type GateFullError struct {
	Running, MaxRunning, Queued, MaxQueue int
}

func (e *GateFullError) Error() string {
	return fmt.Sprintf("fresh processes (ttl: 0) are at their limits: %d running of worker_fresh_concurrency %d, "+
		"%d queued of worker_fresh_queue %d; retry later, or give the worker a ttl so that one process serves many requests",
		e.Running, e.MaxRunning, e.Queued, e.MaxQueue)
}

// RetryAfter is how long a refused client might wait.
func (e *GateFullError) RetryAfter() time.Duration { return time.Second }

// enter takes a slot, waiting in the queue when none is free; it fails when the queue is full,
// ctx ends or quit closes.
func (g *freshGate) enter(ctx context.Context, quit <-chan struct{}) error {
	select {
	case g.slots <- struct{}{}:
		return nil
	default:
	}
	if n := g.queued.Add(1); n > g.maxQueue {
		g.queued.Add(-1)
		return &GateFullError{Running: len(g.slots), MaxRunning: cap(g.slots), Queued: int(n - 1), MaxQueue: int(g.maxQueue)}
	}
	defer g.queued.Add(-1)
	select {
	case g.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-quit:
		return ErrPoolClosed
	}
}

// leave frees a slot.
func (g *freshGate) leave() { <-g.slots }

// acquireFresh starts a process of the version for this one request, within the gate: it
// is in no table, retiring from the start, so it stops once the request is done, and its
// slot is free once it has exited.
func (p *Pool) acquireFresh(ctx context.Context, name, version, dir string, m Manifest) (*Lease, error) {
	if err := p.fresh.enter(ctx, p.quit); err != nil {
		return nil, err
	}
	p.mu.Lock()
	if err := p.refuseLocked(name, version, dir); err != nil {
		p.mu.Unlock()
		p.fresh.leave()
		return nil, err
	}
	pr := p.newProc(name, version, dir, m)
	pr.retiring.Store(true)
	pr.inflight.Store(1)
	pr.lastUsed.Store(time.Now().UnixNano())
	p.live[pr] = struct{}{}
	p.stopped.Add(1)
	p.mu.Unlock()
	go func() {
		<-pr.exited
		p.fresh.leave()
	}()
	go pr.start()
	return p.await(ctx, pr)
}
