package wasm

import (
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// cappedMemory backs one instance's linear memory and refuses to grow it past limit bytes:
// the module's memory.grow fails, as it would on a machine out of memory (Go's runtime then
// stops with "out of memory"), and the request is answered as over its limit. The instance
// is fresh for each request, so the cap is the request's.
type cappedMemory struct {
	limit   uint64
	buf     []byte
	refused *atomic.Bool   // set once a growth past the limit was refused
	peak    *atomic.Uint64 // the largest capacity given, in bytes
}

// allocator gives each memory of an instance its own cappedMemory under limit; peak records
// the largest memory given.
func allocator(limit uint64, refused *atomic.Bool, peak *atomic.Uint64) experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(_, max uint64) experimental.LinearMemory {
		return &cappedMemory{limit: min(limit, max), refused: refused, peak: peak}
	})
}

// Reallocate grows the memory to size bytes, keeping its contents; past the limit it returns
// nil, which wazero reports to the module as a failed memory.grow. Capacity doubles up to the
// limit, so a module growing page by page copies its memory a logarithmic number of times.
func (m *cappedMemory) Reallocate(size uint64) []byte {
	if size > m.limit {
		if m.buf == nil {
			// The initial memory, which wazero needs: the engine refuses a module whose
			// initial memory is over the limit before it instantiates it.
			m.buf = make([]byte, size)
			m.peak.Store(max(m.peak.Load(), size))
			return m.buf
		}
		m.refused.Store(true)
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	capacity := min(max(size, 2*uint64(cap(m.buf))), m.limit)
	buf := make([]byte, size, capacity)
	copy(buf, m.buf)
	m.buf = buf
	m.peak.Store(max(m.peak.Load(), capacity))
	return buf
}

// Free drops the memory for the garbage collector.
func (m *cappedMemory) Free() { m.buf = nil }
