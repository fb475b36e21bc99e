package keystore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
)

// migrations upgrade the schema one version at a time; migrations[i] brings a store from
// version i to i+1. Never edit a released migration: add one.
var migrations = []string{
	// 1: keys with a role (the legacy layout: no namespaces, no expiry).
	`CREATE TABLE api_keys (
		id           INTEGER PRIMARY KEY AUTOINCREMENT,
		name         TEXT    NOT NULL,
		key_hash     TEXT    NOT NULL UNIQUE,
		key_prefix   TEXT    NOT NULL,
		role         TEXT    NOT NULL,
		permissions  TEXT    NOT NULL DEFAULT '[]',
		created_at   INTEGER NOT NULL,
		last_used_at INTEGER,
		revoked_at   INTEGER
	)`,
	// 2: namespaces (legacy keys keep full access), expiry and a description.
	`ALTER TABLE api_keys ADD COLUMN namespaces TEXT NOT NULL DEFAULT '["*"]';
	 ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
	 ALTER TABLE api_keys ADD COLUMN description TEXT;
	 CREATE INDEX api_keys_active ON api_keys (revoked_at, expires_at)`,
	// 3: server-side sessions (only the token's hash is stored; key_id 0 is the root key, whose
	// sessions carry a fingerprint of the root key they began with), and the salt of that
	// fingerprint.
	`CREATE TABLE sessions (
		id           INTEGER PRIMARY KEY AUTOINCREMENT,
		token_hash   TEXT    NOT NULL UNIQUE,
		key_id       INTEGER NOT NULL,
		root_fp      TEXT    NOT NULL DEFAULT '',
		created_at   INTEGER NOT NULL,
		expires_at   INTEGER NOT NULL,
		last_seen_at INTEGER NOT NULL,
		user_agent   TEXT    NOT NULL DEFAULT ''
	);
	 CREATE INDEX sessions_key ON sessions (key_id);
	 CREATE INDEX sessions_expiry ON sessions (expires_at);
	 CREATE TABLE store_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
	 INSERT INTO store_meta (name, value) VALUES ('root_salt', lower(hex(randomblob(16))))`,
	// 4: the audit trail. scope is the namespace an entry is about ("@team"), "" for
	// unscoped units and actions on no unit; at is in Unix milliseconds.
	`CREATE TABLE audit (
		id           INTEGER PRIMARY KEY AUTOINCREMENT,
		at           INTEGER NOT NULL,
		actor_id     INTEGER,
		actor_name   TEXT    NOT NULL DEFAULT '',
		actor_prefix TEXT    NOT NULL DEFAULT '',
		action       TEXT    NOT NULL,
		target       TEXT    NOT NULL DEFAULT '',
		scope        TEXT    NOT NULL DEFAULT '',
		outcome      TEXT    NOT NULL,
		request_id   TEXT    NOT NULL DEFAULT '',
		remote_addr  TEXT    NOT NULL DEFAULT '',
		details      TEXT    NOT NULL DEFAULT '{}'
	);
	 CREATE INDEX audit_at ON audit (at);
	 CREATE INDEX audit_scope ON audit (scope, id)`,
	// 5: change numbers, so a replica can pull what changed since its cursor (sync mode): each
	// write transaction takes the next number from store_meta and stamps every row it writes.
	// Ended sessions stay as rows until they expire, so their end reaches the replicas.
	`ALTER TABLE api_keys ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
	 ALTER TABLE sessions ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
	 ALTER TABLE sessions ADD COLUMN ended_at INTEGER;
	 ALTER TABLE audit ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
	 CREATE INDEX api_keys_change ON api_keys (change_seq);
	 CREATE INDEX sessions_change ON sessions (change_seq);
	 CREATE INDEX audit_change ON audit (change_seq);
	 INSERT INTO store_meta (name, value) VALUES ('change_seq', '0')`,
	// 6: the desired state that instances sharing a primary converge on (units_schema 1): one
	// row per unit version, kept as a tombstone when removed so that a pull sees the removal,
	// stamped with change numbers like the key rows; and one row per instance, written by its
	// heartbeats without a change number (see Store.Heartbeat).
	`CREATE TABLE unit_versions (
		kind              TEXT    NOT NULL,
		scope             TEXT    NOT NULL DEFAULT '',
		name              TEXT    NOT NULL,
		version           TEXT    NOT NULL,
		sha256            TEXT    NOT NULL,
		size              INTEGER NOT NULL,
		enabled           INTEGER NOT NULL,
		removed_at        INTEGER NOT NULL DEFAULT 0,
		updated_at        INTEGER NOT NULL,
		changed_by_id     INTEGER NOT NULL DEFAULT 0,
		changed_by_prefix TEXT    NOT NULL DEFAULT '',
		change_seq        INTEGER NOT NULL,
		PRIMARY KEY (kind, name, version)
	);
	 CREATE INDEX unit_versions_change ON unit_versions (change_seq);
	 CREATE TABLE instances (
		id             TEXT    PRIMARY KEY,
		address        TEXT    NOT NULL DEFAULT '',
		version        TEXT    NOT NULL DEFAULT '',
		applied_change INTEGER NOT NULL DEFAULT 0,
		last_seen      INTEGER NOT NULL,
		health         TEXT    NOT NULL DEFAULT ''
	);
	 INSERT INTO store_meta (name, value) VALUES ('units_schema', '1')`,
	// 7: requests to reload (units_schema 2): one row per kind of unit, whose change number
	// is the latest request, pulled like the units, so that a reload asked of one instance
	// reaches every instance. Additive: an instance of units_schema 1 refuses to start on it.
	`CREATE TABLE unit_reloads (
		kind              TEXT    PRIMARY KEY,
		requested_at      INTEGER NOT NULL,
		changed_by_id     INTEGER NOT NULL DEFAULT 0,
		changed_by_prefix TEXT    NOT NULL DEFAULT '',
		change_seq        INTEGER NOT NULL
	);
	 UPDATE store_meta SET value = '2' WHERE name = 'units_schema'`,
	// 8: workers' secrets (units_schema 3): one row per worker and name, the value sealed under
	// the secrets key key_id names (never in plaintext), kept as a tombstone when removed so
	// that a pull sees the removal. Additive: an instance of units_schema 2, which would start
	// workers without their secrets, refuses to start on it.
	`CREATE TABLE worker_secrets (
		worker            TEXT    NOT NULL,
		name              TEXT    NOT NULL,
		scope             TEXT    NOT NULL DEFAULT '',
		key_id            TEXT    NOT NULL DEFAULT '',
		sealed            TEXT    NOT NULL DEFAULT '',
		updated_at        INTEGER NOT NULL,
		changed_by_id     INTEGER NOT NULL DEFAULT 0,
		changed_by_name   TEXT    NOT NULL DEFAULT '',
		changed_by_prefix TEXT    NOT NULL DEFAULT '',
		removed_at        INTEGER NOT NULL DEFAULT 0,
		change_seq        INTEGER NOT NULL,
		PRIMARY KEY (worker, name)
	);
	 CREATE INDEX worker_secrets_change ON worker_secrets (change_seq);
	 UPDATE store_meta SET value = '3' WHERE name = 'units_schema'`,
	// 9: custom domains of workers (units_schema 4): one row per domain, kept as a tombstone
	// when removed so that a pull sees the removal, stamped with change numbers. Additive.
	`CREATE TABLE worker_domains (
		domain            TEXT    PRIMARY KEY,
		worker            TEXT    NOT NULL,
		scope             TEXT    NOT NULL DEFAULT '',
		token             TEXT    NOT NULL,
		verified_at       INTEGER NOT NULL DEFAULT 0,
		checked_at        INTEGER NOT NULL DEFAULT 0,
		check_error       TEXT    NOT NULL DEFAULT '',
		removed_at        INTEGER NOT NULL DEFAULT 0,
		created_at        INTEGER NOT NULL,
		changed_by_id     INTEGER NOT NULL DEFAULT 0,
		changed_by_prefix TEXT    NOT NULL DEFAULT '',
		change_seq        INTEGER NOT NULL
	);
	 CREATE INDEX worker_domains_change ON worker_domains (change_seq);
	 UPDATE store_meta SET value = '4' WHERE name = 'units_schema'`,
	// 10: traffic splits (units_schema 5): one row per worker with the split of its unpinned
	// requests in force, a JSON list of {version, percent}; an ended split stays as a row with
	// the empty list, so that a pull sees the end. Pulled by change number like the units.
	`CREATE TABLE traffic_splits (
		name              TEXT    PRIMARY KEY,
		scope             TEXT    NOT NULL DEFAULT '',
		split             TEXT    NOT NULL DEFAULT '[]',
		updated_at        INTEGER NOT NULL,
		changed_by_id     INTEGER NOT NULL DEFAULT 0,
		changed_by_prefix TEXT    NOT NULL DEFAULT '',
		change_seq        INTEGER NOT NULL
	);
	 CREATE INDEX traffic_splits_change ON traffic_splits (change_seq);
	 UPDATE store_meta SET value = '5' WHERE name = 'units_schema'`,
	// 11: one row per claim of a custom domain, (domain, worker): while a domain is pending,
	// several workers may claim it with tokens of their own, so a claim of a name its claimant
	// does not control blocks nobody. The rows stay as they were. units_schema stays 5: an
	// instance not upgraded yet reads the claims of one domain as one row, as it always did.
	`CREATE TABLE worker_domain_claims (
		domain            TEXT    NOT NULL,
		worker            TEXT    NOT NULL,
		scope             TEXT    NOT NULL DEFAULT '',
		token             TEXT    NOT NULL,
		verified_at       INTEGER NOT NULL DEFAULT 0,
		checked_at        INTEGER NOT NULL DEFAULT 0,
		check_error       TEXT    NOT NULL DEFAULT '',
		removed_at        INTEGER NOT NULL DEFAULT 0,
		created_at        INTEGER NOT NULL,
		changed_by_id     INTEGER NOT NULL DEFAULT 0,
		changed_by_prefix TEXT    NOT NULL DEFAULT '',
		change_seq        INTEGER NOT NULL,
		PRIMARY KEY (domain, worker)
	);
	 INSERT INTO worker_domain_claims SELECT domain, worker, scope, token, verified_at, checked_at, check_error, removed_at,
		created_at, changed_by_id, changed_by_prefix, change_seq FROM worker_domains;
	 DROP TABLE worker_domains;
	 ALTER TABLE worker_domain_claims RENAME TO worker_domains;
	 CREATE INDEX worker_domains_change ON worker_domains (change_seq);
	 CREATE INDEX worker_domains_scope ON worker_domains (scope, removed_at, verified_at)`,
	// 12: cron triggers. cron_lease holds the one row naming the instance that runs the ticks
	// of a cluster, until expires_at (Unix milliseconds); cron_runs the last runs of each
	// worker's triggers, one row per tick (unique, so a tick runs on one instance even if two
	// believed they held the lease); cron_pauses the workers whose triggers are paused. None
	// is pulled by the replicas: every instance reads and writes them on the primary. Additive,
	// units_schema stays 5: an instance not upgraded yet runs no ticks.
	`CREATE TABLE cron_lease (
		name       TEXT    PRIMARY KEY,
		holder     TEXT    NOT NULL,
		expires_at INTEGER NOT NULL
	);
	 CREATE TABLE cron_runs (
		id           INTEGER PRIMARY KEY AUTOINCREMENT,
		worker       TEXT    NOT NULL,
		trigger_name TEXT    NOT NULL,
		scheduled_at INTEGER NOT NULL,
		started_at   INTEGER NOT NULL,
		instance     TEXT    NOT NULL DEFAULT '',
		status       TEXT    NOT NULL,
		http_status  INTEGER NOT NULL DEFAULT 0,
		duration_ms  INTEGER NOT NULL DEFAULT 0,
		error        TEXT    NOT NULL DEFAULT '',
		request_id   TEXT    NOT NULL DEFAULT '',
		UNIQUE (worker, trigger_name, scheduled_at)
	);
	 CREATE INDEX cron_runs_worker ON cron_runs (worker, id);
	 CREATE TABLE cron_pauses (
		worker           TEXT    PRIMARY KEY,
		scope            TEXT    NOT NULL DEFAULT '',
		paused_at        INTEGER NOT NULL,
		paused_by_prefix TEXT    NOT NULL DEFAULT ''
	)`,
}

