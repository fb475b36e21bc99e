package integration

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// fillResult is what the test worker's /fill reports.
type fillResult struct {
	Written int    `json:"written"` // MiB
	Error   string `json:"error"`
}

// fillScratch asks the worker at base to write mb MiB into its TMPDIR. ok is false when the
// request failed, e.g. because the worker was stopped while writing.
func fillScratch(t *testing.T, s *harness.Server, base string, mb int) (fillResult, bool) {
	t.Helper()
	var r fillResult
	resp, err := s.Send("GET", base+"/fill?"+url.Values{"mb": {fmt.Sprint(mb)}}.Encode())
	if err != nil || resp.Status != 200 || resp.JSON(&r) != nil {
		return r, false
	}
	return r, true
}

// bytesIn returns the bytes the files below dir hold, 0 when dir is gone.
func bytesIn(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// TestSandboxBoundsScratch: a worker filling its TMPDIR stops at worker_scratch (or at the
// smaller limits.scratch it asks for), the disk under scratch_dir keeps its space, the
// runtime, the key store and the other workers go on, and a deleted worker's scratch folder
// goes with it.
func TestSandboxBoundsScratch(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "worker_scratch 16MiB"})
	entry, err := s.WaitLog("process worker sandbox", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	layers := fmt.Sprint(entry["layers"])
	tmpfs := strings.Contains(layers, "scratch limit by tmpfs")
	if !tmpfs && !strings.Contains(layers, "scratch limit by a watcher") {
		t.Fatalf("the start-up log does not say how scratch space is limited: %s", layers)
	}
	if os.Geteuid() == 0 && !tmpfs {
		t.Errorf("the runtime runs as root but does not limit scratch space with a tmpfs: %s\n%s", layers, s.Logs())
	}
	processWorker(t, s, "filler", "1.0.0", "limits:\n  scratch: 1GiB\n") // capped to 16MiB
	processWorker(t, s, "modest", "1.0.0", "limits:\n  scratch: 4MiB\n")
	processWorker(t, s, "bystander", "1.0.0", "")
	tmp := scratchOf(t, s, "/filler/")

	tests := []struct {
		base      string
		limit, mb int
	}{
		{"/filler", 16, 64},
		{"/modest", 4, 16},
	}
	for _, tt := range tests {
		got, ok := fillScratch(t, s, tt.base, tt.mb)
		switch {
		case ok && (got.Written > tt.limit || got.Error == "<nil>"):
			t.Errorf("%s wrote %d MiB into its scratch folder (error %s), want at most its limit of %d MiB", tt.base, got.Written, got.Error, tt.limit)
		case ok:
			t.Logf("%s: wrote %d MiB, then %s", tt.base, got.Written, got.Error)
		case tmpfs:
			t.Errorf("%s: the write should fail on a full tmpfs, not stop the worker", tt.base)
		default:
			if len(s.LogEntries("worker passed its scratch limit; stopping it")) == 0 {
				t.Errorf("%s was stopped with no warning saying why:\n%s", tt.base, s.Logs())
			}
		}
	}
	// The runtime's view of the folder: nothing (a tmpfs of the worker's own), or nothing
	// once the watcher has stopped the worker.
	harness.Eventually(t, "the disk to hold nothing of the filler's scratch", 10*time.Second, func() bool { return bytesIn(tmp) == 0 })

	if resp := s.Get("/bystander/"); resp.Status != 200 {
		t.Errorf("another worker after the attack: %s", resp)
	}
	if resp := s.Get(s.API + "/health"); resp.Status != 200 {
		t.Errorf("health after the attack: %s", resp)
	}
	s.CreateKey(rootKey, map[string]any{"name": "after-the-attack"}) // the key store still writes

	// The filler, run again, has its space back; deleted, its folder goes.
	if got, ok := fillScratch(t, s, "/filler", 1); !ok || got.Written != 1 {
		t.Errorf("the filler cannot write 1 MiB after the attack: %+v", got)
	}
	tmp = scratchOf(t, s, "/filler/")
	if resp := s.Do("DELETE", s.API+"/workers/_/filler", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("delete: %s", resp)
	}
	harness.Eventually(t, "the deleted worker's scratch folder to go", 15*time.Second, func() bool {
		_, err := os.Lstat(tmp)
		return os.IsNotExist(err)
	})
}

// TestSandboxScratchCountsAsMemory: the pages of a worker's tmpfs scratch folder count
// against its memory limit, so a scratch limit above worker_memory does not add to it.
func TestSandboxScratchCountsAsMemory(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "worker_scratch 256MiB\nworker_memory 64MiB"})
	entry, _ := s.WaitLog("process worker sandbox", 5*time.Second)
	layers := fmt.Sprint(entry["layers"])
	if !strings.Contains(layers, "scratch limit by tmpfs") || !strings.Contains(layers, "memory") {
		t.Skip("no tmpfs scratch folders or no memory cgroup here: ", layers)
	}
	processWorker(t, s, "hoarder", "1.0.0", "")
	processWorker(t, s, "bystander", "1.0.0", "")
	got, ok := fillScratch(t, s, "/hoarder", 128)
	if ok && got.Written >= 64 {
		t.Fatalf("the worker kept %d MiB in its tmpfs scratch folder with worker_memory 64MiB (then %s)", got.Written, got.Error)
	}
	t.Logf("hoarder: %+v, answered %v", got, ok)
	if resp := s.Get("/bystander/"); resp.Status != 200 {
		t.Errorf("another worker after the attack: %s", resp)
	}
}
