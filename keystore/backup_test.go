package keystore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackupWhileOpen backs up a store that is open and being written, refuses to write over
// a file, and opens the copy as a store whose keys verify, with the key created last in it.
func TestBackupWhileOpen(t *testing.T) {
	ctx := context.Background()
	s, _, path := newStore(t)
	var keys []string
	for _, name := range []string{"deploy", "ci", "ops"} {
		k, err := s.Create(ctx, NewKey{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.Secret)
	}
	dir := t.TempDir()
	to := filepath.Join(dir, "backup.db")
	rep, err := Backup(ctx, path, to)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Keys != 3 || rep.Replica || rep.Bytes == 0 {
		t.Errorf("Backup reported %+v, want 3 keys of a local store", rep)
	}
	if info, err := os.Stat(to); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the backup's mode: %v, %v; want 0600", info, err)
	}

	before, _ := os.ReadFile(to)
	if _, err := Backup(ctx, path, to); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a backup over an existing file: %v, want a refusal", err)
	}
	if after, _ := os.ReadFile(to); string(after) != string(before) {
		t.Error("the refused backup changed the existing file")
	}
	if _, err := Backup(ctx, filepath.Join(dir, "none.db"), filepath.Join(dir, "b2.db")); err == nil {
		t.Error("a backup of a missing store succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "none.db")); !os.IsNotExist(err) {
		t.Error("the backup of a missing store created it")
	}
	if _, err := os.Stat(filepath.Join(dir, "b2.db")); !os.IsNotExist(err) {
		t.Error("a failed backup left its file")
	}

	restored, err := Open(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	for _, k := range keys {
		if _, err := restored.Verify(ctx, k); err != nil {
			t.Errorf("a key does not verify against the backup: %v", err)
		}
	}
}
