package keystore

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenRefusesDamagedFiles(t *testing.T) {
	tests := []struct {
		name  string
		setup func(path string) error
		want  string
	}{
		{"empty file", func(p string) error { return os.WriteFile(p, nil, 0o600) }, "is empty (0 bytes)"},
		{"foreign file", func(p string) error { return os.WriteFile(p, []byte("{\"keys\": []}\n"), 0o600) }, "is not a SQLite database"},
		{"short file", func(p string) error { return os.WriteFile(p, []byte("SQLite"), 0o600) }, "is not a SQLite database"},
		{"folder", func(p string) error { return os.Mkdir(p, 0o700) }, "is not a regular file"},
		{"another program's database", func(p string) error {
			db, err := sql.Open("libsql", "file:"+p)
			if err != nil {
				return err
			}
			defer db.Close()
			_, err = db.Exec(`CREATE TABLE notes (body TEXT)`)
			return err
		}, "SQLite database of something else"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "api-keys.db")
			if err := tt.setup(path); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)
			s, err := Open(context.Background(), path)
			if err == nil {
				s.Close()
				t.Fatal("Open accepted it")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "backup") {
				t.Fatalf("Open = %v; want it to name %s, say %q and how to recover", err, path, tt.want)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Fatal("Open changed the refused file")
			}
		})
	}
}

func TestOpenCreatesOnlyWhereNoFileIs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api-keys.db")
	// A leftover of a creation cut short is no store and is replaced.
	os.WriteFile(path+".new", nil, 0o600)
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	info, err := os.Stat(path)
	if err != nil || info.Size() == 0 || info.Mode().Perm() != 0o600 {
		t.Fatalf("new store: %v, size %d, mode %v", err, info.Size(), info.Mode().Perm())
	}
	if _, err := os.Stat(path + ".new"); !os.IsNotExist(err) {
		t.Fatal("the temporary file remains")
	}
}

func TestRemoveStaleBootstrap(t *testing.T) {
	ctx := context.Background()
	for _, end := range []string{"revoked", "expired", "unknown to the key store", ""} {
		t.Run(end, func(t *testing.T) {
			s, c, path := newStore(t)
			file := filepath.Join(filepath.Dir(path), BootstrapFile)
			k, err := s.EnsureBootstrap(ctx)
			if err != nil {
				t.Fatal(err)
			}
			switch end {
			case "revoked":
				s.Revoke(ctx, k.ID)
			case "expired":
				s.db.Exec(`UPDATE api_keys SET expires_at = ?`, c.now().Unix())
			case "unknown to the key store":
				s.db.Exec(`DELETE FROM api_keys`)
			}
			why, err := s.RemoveStaleBootstrap(ctx)
			_, statErr := os.Stat(file)
			if err != nil || why != end || (end == "") != (statErr == nil) {
				t.Fatalf("RemoveStaleBootstrap = %q, %v; file: %v", why, err, statErr)
			}
			if why, err := s.RemoveStaleBootstrap(ctx); why != "" || err != nil {
				t.Fatalf("second call = %q, %v", why, err)
			}
		})
	}
}
