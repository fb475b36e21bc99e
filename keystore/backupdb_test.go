package keystore

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// TestBackupDatabases copies each worker's database as it is, rows included, into a new
// folder of the same layout, skips folders with no database yet, and refuses an existing
// target.
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
	to := filepath.Join(t.TempDir(), "backup.databases")
	rep, err := BackupDatabases(ctx, dir, "db.sqlite", to)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Databases != 2 || rep.Bytes <= 0 {
		t.Errorf("report = %+v, want 2 databases", rep)
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
