package keystore

import (
	"context"
	"errors"
	"fmt"
)

// Secrets is the store's worker_secrets table: the workers' secrets, sealed, with their
// tombstones.
type Secrets struct{ s *Store }

// ErrSecretNotFound is a change to a secret the worker does not have.
var ErrSecretNotFound = errors.New("no such secret")

// SecretRecord is one row of worker_secrets: a worker's secret, its value sealed under the
// secrets key KeyID names (the store never sees a value in plaintext), and who changed it
// last. A removed secret stays as a tombstone (RemovedAt set, nothing sealed) so that every
// instance learns of the removal. Times are Unix seconds.
type SecretRecord struct {
	Worker          string // "app" or "@team/app"
	Name            string // the environment variable
	Scope           string // the namespace of Worker, "" when unscoped
	KeyID           string
	Sealed          string
	UpdatedAt       int64
	ChangedByID     int64 // 0: the root key
	ChangedByName   string
	ChangedByPrefix string
	RemovedAt       int64
	Change          int64
}

// SealedSecret is a secret to store: its name and its value as sealed under the key KeyID
// names.
type SealedSecret struct {
	Name, KeyID, Sealed string
}

// secretColumns are the columns of worker_secrets, change_seq last (as syncedTables wants).
const secretColumns = "worker, name, scope, key_id, sealed, updated_at, changed_by_id, changed_by_name, changed_by_prefix, removed_at, change_seq"

func scanSecret(row scanner) (SecretRecord, error) {
	var r SecretRecord
	err := row.Scan(&r.Worker, &r.Name, &r.Scope, &r.KeyID, &r.Sealed, &r.UpdatedAt, &r.ChangedByID, &r.ChangedByName,
		&r.ChangedByPrefix, &r.RemovedAt, &r.Change)
	return r, err
}

// Limits on the text of a secret's row; the API's own validation is stricter.
const (
	maxSecretName   = 256
	maxSealedLength = 64 << 10
)

// Change sets the secrets set (a secret removed before comes back) and removes those
// unset names, of worker, in one write changed by by, and returns its change number. Removing
// a secret the worker does not have is ErrSecretNotFound, and nothing changes.
func (f Secrets) Change(ctx context.Context, worker string, set []SealedSecret, unset []string, by Principal) (int64, error) {
	return f.ChangeAudited(ctx, worker, set, unset, by, nil)
}

