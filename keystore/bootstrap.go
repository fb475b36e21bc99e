package keystore

import (
	"context"
	"fmt"
	"os"
)

// BootstrapFile is the name of the file, in the state folder, that receives the bootstrap
// key's secret.
const BootstrapFile = "bootstrap-key"

// EnsureBootstrap creates an admin key named "bootstrap" when the store holds no active key,
// and writes its secret to BootstrapFile inside dir (mode 0600). It returns the created key,
// or nil when keys already exist.
func (s *Store) EnsureBootstrap(ctx context.Context, dir string) (*Created, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	n, err := s.CountActive(ctx)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		return nil, nil
	}
	// The file first: a key whose secret nobody can read would lock the operator out.
	k, err := s.createLocked(ctx, NewKey{Name: "bootstrap", Role: RoleAdmin}, func(secret string) error {
		return writeSecret(dir, secret)
	})
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// writeSecret writes the secret through an os.Root, so a link planted at the file's name
// cannot redirect it outside dir.
func writeSecret(dir, secret string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening state folder: %v", err)
	}
	defer root.Close()
	tmp := BootstrapFile + ".tmp"
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("writing %s: %v", BootstrapFile, err)
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
		return fmt.Errorf("writing %s: %v", BootstrapFile, werr)
	}
	if err := root.Rename(tmp, BootstrapFile); err != nil {
		return fmt.Errorf("writing %s: %v", BootstrapFile, err)
	}
	return nil
}
