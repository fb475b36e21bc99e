// Package events is a small in-process event bus: the runtime's shared state owns one per
// kind of event (a unit changed, plugins are to reload), parts of the runtime subscribe, and
// whoever makes the change publishes it.
package events

import (
	"slices"
	"sync"
)

// Bus delivers events of type E to its subscribers, in the publishing goroutine and in the
// order they subscribed. The zero Bus is ready to use.
type Bus[E any] struct {
	mu   sync.Mutex
	subs []*subscriber[E]
}

type subscriber[E any] struct{ fn func(E) }

// Subscribe makes fn hear every event published from now on; the returned function ends the
// subscription.
func (b *Bus[E]) Subscribe(fn func(E)) (unsubscribe func()) {
	s := &subscriber[E]{fn: fn}
	b.mu.Lock()
	b.subs = append(b.subs, s)
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.subs = slices.DeleteFunc(b.subs, func(x *subscriber[E]) bool { return x == s })
	}
}

// Publish hands e to every subscriber and returns once they have handled it. A subscriber may
// subscribe or unsubscribe meanwhile: it takes effect from the next event.
func (b *Bus[E]) Publish(e E) {
	b.mu.Lock()
	subs := slices.Clone(b.subs)
	b.mu.Unlock()
	for _, s := range subs {
		s.fn(e)
	}
}
