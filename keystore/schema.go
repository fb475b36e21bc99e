package keystore

import (
	"context"
	"fmt"
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
}

// SchemaVersion is the schema version this package writes.
var SchemaVersion = len(migrations)

// migrate brings the database to SchemaVersion inside one write transaction, so concurrent
// openers cannot both migrate.
func (s *Store) migrate(ctx context.Context) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("starting migration: %v", err)
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("reading schema version: %v", err)
	}
	if version > SchemaVersion {
		return fmt.Errorf("schema version %d is newer than this runtime understands (%d); upgrade the runtime", version, SchemaVersion)
	}
	for v := version; v < SchemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migrating schema to version %d: %v", v+1, err)
		}
	}
	if version != SchemaVersion {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, SchemaVersion)); err != nil {
			return fmt.Errorf("writing schema version: %v", err)
		}
	}
	return tx.Commit()
}
