package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

func TestLimitsCap(t *testing.T) {
	caps := Limits{Memory: 512, Processes: 64, CPU: 1, Scratch: 256}
	tests := []struct{ asked, want Limits }{
		{Limits{}, caps},
		{Limits{Memory: 100, Processes: 8, CPU: 0.5, Scratch: 16}, Limits{Memory: 100, Processes: 8, CPU: 0.5, Scratch: 16}},
		{Limits{Memory: 1000, Processes: 1000, CPU: 4, Scratch: 1000}, caps},
	}
	for _, tt := range tests {
		if got := tt.asked.Cap(caps); got != tt.want {
			t.Errorf("%+v.Cap(%+v) = %+v, want %+v", tt.asked, caps, got, tt.want)
		}
	}
}

func fillFile(t *testing.T, path string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestScratchUsage: what a scratch folder's entries count, by the tricks a worker could use
// to hide what it keeps there.
func TestScratchUsage(t *testing.T) {
	const kib, mib = 1 << 10, 1 << 20
	outside := filepath.Join(t.TempDir(), "big")
	fillFile(t, outside, 4*mib)
	tests := []struct {
		name     string
		make     func(t *testing.T, dir string)
		limit    int64
		min, max int64
	}{
		{"empty", func(*testing.T, string) {}, mib, 0, 0},
		{"a file", func(t *testing.T, dir string) { fillFile(t, filepath.Join(dir, "f"), 100*kib) }, mib, 100 * kib, 100*kib + 2*minCharge},
		{"empty files count a block each", func(t *testing.T, dir string) {
			for i := range 100 {
				fillFile(t, filepath.Join(dir, fmt.Sprint(i)), 0)
			}
		}, mib, 100 * minCharge, 100 * minCharge},
		{"nested folders", func(t *testing.T, dir string) { fillFile(t, filepath.Join(dir, "a", "b", "c", "f"), 64*kib) }, mib, 64*kib + 3*minCharge, 64*kib + 6*minCharge},
		{"hard links count the data once", func(t *testing.T, dir string) {
			fillFile(t, filepath.Join(dir, "f"), mib)
			for i := range 9 {
				if err := os.Link(filepath.Join(dir, "f"), filepath.Join(dir, fmt.Sprint("link", i))); err != nil {
					t.Skip("no hard links here:", err)
				}
			}
		}, 4 * mib, mib + 9*minCharge, mib + 9*minCharge + 2*minCharge},
		{"a symlink counts itself, not its target", func(t *testing.T, dir string) {
			if err := os.Symlink(outside, filepath.Join(dir, "l")); err != nil {
				t.Skip("no symlinks here:", err)
			}
		}, mib, minCharge, minCharge},
		{"counting stops past the limit", func(t *testing.T, dir string) {
			for i := range 2000 {
				fillFile(t, filepath.Join(dir, fmt.Sprint(i)), 0)
			}
		}, 10 * minCharge, 10*minCharge + 1, 10*minCharge + 256*minCharge},
	}
	if runtime.GOOS != "windows" {
		tests = append(tests, struct {
			name     string
			make     func(t *testing.T, dir string)
			limit    int64
			min, max int64
		}{"a sparse file counts its blocks, not its length", func(t *testing.T, dir string) {
			f, err := os.Create(filepath.Join(dir, "sparse"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(make([]byte, 4*kib), 1<<30); err != nil {
				t.Fatal(err)
			}
		}, 16 * mib, minCharge, mib})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.make(t, dir)
			got, err := scratchUsage(dir, tt.limit)
			if err != nil || got < tt.min || got > tt.max {
				t.Fatalf("scratchUsage = %d, %v; want %d to %d", got, err, tt.min, tt.max)
			}
		})
	}
}

func TestScratchUsageRefusesDeepTrees(t *testing.T) {
	dir := t.TempDir()
	deep := dir
	for range maxScratchDepth + 2 {
		deep = filepath.Join(deep, "d")
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Skip("cannot make a tree this deep here:", err)
	}
	if _, err := scratchUsage(dir, 1<<30); err == nil || !strings.Contains(err.Error(), "deeper") {
		t.Fatalf("scratchUsage of a tree %d levels deep: %v, want an error", maxScratchDepth+2, err)
	}
}

// TestWatchScratch: the watcher tells once why a folder passed its limit, and stops.
func TestWatchScratch(t *testing.T) {
	dir := t.TempDir()
	reasons := make(chan error, 4)
	stop := watchScratch(dir, "scratch folder", 64<<10, func(reason error) { reasons <- reason })
	defer stop()
	fillFile(t, filepath.Join(dir, "f"), 1<<20)
	var reason error
	testkit.Eventually(t, "the watcher to see the folder past its limit", 10*time.Second, func() bool {
		select {
		case reason = <-reasons:
			return true
		default:
			return false
		}
	})
	if !strings.Contains(reason.Error(), "64 KiB") {
		t.Errorf("reason %q does not name the limit", reason)
	}
	stop()
	if len(reasons) != 0 {
		t.Errorf("the watcher told more than once: %v", <-reasons)
	}
}
