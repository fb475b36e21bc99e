package wasm

import (
	"os"
	"path/filepath"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// TestDataFSHidesDatabase: the database's files, which the runtime opens itself, cannot be
// opened, made, renamed over or removed through the worker's folder, however the path is
// spelt; the worker's other files can.
func TestDataFSHidesDatabase(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"db.sqlite", "rows.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	d := newDataFS(dir, nil, nil)
	for _, path := range []string{"db.sqlite", "./db.sqlite", "sub/../db.sqlite", "db.sqlite-journal", "db.sqlite-wal"} {
		if f, errno := d.OpenFile(path, experimentalsys.O_RDWR|experimentalsys.O_CREAT, 0o600); errno != experimentalsys.EPERM {
			if f != nil {
				f.Close()
			}
			t.Errorf("OpenFile(%q) = %v, want EPERM", path, errno)
		}
	}
	if errno := d.Rename("rows.txt", "db.sqlite"); errno != experimentalsys.EPERM {
		t.Errorf("Rename over the database = %v, want EPERM", errno)
	}
	for _, path := range []string{"db.sqlite", "sub/../db.sqlite"} {
		if errno := d.Unlink(path); errno != experimentalsys.EPERM {
			t.Errorf("Unlink(%q) = %v, want EPERM", path, errno)
		}
	}
	f, errno := d.OpenFile("rows.txt", experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		t.Fatalf("OpenFile(rows.txt) = %v", errno)
	}
	f.Close()
	if f, errno := d.OpenFile("sub/db.sqlite", experimentalsys.O_RDWR|experimentalsys.O_CREAT, 0o600); errno != 0 {
		t.Errorf("a file of that name in a subfolder = %v, want it made", errno)
	} else {
		f.Close()
	}
}
