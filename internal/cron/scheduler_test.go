package cron

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// fixture is a scheduler over one process worker, app, whose manifest has cron, on a local
// key store, and the requests its ticks sent.
type fixture struct {
	s     *Scheduler
	store *keystore.Store
	mu    sync.Mutex
	sent  []Request
	hold  chan struct{} // when set, each request waits for it
}

func newFixture(t *testing.T, cron string, clustered bool) *fixture {
	t.Helper()
	dir := t.TempDir()
	version := filepath.Join(dir, "apps", "app", "1.0.0")
	if err := os.MkdirAll(version, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := "name: app\nversion: 1.0.0\ncommand: [/bin/true]\ncron:\n" + cron
	if err := os.WriteFile(filepath.Join(version, "manifest.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := keystore.Open(context.Background(), filepath.Join(dir, "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	catalog := packages.NewCatalog(packages.WorkerLayout, []string{filepath.Join(dir, "apps")}, packages.Limits{})
	t.Cleanup(func() { catalog.Close(); store.Close() })
	f := &fixture{store: store}
	dispatch := func(ctx context.Context, req Request) (int, error) {
		f.mu.Lock()
		f.sent = append(f.sent, req)
		hold := f.hold
		f.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		return 204, nil
	}
	f.s = New(Options{Workers: catalog, Keys: func() *keystore.Store { return store }, Instance: func() string { return "here" },
		Clustered: clustered, Dispatch: func() Dispatch { return dispatch }})
	return f
}

// tick fires the ticks due at at and waits for their runs to end, unless they are held.
func (f *fixture) tick(at time.Time, wait bool) {
	f.s.refresh(at)
	f.s.fireDue(context.Background(), at)
	if wait {
		f.s.running.Wait()
	}
}

func (f *fixture) runs(t *testing.T) []keystore.CronRun {
	t.Helper()
	runs, err := f.store.Cron.Runs(context.Background(), "app")
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

func TestSchedulerTicks(t *testing.T) {
	f := newFixture(t, "  - { name: every, schedule: \"@every 10s\", path: /tick }\n", false)
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	f.tick(t0, true) // the first tick is the first after now: none yet
	if len(f.sent) != 0 {
		t.Fatalf("ticks sent at once: %+v", f.sent)
	}
	f.tick(t0.Add(10*time.Second), true)
	if len(f.sent) != 1 || f.sent[0].Trigger != "every" || f.sent[0].Method != "POST" || f.sent[0].Path != "/tick" || f.sent[0].Worker != "app" {
		t.Fatalf("sent %+v", f.sent)
	}
	// The runtime was away for a minute: one tick, not the six missed.
	f.tick(t0.Add(80*time.Second), true)
	f.tick(t0.Add(81*time.Second), true) // the next tick is at 90 s, not a missed one
	runs := f.runs(t)
	if len(f.sent) != 2 || len(runs) != 2 || runs[0].Status != keystore.CronOK || runs[0].HTTPStatus != 204 ||
		runs[0].ScheduledAt != t0.Add(20*time.Second).UnixMilli() || runs[0].RequestID != f.sent[1].RequestID {
		t.Fatalf("after a minute away: sent %d, runs %+v", len(f.sent), runs)
	}
}

func TestSchedulerSkipsOverlongRun(t *testing.T) {
	f := newFixture(t, "  - { schedule: \"@every 1s\", path: /slow }\n", false)
	f.hold = make(chan struct{})
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	f.tick(t0, true)
	f.tick(t0.Add(time.Second), false) // runs until hold closes
	deadline := time.Now().Add(10 * time.Second)
	for len(f.runs(t)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the first run's row
	}
	f.tick(t0.Add(2*time.Second), false)
	close(f.hold)
	f.s.running.Wait()
	runs := f.runs(t)
	if len(f.sent) != 1 || len(runs) != 2 || runs[0].Status != keystore.CronSkipped || runs[1].Status != keystore.CronOK {
		t.Fatalf("sent %d requests, runs %+v; want one request and the next tick skipped", len(f.sent), runs)
	}
}

func TestSchedulerPausedAndLease(t *testing.T) {
	for _, c := range []struct {
		name      string
		clustered bool // without the lease: nothing runs
		paused    bool
		want      int
	}{
		{"local", false, false, 1},
		{"paused", false, true, 0},
		{"cluster without the lease", true, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, "  - { schedule: \"@every 1s\", path: /x }\n", c.clustered)
			if c.paused {
				f.store.Cron.SetPaused(context.Background(), "app", true, keystore.Principal{})
				f.s.readPauses(context.Background(), f.store)
			}
			t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
			f.tick(t0, true)
			f.tick(t0.Add(time.Second), true)
			if len(f.sent) != c.want {
				t.Fatalf("sent %d requests, want %d", len(f.sent), c.want)
			}
		})
	}
}

func TestSchedulerStartStop(t *testing.T) {
	f := newFixture(t, "  - { schedule: \"@every 1s\", path: /x }\n", true)
	if err := f.s.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !f.s.Holds() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !f.s.Holds() {
		t.Fatal("the only instance did not take the lease")
	}
	if err := f.s.Stop(); err != nil {
		t.Fatal(err)
	}
	if holder, _, err := f.store.Cron.Holder(context.Background()); holder != "" || err != nil {
		t.Fatalf("after Stop the lease is %q's (%v); want it given up", holder, err)
	}
}

// TestSchedulerLosesTheStore: an instance whose lease cannot be renewed (its store, the
// primary in a cluster, fails) runs no tick from then on.
func TestSchedulerLosesTheStore(t *testing.T) {
	f := newFixture(t, "  - { schedule: \"@every 1s\", path: /x }\n", true)
	ctx := context.Background()
	f.s.renew(ctx)
	if !f.s.Holds() {
		t.Fatal("the only instance did not take the lease")
	}
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	f.tick(t0, true)
	f.tick(t0.Add(time.Second), true)
	f.store.Close()
	f.s.renew(ctx)
	if f.s.Holds() {
		t.Fatal("the lease is held though it could not be renewed")
	}
	f.tick(t0.Add(2*time.Second), true)
	if len(f.sent) != 1 {
		t.Fatalf("sent %d requests; want the one before the store failed", len(f.sent))
	}
}
