package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-runtime/runtime/internal/cli"
	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/secrets"
	"github.com/caddy-runtime/runtime/keystore"
)

// secretsRotateCommand is secrets rotate, which re-seals every stored secret under a new key.
// It opens the key store itself, which the client, speaking HTTP only, does not.
func secretsRotateCommand() caddycmd.Command {
	return caddycmd.Command{
		Name:  "rotate",
		Usage: "[--config <Caddyfile> [--adapter caddyfile]] [--json]",
		Short: "Re-seal every worker's secrets under a new secrets_key",
		Long: `Re-seals every secret in the key store, in one transaction, under a new key: the old key
comes from the config's secrets_key_old (--config), else RUNTIME_SECRETS_KEY_OLD; the new one
from its secrets_key, else RUNTIME_SECRETS_KEY; both never from the command line, where other
users of the machine could read them. Secrets sealed under the new key already are left alone,
so running it again after an interruption finishes the work; a secret sealed under neither key
stops it, changing nothing.

The key store is the one the config names (state_dir, key_store; in sync mode its primary,
through a replica of its own, and every instance gets the re-sealed values with its pulls).
The runtime keeps running: first give every instance the new key as secrets_key and the old
one as secrets_key_old (a reload is enough), so it seals with the new key and opens what
either sealed; then rotate; then remove secrets_key_old. The processes of workers with secrets
restart once, as after a change of their secrets, with the same values.

Example:
  RUNTIME_SECRETS_KEY_OLD="$OLD_KEY" RUNTIME_SECRETS_KEY="$NEW_KEY" \
    caddy runtime secrets rotate --config Caddyfile`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Args = cobra.NoArgs
			cmd.Flags().StringP("config", "c", "", "the runtime's config file, whose state_dir and key_store hold the secrets")
			cmd.Flags().StringP("adapter", "a", "", "the config's adapter (caddyfile for a Caddyfile)")
			cmd.Flags().Bool("json", false, "print the result as JSON, for scripts")
			cmd.RunE = cli.Local(rotateSecrets)
		},
	}
}

// rotated is the result of secrets rotate.
type rotated struct {
	Resealed int    `json:"resealed"`
	KeyID    string `json:"keyId"`
	OldKeyID string `json:"oldKeyId"`
}

// rotateSecrets runs secrets rotate.
func rotateSecrets(fl caddycmd.Flags) (int, error) {
	values := config.AppValues{}
	if file := fl.String("config"); file != "" {
		app, err := loadApp(file, fl.String("adapter"))
		if err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
		values = app.AppValues
	}
	settings, err := resolveApp(values)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if settings.SecretsKey == "" {
		return caddy.ExitCodeFailedStartup, errors.New("no new key: set RUNTIME_SECRETS_KEY (or the config's secrets_key) to the new key; " + secrets.GenerateHint)
	}
	newKey, err := secrets.ParseKey(settings.SecretsKey)
	if err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("invalid secrets_key: %w", err)
	}
	if settings.SecretsKeyOld == "" {
		return caddy.ExitCodeFailedStartup, errors.New("no old key: set RUNTIME_SECRETS_KEY_OLD (or the config's secrets_key_old) to the key the secrets are sealed under now")
	}
	oldKey, err := secrets.ParseKey(settings.SecretsKeyOld)
	if err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("invalid secrets_key_old: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	store, done, err := openStoreOf(ctx, settings)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	defer done()
	n, err := store.Secrets.Reseal(ctx, func(r keystore.SecretRecord) (string, string, bool, error) {
		if r.KeyID == newKey.ID() {
			return "", "", true, nil
		}
		if r.KeyID != oldKey.ID() {
			return "", "", false, fmt.Errorf("secret %s of %s is sealed under key %s, neither the old key (%s) nor the new (%s): nothing was changed",
				r.Name, r.Worker, r.KeyID, oldKey.ID(), newKey.ID())
		}
		value, err := oldKey.Open(r.Worker, r.Name, r.KeyID, r.Sealed)
		if err != nil {
			return "", "", false, fmt.Errorf("secret %s of %s: %w; nothing was changed", r.Name, r.Worker, err)
		}
		sealed, err := newKey.Seal(r.Worker, r.Name, value)
		return newKey.ID(), sealed, false, err
	})
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	out := rotated{Resealed: n, KeyID: newKey.ID(), OldKeyID: oldKey.ID()}
	if fl.Bool("json") {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return caddy.ExitCodeSuccess, enc.Encode(out)
	}
	fmt.Printf("re-sealed %d secrets under key %s (was %s): secrets_key_old can go\n", n, out.KeyID, out.OldKeyID)
	return caddy.ExitCodeSuccess, nil
}

// openStoreOf opens the key store settings name: the local file, which a running runtime may
// hold open too, or a replica of the primary in a folder of its own (the runtime's replica in
// state_dir may be in use), which must reach the primary, as every write goes there. done
// closes the store and removes that folder.
func openStoreOf(ctx context.Context, st config.Settings) (store *keystore.Store, done func(), err error) {
	path := filepath.Join(st.StateDir, keyStoreFile)
	if st.KeyStore != "sync" {
		if _, err := os.Stat(path); err != nil {
			return nil, nil, fmt.Errorf("no key store in state_dir %s: %w", st.StateDir, err)
		}
		if store, err = keystore.Open(ctx, path); err != nil {
			return nil, nil, err
		}
		return store, func() { store.Close() }, nil
	}
	dir, err := os.MkdirTemp("", "runtime-replica-*")
	if err != nil {
		return nil, nil, err
	}
	store, err = keystore.OpenSync(ctx, filepath.Join(dir, keyStoreFile), keystore.SyncOptions{URL: st.Sync.URL, Token: st.Sync.Token, Interval: st.Sync.Interval})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	done = func() { store.Close(); os.RemoveAll(dir) }
	if sync, _ := store.Sync(); !sync.Reachable || !sync.Synced {
		done()
		return nil, nil, fmt.Errorf("the key store primary %s cannot be reached: %s", st.Sync.URL, sync.Error)
	}
	return store, done, nil
}
