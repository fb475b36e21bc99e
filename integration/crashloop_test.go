package integration

import (
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// TestCrashLoopBacksOff: a worker that passed its check and then crashes each time it serves
// is not restarted in a tight loop: each restart waits at least twice as long as the one before,
// the pool status shows the version crash-looping, the metrics count it, one line is logged
// when it begins and one when a new upload ends it.
func TestCrashLoopBacksOff(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	archive := testWorkerArchive(t, "app", "1.0.0", "")
	uploadOK(t, s, "workers", "app.tgz", archive, rootKey)

	looping := func() *poolProcess {
		for _, p := range pool(t, s, rootKey) {
			if p.Worker == "app" && p.State == "crash-looping" {
				return &p
			}
		}
		return nil
	}
	// Each request that finds the process up crashes it; the others find it waiting.
	var state *poolProcess
	harness.Eventually(t, "app to be crash-looping", 60*time.Second, func() bool {
		s.Get("/app/crash")
		state = looping()
		return state != nil
	})
	if state.Version != "1.0.0" || state.Crashes < 3 || state.RetryAt == "" || state.PID != 0 {
		t.Errorf("crash-looping entry %+v", *state)
	}
	m := scrape(t, s)
	if m[`runtime_worker_processes{state="crash-looping"}`] != 1 || m[`runtime_worker_crash_loops_total{worker="app"}`] != 1 {
		t.Errorf("metrics: crash-looping %v, crash loops %v; want 1 and 1",
			m[`runtime_worker_processes{state="crash-looping"}`], m[`runtime_worker_crash_loops_total{worker="app"}`])
	}
	// Two more crashes: the waits keep growing, and the state change is logged once.
	harness.Eventually(t, "two more crashes", 60*time.Second, func() bool {
		s.Get("/app/crash")
		time.Sleep(100 * time.Millisecond)
		return len(s.LogEntries("worker crashed; it restarts on a later request")) >= 5
	})
	crashes := s.LogEntries("worker crashed; it restarts on a later request")
	for i := 1; i < len(crashes); i++ {
		gap := time.Duration((crashes[i]["ts"].(float64) - crashes[i-1]["ts"].(float64)) * float64(time.Second))
		if least := time.Duration(1<<(i-1)) * time.Second; gap < least-100*time.Millisecond {
			t.Errorf("crash %d came %s after the one before; the back-off is %s", i+1, gap, least)
		}
	}
	if n := s.LogCount("worker is crash-looping: its process keeps crashing soon after it starts; each restart waits twice as long as the one before, up to 30s", 1); n != 1 {
		t.Errorf("%d crash-looping lines, want 1", n)
	}

	// A new upload of the version checks it afresh: it starts at once and serves.
	uploadOK(t, s, "workers", "app.tgz", archive, rootKey)
	if state := looping(); state != nil {
		t.Errorf("after a new upload: %+v", *state)
	}
	if m := scrape(t, s); m[`runtime_worker_processes{state="crash-looping"}`] != 0 {
		t.Errorf("after a new upload the metrics say %v crash-looping", m[`runtime_worker_processes{state="crash-looping"}`])
	}
	if n := s.LogCount("worker is no longer crash-looping: it was installed or enabled again", 1); n != 1 {
		t.Errorf("%d lines of the end of the loop, want 1", n)
	}
	echoOf(t, s.Get("/app/"))
}
