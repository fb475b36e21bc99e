package keystore

import (
	"crypto/sha256"
	"sync"
)

// verifyCache remembers verified credentials by hash, so a request does not read the
// database. Each entry carries the store generation read before its rows were read; it serves
// only while that generation is current (see Store.gen).
type verifyCache[V any] struct {
	mu      sync.RWMutex
	entries map[[sha256.Size]byte]cached[V]
}

type cached[V any] struct {
	val V
	gen uint64
}

// maxCached bounds a cache; past it, the cache starts over.
const maxCached = 10000

// get returns the entry for sum if it was read at generation gen.
func (c *verifyCache[V]) get(sum [sha256.Size]byte, gen uint64) (V, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[sum]
	if !ok || e.gen != gen {
		var zero V
		return zero, false
	}
	return e.val, true
}

// put remembers val for sum, as read at generation gen.
func (c *verifyCache[V]) put(sum [sha256.Size]byte, val V, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= maxCached {
		c.entries = map[[sha256.Size]byte]cached[V]{}
	}
	c.entries[sum] = cached[V]{val: val, gen: gen}
}

// invalidate ends every cached verification; a write that ends a credential calls it after
// its commit and before it reports success.
func (s *Store) invalidate() { s.gen.Add(1) }
