package keystore

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// TestBackupDatabases copies each worker's database as it is, rows included, and the other
// files of its folder, into a new folder of the same layout, skips folders with nothing yet,
// and refuses an existing target.
func TestBackupDatabases(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rows := map[string]string{"notes": "kept", "@team+app": "the team's row"}
	for worker, row := range rows {
		if err := os.MkdirAll(filepath.Join(dir, worker), 0o700); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("libsql", (&url.URL{Scheme: "file", Path: filepath.Join(dir, worker, "db.sqlite")}).String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `CREATE TABLE t (v TEXT)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO t VALUES (?)`, row); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	// A WebAssembly worker's folder holds files of its own, its db.sqlite too maybe not SQLite:
	// they are copied as they are, and a link is not followed.
	files := map[string]string{"db.sqlite": "not a database", "rows.txt": "one\n", "sub/deep.txt": "deep"}
	for name, body := range files {
		path := filepath.Join(dir, "wasm", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "notes", "db.sqlite"), filepath.Join(dir, "wasm", "link")); err != nil {
		t.Fatal(err)
	}
	// A sparse file of 1 TiB takes nothing on disk, but would take it whole copied.
	if err := os.WriteFile(filepath.Join(dir, "wasm", "sparse"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "wasm", "sparse"), 1<<40); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "backup.databases")
	rep, err := BackupDatabases(ctx, dir, "db.sqlite", to)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Databases != 3 || rep.Bytes <= 0 {
		t.Errorf("report = %+v, want 3 databases", rep)
	}
	for name, want := range files {
		if got, err := os.ReadFile(filepath.Join(to, "wasm", name)); err != nil || string(got) != want {
			t.Errorf("the copy of wasm/%s holds %q (%v), want %q", name, got, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(to, "wasm", "link")); !os.IsNotExist(err) {
		t.Errorf("a link in a worker's folder was copied: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(to, "wasm", "sparse")); !os.IsNotExist(err) || len(rep.Skipped) != 1 || rep.Skipped[0] != filepath.Join("wasm", "sparse") {
		t.Errorf("a sparse file: %v, skipped %q; want it left out and named", err, rep.Skipped)
	}
	for worker, want := range rows {
		db, err := sql.Open("libsql", (&url.URL{Scheme: "file", Path: filepath.Join(to, worker, "db.sqlite"), RawQuery: "mode=ro"}).String())
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if err := db.QueryRowContext(ctx, `SELECT v FROM t`).Scan(&got); err != nil || got != want {
			t.Errorf("the copy of %s holds %q (%v), want %q", worker, got, err, want)
		}
		db.Close()
	}
	if _, err := os.Stat(filepath.Join(to, "empty")); !os.IsNotExist(err) {
		t.Errorf("a folder without a database was copied: %v", err)
	}
	if _, err := BackupDatabases(ctx, dir, "db.sqlite", to); err == nil {
		t.Error("a second backup into the same folder was not refused")
	}
	if rep, err := BackupDatabases(ctx, filepath.Join(dir, "none"), "db.sqlite", filepath.Join(t.TempDir(), "x")); err != nil || rep.Databases != 0 {
		t.Errorf("no databases folder = %+v, %v; want nothing copied and no error", rep, err)
	}
}
