package databases

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWasm readies a WebAssembly worker's folder: created, with the room left below its
// limit; refused past it, the reason kept for the API until the folder is within again; a
// write refused at the limit is told too; and in primary mode no folder is given.
func TestWasm(t *testing.T) {
	m := New(t.TempDir(), nil)
	dir, room, err := m.Wasm("@team/app", 1<<20)
	if err != nil || dir != m.Folder("@team/app") || room <= 0 || room > 1<<20 {
		t.Fatalf("Wasm = %q %d %v, want its folder and up to 1 MiB of room", dir, room, err)
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() || info.Mode().Perm() != 0o700 {
		t.Fatalf("the folder: %v %v", info, err)
	}
	if _, room, _ := m.Wasm("@team/app", 0); room != -1 {
		t.Errorf("no limit gives room %d, want -1 (none)", room)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Check("@team/app", 1<<20, false); err == nil {
		t.Error("Check of a folder past its limit found nothing")
	}
	if _, _, err := m.Wasm("@team/app", 1<<20); err == nil || !strings.Contains(err.Error(), "limits.database") {
		t.Errorf("Wasm of a folder past its limit = %v, want the limit named", err)
	}
	if info := m.Info(context.Background(), "@team/app"); !strings.Contains(info.Error, "limits.database") {
		t.Errorf("Info = %+v, want the reason", info)
	}
	if err := os.Remove(filepath.Join(dir, "big")); err != nil {
		t.Fatal(err)
	}
	if err := m.Check("@team/app", 1<<20, true); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Check after a refused write = %v, want why", err)
	}
	if _, _, err := m.Wasm("@team/app", 1<<20); err != nil {
		t.Fatalf("Wasm within the limit again = %v", err)
	}
	if info := m.Info(context.Background(), "@team/app"); info.Error != "" {
		t.Errorf("Info within the limit = %+v, want no error", info)
	}

	primary := New(t.TempDir(), &Remote{})
	if _, _, err := primary.Wasm("app", 1<<20); !errors.Is(err, ErrNoWasmPrimary) {
		t.Errorf("Wasm in primary mode = %v, want ErrNoWasmPrimary", err)
	}
}
