package caddymodule

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// ownGoroutines returns the stacks of the live goroutines running code of the runtime's
// module that contain every one of also, leaving out the test's own goroutine.
func ownGoroutines(also ...string) []string {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	var out []string
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if !strings.Contains(g, "github.com/caddy-runtime/runtime/") || strings.Contains(g, "testing.tRunner") {
			continue
		}
		keep := true
		for _, a := range also {
			keep = keep && strings.Contains(g, a)
		}
		if keep {
			out = append(out, g)
		}
	}
	return out
}

// settledGoroutines waits, a bounded while, until at most want of ownGoroutines are left
// (want < 0: until their number holds still), and returns those left.
func settledGoroutines(want int) []string {
	left := ownGoroutines()
	for i, same := 0, 0; i < 100 && (want >= 0 && len(left) > want || want < 0 && same < 3); i++ {
		time.Sleep(50 * time.Millisecond)
		now := ownGoroutines()
		if len(now) == len(left) {
			same++
		} else {
			same = 0
		}
		left = now
	}
	return left
}

// TestStateLeavesNoGoroutine starts and releases states again and again, bare and as the
// runtime app of real configs (a start, a reload onto another state, a stop), and finds none
// of their goroutines left: every background part stops with the state. Run it with -race.
func TestStateLeavesNoGoroutine(t *testing.T) {
	cycle := func(t *testing.T) {
		// A bare state, started and released; and one released without a start.
		for range 2 {
			dir := t.TempDir()
			settings := config.Settings{StateDir: filepath.Join(dir, "state"), ScratchDir: filepath.Join(dir, "scratch"),
				WorkerDirs: []string{filepath.Join(dir, "apps")}, PluginDirs: []string{filepath.Join(dir, "plugins")},
				WorkerLogLines: 10, PoolSize: 2}
			s := newState(settings, nil, caddy.Log())
			if err := s.start(); err != nil {
				t.Fatal(err)
			}
			// Touch what the loops serve, so they have run at least once.
			if err := s.traffic.apply(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := s.domains.refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			_ = s.secrets.changed("w", 1)
			if err := s.Destruct(); err != nil {
				t.Fatal(err)
			}
			if err := newState(settings, nil, caddy.Log()).Destruct(); err != nil {
				t.Fatal(err)
			}
		}
		// The app: a config, a reload with another state, a stop.
		port, root := testkit.FreePort(t), t.TempDir()
		a := dirsIn(root)
		if err := caddy.Load(siteConfig(t, port, a, map[string]any{}), true); err != nil {
			t.Fatal(err)
		}
		if code, body := get(t, port, "site0.test", "/api/health/ready"); code != 200 {
			t.Fatalf("ready = %d %s", code, body)
		}
		if err := caddy.Load(siteConfig(t, port, with(a, "state_dir", filepath.Join(root, "state2")), map[string]any{}), true); err != nil {
			t.Fatal(err)
		}
		if err := caddy.Stop(); err != nil {
			t.Fatal(err)
		}
		if held := heldStates(); len(held) != 0 {
			t.Fatalf("stop left states held: %v", held)
		}
	}
	// A first round, for what starts once a process (Caddy's and the metrics' own).
	cycle(t)
	before := len(settledGoroutines(-1))
	for range 2 {
		cycle(t)
	}
	if left := settledGoroutines(before); len(left) > before {
		t.Fatalf("%d goroutines of the runtime before, %d after releasing the states:\n\n%s",
			before, len(left), strings.Join(left, "\n\n"))
	}
}
