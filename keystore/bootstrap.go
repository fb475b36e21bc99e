package keystore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// BootstrapFile is the name of the file, in the state folder, that receives the bootstrap
// key's secret.
const BootstrapFile = "bootstrap-key"

// EnsureBootstrap creates an admin key named "bootstrap" when the store holds no active key,
// and writes its secret to BootstrapFile beside the store's file (mode 0600). It returns the
// created key, or nil when keys already exist. The count and the creation are one write
// transaction (in sync mode, on the primary), so instances starting together against an
// empty primary create one key, and only the instance that created it writes the file.
func (s *Store) EnsureBootstrap(ctx context.Context) (*Created, error) {
	var created *Created
	wrote := false
	err := s.write(ctx, func(tx writeTx) error {
		var n int
		if err := tx.QueryRowContext(ctx, countActive, s.now().Unix()).Scan(&n); err != nil {
			return fmt.Errorf("counting the active keys: %w", err)
		}
		if n > 0 {
			return nil
		}
		// The file first: a key whose secret nobody can read would lock the operator out.
		k, err := s.createIn(ctx, tx, NewKey{Name: "bootstrap", Role: RoleAdmin}, func(secret string) error {
			wrote = true
			return writeSecret(s.dir, secret)
		})
		if err != nil {
			return err
		}
		created = &k
		return nil
	})
	if err != nil {
		if wrote {
			_ = removeSecret(s.dir) // its key was not stored
		}
		return nil, err
	}
	if created != nil {
		s.keysChanged()
	}
	return created, nil
}

// removeSecret deletes BootstrapFile from dir, if it is there.
func removeSecret(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.Remove(BootstrapFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// writeSecret writes the secret through an os.Root, so a link planted at the file's name
// cannot redirect it outside dir.
func writeSecret(dir, secret string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening state folder: %w", err)
	}
	defer root.Close()
	tmp := BootstrapFile + ".tmp"
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("writing %s: %w", BootstrapFile, err)
	}
	_, werr := f.WriteString(secret + "\n")
	if err := f.Chmod(0o600); werr == nil {
		werr = err
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("writing %s: %w", BootstrapFile, werr)
	}
	if err := root.Rename(tmp, BootstrapFile); err != nil {
		return fmt.Errorf("writing %s: %w", BootstrapFile, err)
	}
	return nil
}

// BootstrapPath returns where the bootstrap key's secret is written.
func (s *Store) BootstrapPath() string { return filepath.Join(s.dir, BootstrapFile) }

// BootstrapRemovedMessage is the log line of a bootstrap key file RemoveStaleBootstrap
// deleted.
const BootstrapRemovedMessage = "the bootstrap key no longer works: deleted its file"

// RemoveStaleBootstrap deletes BootstrapFile when the key it holds no longer works (revoked,
// expired or unknown to the store), so no dead secret lingers on disk. It returns why it
// deleted the file, or "" when there is none or its key still works.
func (s *Store) RemoveStaleBootstrap(ctx context.Context) (string, error) {
	if st, ok := s.Sync(); ok && !st.Synced {
		return "", nil // a replica that never pulled knows no key: it cannot tell
	}
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		return "", fmt.Errorf("opening state folder: %w", err)
	}
	defer root.Close()
	f, err := root.Open(BootstrapFile)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", BootstrapFile, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	f.Close()
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", BootstrapFile, err)
	}
	why, err := s.deadReason(ctx, strings.TrimSpace(string(b)))
	if why == "" || err != nil {
		return "", err
	}
	if err := root.Remove(BootstrapFile); err != nil {
		return "", fmt.Errorf("deleting %s: %w", BootstrapFile, err)
	}
	return why, nil
}

// deadReason says why key no longer authenticates ("revoked", "expired", "unknown to the key
// store"), or "" when it does. Unlike Verify, it records no use.
func (s *Store) deadReason(ctx context.Context, key string) (string, error) {
	sum, ok := secretSum(key, KeyPrefix)
	if !ok {
		return "not a key", nil
	}
	var revoked, expires int64
	var stored string
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(revoked_at, 0), COALESCE(expires_at, 0), key_hash
		FROM api_keys WHERE key_hash = ?`, HashKey(key)).Scan(&revoked, &expires, &stored)
	switch {
	case errors.Is(err, sql.ErrNoRows) || err == nil && !sameHash(stored, sum):
		return "unknown to the key store", nil
	case err != nil:
		return "", err
	case revoked != 0:
		return "revoked", nil
	case (KeyRecord{ExpiresAt: expires}).Expired(s.now()):
		return "expired", nil
	}
	return "", nil
}
