package workers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// tmpdir returns the TMPDIR of a worker's environment.
func tmpdir(t *testing.T, e echo) string {
	t.Helper()
	for _, kv := range e.Env {
		if v, ok := strings.CutPrefix(kv, "TMPDIR="); ok {
			return v
		}
	}
	t.Fatalf("no TMPDIR in %v", e.Env)
	return ""
}

func gone(path string) bool {
	_, err := os.Lstat(path)
	return os.IsNotExist(err)
}

// TestPoolScratchFolders: each process has a scratch folder of its own, so a restarted
// process never shares the draining one's, and a stopped process's folder is removed.
func TestPoolScratchFolders(t *testing.T) {
	p, _ := newPool(t, 4)
	dir := t.TempDir()
	m := manifest(t, nil)
	first, err := get(t, p, "@team/app", dir, m, "/")
	if err != nil {
		t.Fatal(err)
	}
	old := tmpdir(t, first)
	if filepath.Dir(old) != p.opts.ScratchDir {
		t.Fatalf("scratch folder %s: want one folder below %s", old, p.opts.ScratchDir)
	}
	p.Restart("@team/app", "")
	second, err := get(t, p, "@team/app", dir, m, "/")
	if err != nil {
		t.Fatal(err)
	}
	if tmpdir(t, second) == old {
		t.Fatalf("the restarted process shares the scratch folder %s", old)
	}
	testkit.Eventually(t, "the old process's scratch folder to go", 10*time.Second, func() bool { return gone(old) })
	if gone(tmpdir(t, second)) {
		t.Fatal("the running process's scratch folder went with the old one")
	}
	p.StopUnit("@team/app", "")
	testkit.Eventually(t, "the stopped version's scratch folder to go", 10*time.Second, func() bool { return gone(tmpdir(t, second)) })
}

// TestPoolScratchOverLimit: a process whose scratch folder passed its limit is stopped as
// asked, not as a crash: the next request starts a new one at once.
func TestPoolScratchOverLimit(t *testing.T) {
	p, logs := newPool(t, 4)
	dir := t.TempDir()
	m := manifest(t, nil)
	first, err := get(t, p, "app", dir, m, "/")
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	pr := p.procs[dir]
	p.mu.Unlock()
	// What the sandbox's watcher does.
	pr.overScratch(errors.New("its scratch folder holds more than its limit of 1.0 MiB"))
	pr.cmd.Kill()
	testkit.Eventually(t, "the process to stop", 10*time.Second, func() bool { return !testkit.Alive(first.PID) })
	second, err := get(t, p, "app", dir, m, "/")
	if err != nil || second.PID == first.PID {
		t.Fatalf("after the stop: pid %d, %v; want a new process at once", second.PID, err)
	}
	warned := logs.FilterMessage("worker passed its scratch limit; stopping it").All()
	if len(warned) != 1 || !strings.Contains(fmt.Sprint(warned[0].ContextMap()), "worker_scratch") {
		t.Fatalf("warnings %v, want one naming the setting", warned)
	}
	if n := len(logs.FilterMessageSnippet("crashed").All()); n != 0 {
		t.Errorf("the stop was logged as a crash")
	}
}

// TestSweepScratch: a new pool removes the scratch folders of runtimes that are gone, and
// nothing else.
func TestSweepScratch(t *testing.T) {
	base := t.TempDir()
	mine := fmt.Sprintf("app@1.0.0~%d-7", os.Getpid())
	dead := "app@1.0.0~999999999-1" // above any pid the kernel hands out
	keep := []string{mine, "app@1.0.0", "notes~x-1", "operator-file"}
	for _, name := range append([]string{dead}, keep...) {
		if err := os.Mkdir(filepath.Join(base, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sweepScratch(base, zap.NewNop())
	if !gone(filepath.Join(base, dead)) {
		t.Errorf("%s, left by a runtime that is gone, is still there", dead)
	}
	for _, name := range keep {
		if gone(filepath.Join(base, name)) {
			t.Errorf("%s was removed", name)
		}
	}
}