// SchemaVersion is the schema version this package writes.
var SchemaVersion = len(migrations)

// UnitsSchemaVersion is the version of the desired-state tables (unit_versions, instances)
// this package writes, kept in store_meta as units_schema. A migration that changes those
// tables raises it in the same statement list, and stays additive: instances of a cluster
// are upgraded one at a time, and a newer one migrates the shared primary first.
const UnitsSchemaVersion = 5

// SchemaError refuses a database whose schema is newer than this runtime knows: a newer
// runtime wrote it, and reading or writing its rows with an older idea of them could
// corrupt what every instance sharing it relies on.
type SchemaError struct {
	What       string // "schema" or "desired-state schema (units_schema)"
	Have, Know int
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("%s version %d is newer than this runtime understands (%d); upgrade the runtime", e.What, e.Have, e.Know)
}

// migrate brings the database to SchemaVersion inside one write transaction, so concurrent
// openers cannot both migrate. A database of something else is refused.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("starting migration: %w", err)
	}
	defer tx.Rollback()
	if err := checkOurs(ctx, tx); err != nil {
		return err
	}
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if version >= 3 { // store_meta exists
		if err := checkUnitsSchema(ctx, tx); err != nil {
			return err
		}
	}
	if version > SchemaVersion {
		return &SchemaError{What: "schema", Have: version, Know: SchemaVersion}
	}
	for v := version; v < SchemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migrating schema to version %d: %w", v+1, err)
		}
	}
	if version != SchemaVersion {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, SchemaVersion)); err != nil {
			return fmt.Errorf("writing schema version: %w", err)
		}
	}
	return tx.Commit()
}

// querier runs a query; *sql.DB and *sql.Tx are queriers.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// checkOurs refuses a database that holds tables, or a schema version, but not the store's.
func checkOurs(ctx context.Context, db querier) error {
	var version, tables, keyTables int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	err := db.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(CASE WHEN name = 'api_keys' THEN 1 END)
		FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`).Scan(&tables, &keyTables)
	if err != nil {
		return fmt.Errorf("reading the tables: %w", err)
	}
	if keyTables == 0 && (version > 0 || tables > 0) {
		return errForeign
	}
	return nil
}

// checkUnitsSchema refuses desired-state tables newer than UnitsSchemaVersion.
func checkUnitsSchema(ctx context.Context, db querier) error {
	var v string
	err := db.QueryRowContext(ctx, `SELECT value FROM store_meta WHERE name = 'units_schema'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // from before the desired state: the migrations add it
	}
	if err != nil {
		return fmt.Errorf("reading the desired-state schema version: %w", err)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("the desired-state schema version %q is damaged", v)
	}
	if n > UnitsSchemaVersion {
		return &SchemaError{What: "desired-state schema (units_schema)", Have: n, Know: UnitsSchemaVersion}
	}
	return nil
}
