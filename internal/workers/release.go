package workers

import (
	"runtime/debug"
	"time"
)

// releaseAfter is how long the pool runs no process before the runtime hands the memory it
// freed back to the operating system.
const releaseAfter = time.Second

// releaseMemory returns the runtime's freed memory to the operating system (a var for tests).
var releaseMemory = debug.FreeOSMemory

// armReleaseLocked runs releaseMemory once no process has run for releaseAfter, the last
// having just exited: a runtime whose workers all stopped at their ttl (scaled to zero) goes
// back to its own footprint at once, rather than keeping what serving them grew its heap by
// until the Go scavenger returns it, minutes later if at all. A start meanwhile puts it off
// to the next time the pool is empty; the cost is one collection of the runtime's heap (a few
// milliseconds), at most once a releaseAfter. Called with p.mu held.
func (p *Pool) armReleaseLocked() {
	if len(p.live) > 0 || p.closed || p.releaser != nil {
		return
	}
	starts := p.starts
	p.releaser = time.AfterFunc(releaseAfter, func() {
		p.mu.Lock()
		p.releaser = nil
		idle := len(p.live) == 0 && !p.closed
		if idle && p.starts != starts {
			// Processes ran meanwhile and have exited: a full releaseAfter from now.
			p.armReleaseLocked()
			idle = false
		}
		p.mu.Unlock()
		if idle {
			releaseMemory()
		}
	})
}
