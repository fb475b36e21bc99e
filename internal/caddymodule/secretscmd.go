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

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/keystore"
	"github.com/caddy-runtime/runtime/internal/secrets"
)

// OldSecretsKeyEnv names the variable that gives secrets rotate the key the secrets are
// sealed under now.
const OldSecretsKeyEnv = "RUNTIME_SECRETS_KEY_OLD"

// WithSecretsRotate returns the client's secrets command with rotate beneath it (caddy runtime
// secrets rotate), which re-seals every stored secret under a new key; the module's entry point
// registers it under caddy runtime. rotate opens the key store itself, which the client,
// speaking HTTP only, does not.
func WithSecretsRotate(c caddycmd.Command) caddycmd.Command {
	inner := c.CobraFunc
	c.CobraFunc = func(cmd *cobra.Command) {
		if inner != nil {
			inner(cmd)
		}
		cmd.AddCommand(secretsRotateCommand())
	}
	return c
}

func secretsRotateCommand() *cobra.Command {
	rotate := &cobra.Command{
		Use:   "rotate [--config <Caddyfile> [--adapter caddyfile]] [--json]",
		Short: "Re-seal every worker's secrets under a new secrets_key",
		Args:  cobra.NoArgs,
		Long: `Re-seals every secret in the key store, in one transaction, under a new key: the old key
comes from RUNTIME_SECRETS_KEY_OLD, the new one from the config's secrets_key (--config), else
RUNTIME_SECRETS_KEY; both never from the command line, where other users of the machine could
read them. Secrets sealed under the new key already are left alone, so running it again after
an interruption finishes the work; a secret sealed under neither key stops it, changing nothing.

The key store is the one the config names (state_dir, key_store; in sync mode its primary,
through which every instance gets the re-sealed values). Stop the runtime (every instance of a
cluster) first, rotate, then start it with the new key: a runtime still holding the old key
cannot open the re-sealed values, and a worker process that starts then fails to start.

Example:
  RUNTIME_SECRETS_KEY_OLD="$OLD_KEY" RUNTIME_SECRETS_KEY="$(openssl rand -base64 32)" \
    caddy runtime secrets rotate --config Caddyfile`,
	}
	rotate.Flags().StringP("config", "c", "", "the runtime's config file, whose state_dir and key_store hold the secrets")
	rotate.Flags().StringP("adapter", "a", "", "the config's adapter (caddyfile for a Caddyfile)")
	rotate.Flags().Bool("json", false, "print the result as JSON, for scripts")
	rotate.RunE = caddycmd.WrapCommandFuncForCobra(rotateSecrets)
	return rotate
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
		return caddy.ExitCodeFailedStartup, fmt.Errorf("invalid secrets_key: %v", err)
	}
	oldText := os.Getenv(OldSecretsKeyEnv)
	if oldText == "" {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("no old key: set %s to the key the secrets are sealed under now", OldSecretsKeyEnv)
	}
	oldKey, err := secrets.ParseKey(oldText)
	if err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("invalid %s: %v", OldSecretsKeyEnv, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	store, err := openStoreOf(ctx, settings)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	defer store.Close()
	n, err := store.ResealSecrets(ctx, func(r keystore.SecretRecord) (string, string, bool, error) {
		if r.KeyID == newKey.ID() {
			return "", "", true, nil
		}
		if r.KeyID != oldKey.ID() {
			return "", "", false, fmt.Errorf("secret %s of %s is sealed under key %s, neither the old key (%s) nor the new (%s): nothing was changed",
				r.Name, r.Worker, r.KeyID, oldKey.ID(), newKey.ID())
		}
		value, err := oldKey.Open(r.Worker, r.Name, r.KeyID, r.Sealed)
		if err != nil {
			return "", "", false, fmt.Errorf("secret %s of %s: %v; nothing was changed", r.Name, r.Worker, err)
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
	fmt.Printf("re-sealed %d secrets under key %s (was %s): start the runtime with the new key\n", n, out.KeyID, out.OldKeyID)
	return caddy.ExitCodeSuccess, nil
}

// openStoreOf opens the key store settings name: the local file, or the replica of the
// primary, which must be reachable, as every write goes there.
func openStoreOf(ctx context.Context, st config.Settings) (*keystore.Store, error) {
	path := filepath.Join(st.StateDir, keyStoreFile)
	if st.KeyStore != "sync" {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("no key store in state_dir %s: %v", st.StateDir, err)
		}
		return keystore.Open(ctx, path)
	}
	store, err := keystore.OpenSync(ctx, path, keystore.SyncOptions{URL: st.Sync.URL, Token: st.Sync.Token, Interval: st.Sync.Interval})
	if err != nil {
		return nil, err
	}
	if sync, _ := store.Sync(); !sync.Reachable || !sync.Synced {
		store.Close()
		return nil, fmt.Errorf("the key store primary %s cannot be reached: %s", st.Sync.URL, sync.Error)
	}
	return store, nil
}
