package databases

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWasm readies a WebAssembly worker's folder: created, with the room left below its
// limit, shared by the instances running at once; refused past it, the reason kept for the API
// until the folder is within again; a write refused at the limit is told too; and in primary
// mode no folder is given.
func TestWasm(t *testing.T) {
	m := New(t.TempDir(), nil)
	dir, left, done, err := m.Wasm("@team/app", 1<<20)
	if err != nil || dir != m.Folder("@team/app") || left == nil || left.Load() <= 0 || left.Load() > 1<<20 {
		t.Fatalf("Wasm = %q %v %v, want its folder and up to 1 MiB of room", dir, left, err)
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() || info.Mode().Perm() != 0o700 {
		t.Fatalf("the folder: %v %v", info, err)
	}
	// A second instance while the first runs shares its room: what the first wrote is gone
	// from both.
	left.Add(-(512 << 10))
	_, left2, done2, err := m.Wasm("@team/app", 1<<20)
	if err != nil || left2 != left {
		t.Fatalf("a second instance's room = %v (%v), want the first's", left2, err)
	}
	done2()
	done()
	if _, left, done, _ := m.Wasm("@team/app", 0); left != nil {
		t.Errorf("no limit gives room %v, want none", left)
	} else {
		done()
	}

	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	// Instances end: the next one measures the folder again.
	if _, _, _, err := m.Wasm("@team/app", 1<<20); err == nil || !strings.Contains(err.Error(), "limits.database") {
		t.Errorf("Wasm of a folder past its limit = %v, want the limit named", err)
	}
	if info := m.Info(context.Background(), "@team/app"); !strings.Contains(info.Error, "limits.database") {
		t.Errorf("Info = %+v, want the reason", info)
	}
	if err := os.Remove(filepath.Join(dir, "big")); err != nil {
		t.Fatal(err)
	}
	if err := m.Full("@team/app", 1<<20); err == nil || !strings.Contains(m.Info(context.Background(), "@team/app").Error, "refused") {
		t.Errorf("Full = %v, want the reason kept", err)
	}
	_, left, done, err = m.Wasm("@team/app", 1<<20)
	if err != nil {
		t.Fatalf("Wasm within the limit again = %v", err)
	}
	if info := m.Info(context.Background(), "@team/app"); info.Error != "" {
		t.Errorf("Info within the limit = %+v, want no error", info)
	}

	// A busy worker always has an instance running: its room is measured again all the same,
	// giving back what was counted but not kept (an overwrite, a file removed).
	left.Store(0)
	m.mu.Lock()
	m.rooms["@team/app"].measured = time.Now().Add(-2 * remeasureEvery)
	m.mu.Unlock()
	_, left2, done2, err = m.Wasm("@team/app", 1<<20)
	if err != nil || left2 != left || left.Load() <= 0 {
		t.Errorf("the room of a busy worker measured again = %d (%v), want what is left of the folder", left.Load(), err)
	}
	done2()
	done()

	primary := New(t.TempDir(), &Remote{})
	if dir, left, done, err := primary.Wasm("app", 1<<20); err != nil || dir != "" || left != nil {
		t.Errorf("Wasm in primary mode = %q %v %v, want no folder (the database is on the primary)", dir, left, err)
	} else {
		done()
	}
}
