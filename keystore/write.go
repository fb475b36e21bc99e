package keystore

import (
	"context"
	"database/sql"
	"fmt"
)

// writeTx is a write transaction and the change number that every row it writes carries.
type writeTx struct {
	*sql.Tx
	seq int64
}

// write runs fn in one write transaction of the database that takes the store's writes: the
// local file, or in sync mode the primary, after which the replica pulls so the instance
// reads its own write at once. An error from fn rolls everything back.
func (s *Store) write(ctx context.Context, fn func(tx writeTx) error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.writeLocked(ctx, fn)
}

// writeLocked is write for a caller that holds writeMu.
func (s *Store) writeLocked(ctx context.Context, fn func(tx writeTx) error) error {
	if s.replica == nil {
		return runWrite(ctx, s.db, fn)
	}
	return s.replica.write(ctx, fn)
}

// nextChange takes the next change number in tx; the row it updates also serialises the
// write transactions, so change numbers commit in order and a reader never sees a later one
// without the earlier ones.
const nextChange = `UPDATE store_meta SET value = CAST(value AS INTEGER) + 1 WHERE name = 'change_seq'
	RETURNING CAST(value AS INTEGER)`

// runWrite runs fn in a transaction of db stamped with the next change number.
func runWrite(ctx context.Context, db *sql.DB, fn func(tx writeTx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("starting a write: %w", err)
	}
	defer tx.Rollback()
	w := writeTx{Tx: tx}
	if err := tx.QueryRowContext(ctx, nextChange).Scan(&w.seq); err != nil {
		return fmt.Errorf("numbering a write: %w", err)
	}
	if err := fn(w); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing a write: %w", err)
	}
	return nil
}
