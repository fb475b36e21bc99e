package keystore

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

func TestCronLease(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return now }
	for _, step := range []struct {
		instance string
		advance  time.Duration
		want     bool
	}{
		{"a", 0, true},                // free: a takes it
		{"b", time.Second, false},     // a's lease runs for 3 s
		{"a", time.Second, true},      // a renews it
		{"b", 2 * time.Second, false}, // renewed: still a's
		{"b", 2 * time.Second, true},  // a did not renew: b takes it
		{"a", 0, false},               // and a cannot take it back
	} {
		now = now.Add(step.advance)
		if got, err := s.Cron.Acquire(ctx, step.instance, 3*time.Second); err != nil || got != step.want {
			t.Fatalf("%s at %v: held %v, %v; want %v", step.instance, now, got, err, step.want)
		}
	}
	if err := s.Cron.Release(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if holder, _, _ := s.Cron.Holder(ctx); holder != "b" {
		t.Fatalf("a released b's lease: holder %q", holder)
	}
	s.Cron.Release(ctx, "b")
	if got, _ := s.Cron.Acquire(ctx, "a", 3*time.Second); !got {
		t.Fatal("a released lease was not taken at once")
	}
}

func TestCronRuns(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := CronRun{Worker: "w", Trigger: "0", ScheduledAt: 1000, StartedAt: 1001, Instance: "a", Status: CronRunning}
	if ok, err := s.Cron.Claim(ctx, &run); !ok || err != nil || run.ID == 0 {
		t.Fatalf("claim = %v, %v (id %d)", ok, err, run.ID)
	}
	again := run
	again.Instance = "b"
	if ok, err := s.Cron.Claim(ctx, &again); ok || err != nil {
		t.Fatalf("the same tick claimed twice: %v, %v", ok, err)
	}
	run.Status, run.HTTPStatus, run.DurationMS = CronOK, 204, 12
	if err := s.Cron.Finish(ctx, run); err != nil {
		t.Fatal(err)
	}
	for i := range MaxCronRuns + 5 {
		r := CronRun{Worker: "w", Trigger: "0", ScheduledAt: int64(2000 + i), Status: CronSkipped}
		if _, err := s.Cron.Claim(ctx, &r); err != nil {
			t.Fatal(err)
		}
	}
	other := CronRun{Worker: "other", Trigger: "0", ScheduledAt: 1000, Status: CronOK}
	s.Cron.Claim(ctx, &other)
	runs, err := s.Cron.Runs(ctx, "w")
	if err != nil || len(runs) != MaxCronRuns || runs[0].ScheduledAt != 2000+MaxCronRuns+4 {
		t.Fatalf("kept %d runs (newest %+v), %v; want %d, newest first", len(runs), runs[0], err, MaxCronRuns)
	}
	if runs, _ := s.Cron.Runs(ctx, "other"); len(runs) != 1 {
		t.Fatalf("other worker's runs = %v", runs)
	}
	if err := s.Cron.SetPaused(ctx, "@team/w", true, Principal{KeyPrefix: "rtk_abc"}); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Cron.Paused(ctx); p["@team/w"].PausedByPrefix != "rtk_abc" || len(p) != 1 {
		t.Fatalf("paused = %v", p)
	}
	s.Cron.SetPaused(ctx, "@team/w", false, Principal{})
	if p, _ := s.Cron.Paused(ctx); len(p) != 0 {
		t.Fatalf("resumed, still paused = %v", p)
	}
	s.Cron.SetPaused(ctx, "w", true, Principal{})
	if err := s.Cron.Forget(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if runs, _ := s.Cron.Runs(ctx, "w"); len(runs) != 0 {
		t.Fatalf("forgotten, %d runs are left", len(runs))
	}
	if p, _ := s.Cron.Paused(ctx); len(p) != 0 {
		t.Fatalf("forgotten, still paused = %v", p)
	}
	if runs, _ := s.Cron.Runs(ctx, "other"); len(runs) != 1 {
		t.Fatalf("forgetting w forgot other's runs: %v", runs)
	}
}