// ChangeAudited is Secrets.Change that also stores e, the change's audit entry, in the
// same transaction (none when e is nil).
func (f Secrets) ChangeAudited(ctx context.Context, worker string, set []SealedSecret, unset []string, by Principal, e *AuditEntry) (int64, error) {
	s := f.s
	defer s.timed("change_secrets")()
	if err := checkRef(UnitRef{Kind: UnitWorker, Name: worker}, true); err != nil {
		return 0, err
	}
	for _, sec := range set {
		if err := checkSecretName(sec.Name); err != nil {
			return 0, err
		}
		if sec.KeyID == "" || sec.Sealed == "" || len(sec.Sealed) > maxSealedLength {
			return 0, inputErr("BAD_REQUEST", "secret %s: no sealed value, or one of more than %d bytes", sec.Name, maxSealedLength)
		}
	}
	for _, name := range unset {
		if err := checkSecretName(name); err != nil {
			return 0, err
		}
	}
	var change int64
	err := s.write(ctx, func(tx writeTx) error {
		change = tx.seq
		now := s.now().Unix()
		for _, sec := range set {
			_, err := tx.ExecContext(ctx, `INSERT INTO worker_secrets (`+secretColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)
				ON CONFLICT (worker, name) DO UPDATE SET scope = excluded.scope, key_id = excluded.key_id, sealed = excluded.sealed,
				updated_at = excluded.updated_at, changed_by_id = excluded.changed_by_id, changed_by_name = excluded.changed_by_name,
				changed_by_prefix = excluded.changed_by_prefix, removed_at = 0, change_seq = excluded.change_seq`,
				worker, sec.Name, NamespaceOf(worker), sec.KeyID, sec.Sealed, now, by.ID, by.Name, by.KeyPrefix, tx.seq)
			if err != nil {
				return fmt.Errorf("storing secret %s of %s: %w", sec.Name, worker, err)
			}
		}
		for _, name := range unset {
			res, err := tx.ExecContext(ctx, `UPDATE worker_secrets SET key_id = '', sealed = '', removed_at = ?, updated_at = ?,
				changed_by_id = ?, changed_by_name = ?, changed_by_prefix = ?, change_seq = ? WHERE worker = ? AND name = ? AND removed_at = 0`,
				now, now, by.ID, by.Name, by.KeyPrefix, tx.seq, worker, name)
			if err != nil {
				return fmt.Errorf("removing secret %s of %s: %w", name, worker, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return ErrSecretNotFound
			}
		}
		return s.Audit.appendIn(ctx, tx, e)
	})
	if err != nil {
		return 0, err
	}
	f.s.Feed.publish(SecretsTopic)
	return change, nil
}

// checkSecretName checks a secret's name as text; the API checks it as a variable name.
func checkSecretName(name string) error {
	if name == "" {
		return inputErr("BAD_REQUEST", "a secret needs a name")
	}
	return checkText("secret name", "BAD_REQUEST", name, maxSecretName)
}

// List returns the live secrets of worker, by name, as this instance holds them.
func (f Secrets) List(ctx context.Context, worker string) ([]SecretRecord, error) {
	return f.read(ctx, `SELECT `+secretColumns+` FROM worker_secrets WHERE worker = ? AND removed_at = 0 ORDER BY name`, worker)
}

// Versions returns, for every worker that has or had a secret, the change number of the
// last change to its secrets (a removal included): a worker whose number moves has new
// secrets, which its running processes do not have yet.
func (f Secrets) Versions(ctx context.Context) (map[string]int64, error) {
	s := f.s
	rows, err := s.db.QueryContext(ctx, `SELECT worker, MAX(change_seq) FROM worker_secrets GROUP BY worker`)
	if err != nil {
		return nil, fmt.Errorf("reading the secrets' changes: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var worker string
		var change int64
		if err := rows.Scan(&worker, &change); err != nil {
			return nil, fmt.Errorf("reading the secrets' changes: %w", err)
		}
		out[worker] = change
	}
	return out, rows.Err()
}

// Reseal passes every live secret to reseal in one write transaction and stores what
// it returns in its place, keeping who set it and when: a new key id and sealed value, or
// keep to leave it as it is. An error from reseal changes nothing. It returns how many
// secrets it re-sealed.
func (f Secrets) Reseal(ctx context.Context, reseal func(SecretRecord) (keyID, sealed string, keep bool, err error)) (int, error) {
	s := f.s
	defer s.timed("reseal_secrets")()
	n := 0
	err := s.write(ctx, func(tx writeTx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+secretColumns+` FROM worker_secrets WHERE removed_at = 0 ORDER BY worker, name`)
		if err != nil {
			return fmt.Errorf("reading the secrets: %w", err)
		}
		var all []SecretRecord
		for rows.Next() {
			r, err := scanSecret(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("reading the secrets: %w", err)
			}
			all = append(all, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("reading the secrets: %w", err)
		}
		for _, r := range all {
			keyID, sealed, keep, err := reseal(r)
			if err != nil {
				return err
			}
			if keep {
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE worker_secrets SET key_id = ?, sealed = ?, change_seq = ? WHERE worker = ? AND name = ?`,
				keyID, sealed, tx.seq, r.Worker, r.Name); err != nil {
				return fmt.Errorf("re-sealing secret %s of %s: %w", r.Name, r.Worker, err)
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		f.s.Feed.publish(SecretsTopic)
	}
	return n, nil
}

func (f Secrets) read(ctx context.Context, query string, args ...any) ([]SecretRecord, error) {
	s := f.s
	defer s.timed("list_secrets")()
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the secrets: %w", err)
	}
	defer rows.Close()
	out := []SecretRecord{}
	for rows.Next() {
		r, err := scanSecret(rows)
		if err != nil {
			return nil, fmt.Errorf("reading the secrets: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
