// Package lifecycle starts the parts of a long-lived whole (the runtime's state: its key
// store, process pool, background loops) in one written order and stops them in the reverse
// order, so each part stops before the parts it uses, and the order is kept in one place.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Subsystem is a part with something to start and stop, such as a background loop. Stop
// waits until what Start began has ended.
type Subsystem interface {
	Start() error
	Stop() error
}

// Part is one entry of a List. Start may be nil: the part was built running and only needs
// stopping, even when the List never starts. Stop may be nil: the part holds nothing to
// release.
type Part struct {
	Name  string
	Start func() error
	Stop  func() error
}

// Of makes the Part named name of sub.
func Of(name string, sub Subsystem) Part { return Part{Name: name, Start: sub.Start, Stop: sub.Stop} }

// ErrStopped is Start's error once the List has stopped.
var ErrStopped = errors.New("stopped")

// List starts its parts in their order and stops the started ones in the reverse order.
type List struct {
	mu      sync.Mutex
	parts   []Part
	running []bool
	stopped bool
}

// New returns the List of parts, in the order they start.
func New(parts ...Part) *List {
	l := &List{parts: parts, running: make([]bool, len(parts))}
	for i, p := range parts {
		l.running[i] = p.Start == nil
	}
	return l
}

// Start starts the parts not running yet, in order, up to the first that fails, and returns
// that part's error; the parts started before it run until Stop.
func (l *List) Start() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return ErrStopped
	}
	for i, p := range l.parts {
		if l.running[i] {
			continue
		}
		if err := p.Start(); err != nil {
			return err
		}
		l.running[i] = true
	}
	return nil
}

// Stop stops the running parts in the reverse order of the list, each once, and returns
// their errors; the List cannot start again.
func (l *List) Stop() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	var errs []error
	for i := len(l.parts) - 1; i >= 0; i-- {
		p := l.parts[i]
		if !l.running[i] {
			continue
		}
		l.running[i] = false
		if p.Stop == nil {
			continue
		}
		if err := p.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Loop is a background goroutine that runs until stopped: the one stop and done pair of a
// subsystem's loop. The zero Loop is ready to use.
type Loop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Go runs run in a goroutine of its own until Stop cancels its context. A Loop runs one
// goroutine at a time: Go stops the one before.
func (l *Loop) Go(run func(ctx context.Context)) {
	l.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	l.mu.Lock()
	l.cancel, l.done = cancel, done
	l.mu.Unlock()
	go func() {
		defer close(done)
		run(ctx)
	}()
}

// Stop cancels the running goroutine's context and waits until it has returned; without one,
// it returns at once. Its error is always nil, so a Loop's Stop is a Subsystem's.
func (l *Loop) Stop() error {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel, l.done = nil, nil
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}
