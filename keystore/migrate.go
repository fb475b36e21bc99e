package keystore

import (
	"context"
	"fmt"
	"math"
	"strings"
)

// MigrateReport counts the rows Migrate copied.
type MigrateReport struct {
	Keys, Sessions, AuditEntries int
}

// Migrate copies the local store at path (its keys, revoked ones included, its sessions, its
// audit trail, the workers' secrets, still sealed, and their custom domains) into the empty primary opts names, in one transaction, with the salt of
// its root sessions, so every credential works as before; then it makes the file a replica of
// that primary, so the runtime starts on it with key_store sync. A primary that holds any
// row is refused: merging two stores could give two keys one id.
func Migrate(ctx context.Context, path string, opts SyncOptions) (MigrateReport, error) {
	var rep MigrateReport
	s, err := Open(ctx, path)
	if err != nil {
		return rep, err
	}
	defer s.Close()
	// No key may change while it is copied; the file is only this command's for a moment.
	s.writeMu.Lock()
	defer s.writeMu.Unlock()

	primary, err := openPrimary(opts)
	if err != nil {
		return rep, err
	}
	defer primary.Close()
	storeID, err := preparePrimary(ctx, primary)
	if err != nil {
		return rep, &primaryError{url: opts.URL, err: err}
	}
	// The desired state stays behind: its rows name archives that only the package store
	// can hold, and a row whose archive no instance can fetch would never converge.
	rows := make([][][]any, len(keyTables))
	for i, t := range keyTables {
		if rows[i], err = readRows(ctx, s.db, t.name, t.cols, math.MinInt64, math.MaxInt64); err != nil {
			return rep, err
		}
	}
	meta, err := readMeta(ctx, s.db)
	if err != nil {
		return rep, err
	}
	err = runWrite(ctx, primary, func(tx writeTx) error {
		var held int
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM api_keys) + (SELECT COUNT(*) FROM sessions)
			+ (SELECT COUNT(*) FROM audit) + (SELECT COUNT(*) FROM worker_secrets) + (SELECT COUNT(*) FROM worker_domains)`).Scan(&held); err != nil {
			return err
		}
		if held > 0 {
			return fmt.Errorf("the primary %s already holds %d keys, sessions or audit entries: migrate only into an empty primary", opts.URL, held)
		}
		for i, t := range keyTables {
			n := strings.Count(t.cols, ",") + 1
			for _, row := range rows[i] {
				row[n-1] = tx.seq // change_seq, the last column
				if _, err := tx.ExecContext(ctx, `INSERT INTO `+t.name+` (`+t.cols+`) VALUES (?`+strings.Repeat(", ?", n-1)+`)`,
					row...); err != nil {
					return fmt.Errorf("copying into %s: %w", t.name, err)
				}
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE store_meta SET value = ? WHERE name = 'root_salt'`, meta["root_salt"])
		return err
	})
	if err != nil {
		return rep, err
	}
	for name, value := range map[string]string{"mode": modeSync, "primary_id": storeID, "pulled": "-1"} {
		if _, err := s.db.ExecContext(ctx, `INSERT OR REPLACE INTO store_meta (name, value) VALUES (?, ?)`, name, value); err != nil {
			return rep, fmt.Errorf("the keys are on the primary, but %s could not be made its replica (%v): move it away "+
				"and start with key_store sync", path, err)
		}
	}
	return MigrateReport{Keys: len(rows[0]), Sessions: len(rows[1]), AuditEntries: len(rows[2])}, nil
}
