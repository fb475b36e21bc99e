package caddymodule

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-runtime/runtime/internal/cli"
	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/databases"
	"github.com/caddy-runtime/runtime/internal/reconcile"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// Commands are the runtime's commands that work on its local state (the config, the key store,
// the folders) rather than over HTTP, each declaring where it hangs beneath caddy runtime:
// keystore-migrate and backup at the top, publish beneath the client's cluster, rotate beneath
// its secrets. The module's entry point assembles them with the client's (cli.Tree).
func Commands() []cli.Command {
	return []cli.Command{
		{Command: keyStoreMigrateCommand()},
		{Command: backupCommand()},
		{Parent: "cluster", Command: clusterPublishCommand()},
		{Parent: "secrets", Command: secretsRotateCommand()},
	}
}

// keyStoreMigrateCommand is keystore-migrate.
func keyStoreMigrateCommand() caddycmd.Command {
	return caddycmd.Command{
		Name:  "keystore-migrate",
		Usage: "[--from PATH] [--to URL]",
		Short: "Copy a local key store into an empty sync-mode primary",
		Long: `Copies the runtime's local key store (keys, revoked ones included, sessions, the
audit trail and the workers' secrets, still sealed) into an empty libSQL primary in one transaction, so every key and session
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
			cmd.RunE = cli.Local(migrateKeyStore)
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
		return caddy.ExitCodeFailedStartup, fmt.Errorf("no local key store to migrate: %w", err)
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

// backupCommand is backup (which bin/runtime also offers at its top level).
func backupCommand() caddycmd.Command {
	return caddycmd.Command{
		Name:  "backup",
		Usage: "[--config <Caddyfile> [--adapter caddyfile]] [--from PATH] [--json] <file>",
		Short: "Write a consistent copy of the key store to a new file, while the runtime runs",
		Long: `Writes a consistent copy of the runtime's key store (its keys, sessions, audit trail and, in
a cluster, the desired state) to a new file, with SQLite's VACUUM INTO: one snapshot, taken
while the runtime keeps running and writing. The copy is owner-only and checked; an existing
file is never written over.

The key store is api-keys.db in the state_dir of the config --config names, else --from,
else in $RUNTIME_STATE_DIR, else ./data/state. In sync mode the file is the replica of the
primary, which is the source of truth: the copy holds what the replica had pulled; back the
primary up with its own tools.

The workers' local databases (database: true) are copied too, each consistent on its own, into
the new folder FILE.databases (one folder per worker, as in state_dir/databases).

To restore: stop the runtime, move api-keys.db and its -wal and -shm files away, copy the
backup to api-keys.db (and FILE.databases/<worker>/db.sqlite to
state_dir/databases/<worker>/db.sqlite, its -wal and -shm files moved away), and start the
runtime.

Example:
  caddy runtime backup --config Caddyfile backups/api-keys-$(date +%F).db`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Args = cobra.ExactArgs(1)
			cmd.Flags().StringP("config", "c", "", "the runtime's config file, whose state_dir holds the key store")
			cmd.Flags().StringP("adapter", "a", "", "the config's adapter (caddyfile for a Caddyfile)")
			cmd.Flags().String("from", "", "the key store file (default: api-keys.db in the config's state_dir, $RUNTIME_STATE_DIR, or ./data/state)")
			cmd.Flags().Bool("json", false, "print the result as JSON, for scripts")
			cmd.RunE = cli.Local(backupKeyStore)
		},
	}
}

// backupKeyStore runs backup.
func backupKeyStore(fl caddycmd.Flags) (int, error) {
	from, err := keyStorePath(fl.String("from"), fl.String("config"), fl.String("adapter"))
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	to := fl.Arg(0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := keystore.Backup(ctx, from, to)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	// The workers' local databases (database: true) sit beside the key store in state_dir.
	dbs, err := keystore.BackupDatabases(ctx, filepath.Join(filepath.Dir(from), "databases"), databases.File, to+".databases")
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if fl.Bool("json") {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(backupJSON{From: displayPath(from), To: displayPath(to), Keys: rep.Keys, Sessions: rep.Sessions,
			AuditEntries: rep.AuditEntries, Bytes: rep.Bytes, Replica: rep.Replica,
			Databases: dbs.Databases, DatabaseBytes: dbs.Bytes, SkippedFiles: dbs.Skipped}); err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
		return caddy.ExitCodeSuccess, nil
	}
	fmt.Printf("backed up the key store %s to %s: %d keys, %d sessions, %d audit entries, %d bytes\n",
		displayPath(from), displayPath(to), rep.Keys, rep.Sessions, rep.AuditEntries, rep.Bytes)
	if dbs.Databases > 0 {
		fmt.Printf("backed up %d workers' databases to %s: %d bytes\n", dbs.Databases, displayPath(to+".databases"), dbs.Bytes)
	}
	for _, f := range dbs.Skipped {
		fmt.Printf("not backed up: %s in the workers' databases is a sparse file, which copied would take its whole size\n", f)
	}
	if rep.Replica {
		fmt.Println("the key store is the replica of a sync-mode primary, which is the source of truth: " +
			"this copy holds what the replica had pulled; back the primary up with its own tools")
	}
	return caddy.ExitCodeSuccess, nil
}

// backupJSON is the result of backup --json.
type backupJSON struct {
	From         string `json:"from"`
	To           string `json:"to"`
	Keys         int    `json:"keys"`
	Sessions     int    `json:"sessions"`
	AuditEntries int    `json:"auditEntries"`
	Bytes        int64  `json:"bytes"`
	Replica      bool   `json:"replica"` // a sync-mode replica: its primary is the source of truth
	// Databases and DatabaseBytes are the workers' local databases copied to <to>.databases.
	Databases     int   `json:"databases"`
	DatabaseBytes int64 `json:"databaseBytes"`
	// SkippedFiles are the sparse files of workers' database folders not copied.
	SkippedFiles []string `json:"skippedFiles,omitempty"`
}

// keyStorePath is the key store file: from when set, else in the state_dir of the config
// file, else in $RUNTIME_STATE_DIR or the default.
func keyStorePath(from, configFile, adapter string) (string, error) {
	if from != "" {
		return from, nil
	}
	if configFile == "" {
		return filepath.Join(cmp.Or(os.Getenv(config.Lookup("state_dir").Env), config.Lookup("state_dir").Default), keyStoreFile), nil
	}
	app, err := loadApp(configFile, adapter)
	if err != nil {
		return "", err
	}
	settings, err := resolveApp(app.AppValues)
	if err != nil {
		return "", err
	}
	return filepath.Join(settings.StateDir, keyStoreFile), nil
}

// clusterPublishCommand is cluster publish, which grows a single instance into a cluster. It
// reads the config and the folders here, which the client, speaking HTTP only, does not.
func clusterPublishCommand() caddycmd.Command {
	return caddycmd.Command{
		Name:  "publish",
		Usage: "--config <Caddyfile> [--adapter caddyfile] [--dry-run] [--json]",
		Short: "Publish this instance's uploaded workers and plugins into the package store and the primary",
		Long: `Publishes the workers and plugins uploaded to this instance, in the writable folders of the
config's worker_dirs and plugin_dirs, to the cluster the config names: each tree is packed
into an archive, put in the package store, and written as a row on the key store's primary,
enabled as its manifest says; the tree is then recorded as installed from that archive, so
this instance finds itself converged when it starts in cluster mode, and every other
instance installs the same trees. Built-in folders (names starting with '.') stay local.

A version the primary holds already from another archive, a removed version and a plugin
the primary holds at another version are conflicts: reported, never written over (exit 1).
Running it again publishes nothing new; after an interruption it completes the rest.

Stop the runtime first, and move its key store to the primary with keystore-migrate before
(the command opens the key store in state_dir as the primary's replica). --dry-run packs
and checks every tree and prints what it would publish, writing nothing.

Example:
  caddy runtime keystore-migrate --to libsql://keys.example.com
  caddy runtime cluster publish --config Caddyfile --dry-run
  caddy runtime cluster publish --config Caddyfile`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Args = cobra.NoArgs
			cmd.Flags().StringP("config", "c", "", "the runtime's config file, naming key_store sync and package_store")
			cmd.Flags().StringP("adapter", "a", "", "the config's adapter (caddyfile for a Caddyfile)")
			cmd.Flags().Bool("dry-run", false, "print what would be published, writing nothing")
			cmd.Flags().Bool("json", false, "print the result as JSON, for scripts")
			cmd.RunE = cli.Local(publishCluster)
		},
	}
}

// publishCluster runs cluster publish.
func publishCluster(fl caddycmd.Flags) (int, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := publishConfig(ctx, fl.String("config"), fl.String("adapter"), fl.Bool("dry-run"))
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if fl.Bool("json") {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(publishedJSON(res, fl.Bool("dry-run"))); err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
	} else {
		printPublished(os.Stdout, res, fl.Bool("dry-run"))
	}
	if len(res.Conflicts)+len(res.Failed) > 0 {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("%d conflicts and %d failures: those trees are not published", len(res.Conflicts), len(res.Failed))
	}
	return caddy.ExitCodeSuccess, nil
}

// publishConfig loads the config, opens what its runtime app names (the key store as the
// primary's replica, the package store, the catalogs) and publishes.
func publishConfig(ctx context.Context, configFile, adapter string, dryRun bool) (reconcile.Published, error) {
	if configFile == "" {
		return reconcile.Published{}, errors.New("name the runtime's config with --config")
	}
	app, err := loadApp(configFile, adapter)
	if err != nil {
		return reconcile.Published{}, err
	}
	cctx, cancel := caddy.NewContext(caddy.Context{Context: ctx})
	defer cancel()
	if err := app.Provision(cctx); err != nil {
		return reconcile.Published{}, err
	}
	st := app.settings
	if st.KeyStore != "sync" {
		return reconcile.Published{}, fmt.Errorf("%s sets key_store %s: a cluster's desired state lives in a sync-mode key store's primary; "+
			"set key_store sync (and move the keys there with caddy runtime keystore-migrate)", configFile, st.KeyStore)
	}
	store := app.packageStore
	if store == nil {
		return reconcile.Published{}, fmt.Errorf("%s sets no package_store: name the S3-compatible store the cluster shares", configFile)
	}
	if err := checkPackageStore(ctx, store); err != nil {
		return reconcile.Published{}, err
	}
	keys, err := keystore.OpenSync(ctx, filepath.Join(st.StateDir, keyStoreFile), keystore.SyncOptions{
		URL: st.Sync.URL, Token: st.Sync.Token, Interval: st.Sync.Interval})
	if err != nil {
		return reconcile.Published{}, err
	}
	defer keys.Close()
	if sync, _ := keys.Sync(); !sync.Reachable || !sync.Synced {
		return reconcile.Published{}, fmt.Errorf("the key store primary %s cannot be reached: %s", st.Sync.URL, sync.Error)
	}
	limits := packages.Limits{Upload: st.MaxUploadSize, Unpacked: st.MaxUnpackedSize, Entries: st.MaxArchiveEntries}
	workers := packages.NewCatalog(packages.WorkerLayout, st.WorkerDirs, limits)
	defer workers.Close()
	plugins := packages.NewCatalog(packages.PluginLayout, st.PluginDirs, limits)
	defer plugins.Close()
	return reconcile.Publish(ctx, reconcile.PublishOptions{Desired: keys.Units, Store: store, Workers: workers, Plugins: plugins,
		By: keystore.Root(), DryRun: dryRun})
}

// loadApp reads the runtime app of a config file, unprovisioned: what its global runtime
// option sets.
func loadApp(configFile, adapter string) (*App, error) {
	body, _, _, err := caddycmd.LoadConfig(configFile, adapter)
	if err != nil {
		return nil, err
	}
	var cfg caddy.Config
	if err := json.Unmarshal(body, &cfg); err != nil {
		return nil, fmt.Errorf("reading %s: %w", configFile, err)
	}
	app := new(App)
	if raw := cfg.AppsRaw[appID]; raw != nil {
		if err := json.Unmarshal(raw, app); err != nil {
			return nil, fmt.Errorf("reading the runtime app of %s: %w", configFile, err)
		}
	}
	return app, nil
}

// printPublished prints the result for a person.
func printPublished(w io.Writer, res reconcile.Published, dryRun bool) {
	verb := "published"
	if dryRun {
		verb = "would publish"
	}
	for _, u := range res.Published {
		fmt.Fprintf(w, "%s %s %s@%s (sha256 %s)\n", verb, u.Kind, u.Name, u.Version, u.SHA256)
	}
	for _, u := range res.Recorded {
		fmt.Fprintf(w, "already published %s %s@%s (sha256 %s, change %d): recorded\n", u.Kind, u.Name, u.Version, u.SHA256, u.Change)
	}
	for _, c := range res.Conflicts {
		fmt.Fprintf(w, "conflict %s %s@%s (sha256 %s): %s; not published\n", c.Kind, c.Name, c.Version, c.SHA256, conflictReason(c))
	}
	for _, f := range res.Failed {
		fmt.Fprintf(w, "failed %s %s@%s: %v\n", f.Kind, f.Name, f.Version, f.Err)
	}
	fmt.Fprintf(w, "%d %s, %d already published, %d conflicts, %d failed\n", len(res.Published), verb, len(res.Recorded), len(res.Conflicts), len(res.Failed))
}

// conflictReason says what the primary holds instead.
func conflictReason(c reconcile.Conflict) string {
	e := c.Existing
	switch {
	case !e.Live():
		return fmt.Sprintf("the cluster removed %s@%s (change %d)", e.Name, e.Version, e.Change)
	case e.Version != c.Version:
		return fmt.Sprintf("the cluster holds plugin %s at version %s (change %d)", e.Name, e.Version, e.Change)
	}
	return fmt.Sprintf("the cluster holds %s@%s from another archive (sha256 %s, change %d)", e.Name, e.Version, e.SHA256, e.Change)
}

// publishedUnit is a unit of cluster publish --json.
type publishedUnit struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
	Change  int64  `json:"change,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Error   string `json:"error,omitempty"`
}

// publishedJSON is the result of cluster publish --json.
func publishedJSON(res reconcile.Published, dryRun bool) any {
	unit := func(u reconcile.Unit) publishedUnit {
		return publishedUnit{Kind: u.Kind, Name: u.Name, Version: u.Version, SHA256: u.SHA256, Change: u.Change}
	}
	out := struct {
		DryRun    bool            `json:"dryRun"`
		Published []publishedUnit `json:"published"`
		Recorded  []publishedUnit `json:"recorded"`
		Conflicts []publishedUnit `json:"conflicts"`
		Failed    []publishedUnit `json:"failed"`
	}{DryRun: dryRun, Published: []publishedUnit{}, Recorded: []publishedUnit{}, Conflicts: []publishedUnit{}, Failed: []publishedUnit{}}
	for _, u := range res.Published {
		out.Published = append(out.Published, unit(u))
	}
	for _, u := range res.Recorded {
		out.Recorded = append(out.Recorded, unit(u))
	}
	for _, c := range res.Conflicts {
		u := unit(c.Unit)
		u.Reason = conflictReason(c)
		out.Conflicts = append(out.Conflicts, u)
	}
	for _, f := range res.Failed {
		u := unit(f.Unit)
		u.Error = f.Err.Error()
		out.Failed = append(out.Failed, u)
	}
	return out
}
