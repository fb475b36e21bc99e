package caddymodule

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/keystore"
)

// KeyStoreMigrateCommand returns the keystore-migrate command, which the module's entry point
// registers under caddy runtime.
func KeyStoreMigrateCommand() caddycmd.Command {
	return caddycmd.Command{
		Name:  "keystore-migrate",
		Usage: "[--from PATH] [--to URL]",
		Short: "Copy a local key store into an empty sync-mode primary",
		Long: `Copies the runtime's local key store (keys, revoked ones included, sessions and the
audit trail) into an empty libSQL primary in one transaction, so every key and session
works as before, and makes the file that primary's replica. Then start the runtime with
key_store sync and the same URL; start the other instances with empty state folders.

Stop the runtime first. The token is read from RUNTIME_AUTH_DB_SYNC_TOKEN, never from the
command line, where other users of the machine could read it.

Example:
  RUNTIME_AUTH_DB_SYNC_TOKEN="$TURSO_TOKEN" caddy runtime keystore-migrate \
    --from ./data/state/api-keys.db --to libsql://keys-example.turso.io`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().String("from", "", "the local key store file (default: api-keys.db in $RUNTIME_STATE_DIR, else ./data/state)")
			cmd.Flags().String("to", "", "the primary's URL (default: $RUNTIME_AUTH_DB_SYNC_URL)")
			cmd.RunE = caddycmd.WrapCommandFuncForCobra(migrateKeyStore)
		},
	}
}

// migrateKeyStore runs keystore-migrate.
func migrateKeyStore(fl caddycmd.Flags) (int, error) {
	from := cmp.Or(fl.String("from"), filepath.Join(cmp.Or(os.Getenv(config.Lookup("state_dir").Env),
		config.Lookup("state_dir").Default), keyStoreFile))
	to := cmp.Or(fl.String("to"), os.Getenv(config.Lookup("sync_url").Env))
	if to == "" {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("name the primary with --to or %s", config.Lookup("sync_url").Env)
	}
	if _, err := os.Stat(from); err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("no local key store to migrate: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := keystore.Migrate(ctx, from, keystore.SyncOptions{URL: to, Token: os.Getenv(config.Lookup("sync_token").Env)})
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	fmt.Printf("copied %d keys, %d sessions and %d audit entries from %s to %s; the file is now its replica:\n"+
		"start the runtime with key_store sync and sync_url %s\n", rep.Keys, rep.Sessions, rep.AuditEntries, from, to, to)
	return caddy.ExitCodeSuccess, nil
}
