package workers

import (
	"errors"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestPoolCrashLoop: a version whose process crashes CrashLoopAfter times in a row becomes
// crash-looping: the pool status and counts show it while it waits, with one log line, and
// the waits grow; resetting its crashes ends it, with one line again.
func TestPoolCrashLoop(t *testing.T) {
	p, logs := newPool(t, 4)
	dir := t.TempDir()
	m := manifest(t, nil)
	// Each request starts the process, which crashes at once, or finds it waiting to restart.
	var waits []time.Duration
	var st []ProcStatus
	testkit.Eventually(t, "the version to be crash-looping", 60*time.Second, func() bool {
		_, err := get(t, p, "app", dir, m, "/crash")
		if ue := (*UnavailableError)(nil); errors.As(err, &ue) && ue.RetryAfter > 0 {
			waits = append(waits, ue.RetryAfter)
			time.Sleep(ue.RetryAfter)
		}
		st = p.Status()
		return len(st) == 1 && st[0].State == CrashLooping
	})
	if st[0].Name != "app" || st[0].Version != "1.0.0" || st[0].Crashes < CrashLoopAfter || !st[0].RetryAt.After(time.Now().Add(-time.Second)) {
		t.Errorf("status %+v", st[0])
	}
	if got := p.Counts()[CrashLooping]; got != 1 {
		t.Errorf("counts: %d crash-looping, want 1", got)
	}
	for i := 1; i < len(waits); i++ {
		if waits[i] <= waits[i-1] {
			t.Errorf("waits %v do not grow", waits)
		}
	}
	if n := logs.FilterMessageSnippet("worker is crash-looping").Len(); n != 1 {
		t.Errorf("%d crash-looping lines, want 1", n)
	}
	p.ResetCrashes("app", "1.0.0", dir)
	if n := logs.FilterMessageSnippet("no longer crash-looping").Len(); n != 1 || len(p.Status()) != 0 || p.Counts()[CrashLooping] != 0 {
		t.Errorf("after the reset: %d lines, status %+v", n, p.Status())
	}
	if _, err := get(t, p, "app", dir, m, "/"); err != nil {
		t.Errorf("after the reset the version starts at once: %v", err)
	}
}

// TestPoolCrashLoopRecovers: a crash-looping version whose process then stays up for
// stableAfter is no longer crash-looping, with one line saying so.
func TestPoolCrashLoopRecovers(t *testing.T) {
	was := stableAfter
	stableAfter = 2 * time.Second
	t.Cleanup(func() { stableAfter = was })
	p, logs := newPool(t, 4)
	dir := t.TempDir()
	m := manifest(t, nil)
	testkit.Eventually(t, "the version to be crash-looping", 60*time.Second, func() bool {
		_, err := get(t, p, "app", dir, m, "/crash")
		if ue := (*UnavailableError)(nil); errors.As(err, &ue) && ue.RetryAfter > 0 {
			time.Sleep(ue.RetryAfter)
		}
		return p.Counts()[CrashLooping] == 1
	})
	// Requests that do not crash it: the next one starts it after the back-off, and it stays.
	testkit.Eventually(t, "the version to recover", 60*time.Second, func() bool {
		if _, err := get(t, p, "app", dir, m, "/"); err != nil {
			time.Sleep(100 * time.Millisecond)
		}
		return logs.FilterMessageSnippet("worker is no longer crash-looping: its process has run for a while").Len() == 1
	})
	if st := p.Status(); len(st) != 1 || st[0].State != Running || p.Counts()[CrashLooping] != 0 {
		t.Errorf("after recovering: %+v", st)
	}
	if n := logs.FilterMessageSnippet("worker is crash-looping").Len(); n != 1 {
		t.Errorf("%d crash-looping lines, want 1", n)
	}
}
