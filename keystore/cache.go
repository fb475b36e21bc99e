package keystore

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
)

// verifyCache remembers verified credentials by hash, so a request does not read the
// database. Each entry carries the store generation read before its rows were read; it serves
// only while that generation is current (see Store.gen).
type verifyCache[V any] struct {
	mu      sync.RWMutex
	entries map[[sha256.Size]byte]cached[V]
}

type cached[V any] struct {
	val  V
	gen  uint64
	memo *Memo
}

// Memo keeps an answer derived from one cached verification (the caller's own description,
// encoded), so that it is built once per verification rather than once per request. A new
// read of the credential's rows comes with a new, empty Memo. Its methods accept nil.
type Memo struct{ body atomic.Pointer[[]byte] }

// Load returns the stored answer, or nil.
func (m *Memo) Load() []byte {
	if m == nil {
		return nil
	}
	if b := m.body.Load(); b != nil {
		return *b
	}
	return nil
}

// Store keeps body, which must not be changed afterwards.
func (m *Memo) Store(body []byte) {
	if m != nil {
		m.body.Store(&body)
	}
}

// maxCached bounds a cache; past it, the cache starts over.
const maxCached = 10000

// get returns the entry for sum, and its memo, if it was read at generation gen.
func (c *verifyCache[V]) get(sum [sha256.Size]byte, gen uint64) (V, *Memo, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[sum]
	if !ok || e.gen != gen {
		var zero V
		return zero, nil, false
	}
	return e.val, e.memo, true
}

// put remembers val for sum, as read at generation gen, and returns its new memo.
func (c *verifyCache[V]) put(sum [sha256.Size]byte, val V, gen uint64) *Memo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= maxCached {
		c.entries = map[[sha256.Size]byte]cached[V]{}
	}
	m := &Memo{}
	c.entries[sum] = cached[V]{val: val, gen: gen, memo: m}
	return m
}

// invalidate ends every cached verification; a write that ends a credential calls it after
// its commit and before it reports success.
func (s *Store) invalidate() { s.gen.Add(1) }
