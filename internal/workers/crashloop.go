package workers

import (
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/troubleshooting"
)

// CrashLooping is the state the pool status gives a version whose process crashed
// CrashLoopAfter times in a row, each within stableAfter of its start, and that waits to be
// started again.
const CrashLooping ProcState = "crash-looping"

// CrashLoopAfter is how many crashes in a row make a version crash-looping.
const CrashLoopAfter = 3

// stableAfter is how long a process must run for its version's crashes to be forgotten (a
// variable for the tests).
var stableAfter = 30 * time.Second

// CrashLoopEvents, when the pool's Events implement it too, hears a version begin to
// crash-loop (once per episode), e.g. to count it. It is called with the pool's lock held.
type CrashLoopEvents interface {
	CrashLooping(worker string)
}

// crashLoopLocked notes a crash of pr's version that makes it crash-looping, once per episode:
// one log line, and the event.
func (p *Pool) crashLoopLocked(pr *proc, b *backoff) {
	if b.looping || b.count < CrashLoopAfter {
		return
	}
	b.looping, b.name, b.version = true, pr.name, pr.version
	if ev, ok := p.opts.Events.(CrashLoopEvents); ok {
		ev.CrashLooping(pr.name)
	}
	pr.logger.Warn("worker is crash-looping: its process keeps crashing soon after it starts; each restart waits twice as long as the one before, up to 30s",
		zap.Int("crashes", b.count), zap.Duration("next_start_after", time.Until(b.until).Round(time.Millisecond)),
		troubleshooting.CrashLooping.Field())
}

// recoverLocked forgets the crashes of the versions whose process has now run for
// stableAfter, and logs the end of each crash loop.
func (p *Pool) recoverLocked(now time.Time) {
	for key, b := range p.crashes {
		pr := p.procs[key]
		if pr == nil || pr.started.IsZero() || now.Sub(pr.started) < stableAfter {
			continue
		}
		delete(p.crashes, key)
		if b.looping {
			pr.logger.Info("worker is no longer crash-looping: its process has run for a while", zap.Int("crashes", b.count),
				zap.Duration("ran", now.Sub(pr.started).Round(time.Second)))
		}
	}
}

// ResetCrashes forgets the crashes of the version in folder dir, so that its next start is at
// once: a new check of the version (an upload or an enable) starts it afresh.
func (p *Pool) ResetCrashes(name, version, dir string) {
	p.mu.Lock()
	b := p.crashes[dir]
	delete(p.crashes, dir)
	p.mu.Unlock()
	if b != nil && b.looping {
		p.opts.Logger.Info("worker is no longer crash-looping: it was installed or enabled again",
			zap.String("worker", name), zap.String("version", version), zap.Int("crashes", b.count))
	}
}

// crashLoopingLocked lists the crash-looping versions that have no process now, as Status
// gives them.
func (p *Pool) crashLoopingLocked() []ProcStatus {
	var out []ProcStatus
	for key, b := range p.crashes {
		if b.looping && p.procs[key] == nil {
			out = append(out, ProcStatus{Name: b.name, Version: b.version, State: CrashLooping, Restarts: p.restarts[key],
				Crashes: b.count, RetryAt: b.until, RSS: -1})
		}
	}
	return out
}
