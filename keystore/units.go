package keystore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Units is the desired state: the store's unit_versions table (the uploaded unit versions,
// with their tombstones) and its unit_reloads table (the requests to reload a kind of unit).
type Units struct{ s *Store }

// The kinds of unit the desired state holds.
const (
	UnitWorker = "worker"
	UnitPlugin = "plugin"
)

// ErrUnitNotFound is a change to a unit version the desired state does not hold, or holds
// only as removed.
var ErrUnitNotFound = errors.New("no such unit version")

// UnitRef names a unit version of the desired state. In Units.SetEnabled and Units.Remove an
// empty Version names every live version of the unit.
type UnitRef struct {
	Kind    string // UnitWorker or UnitPlugin
	Name    string // "app" or "@team/app"
	Version string
}

// UnitVersion is one row of the desired state: an uploaded unit version, the archive it is
// installed from (its SHA-256 in the package store) and whether it is served. A removed
// version stays as a tombstone (RemovedAt set) so that every instance learns of the removal.
// Times are Unix seconds.
type UnitVersion struct {
	UnitRef
	Scope           string // the namespace of Name ("@team"), "" when unscoped
	SHA256          string // hex, lower case
	Size            int64
	Enabled         bool
	RemovedAt       int64 // 0 while the version is live
	UpdatedAt       int64
	ChangedByID     int64  // the key that made the last change (0: the root key)
	ChangedByPrefix string // its key prefix
	Change          int64  // the change number of the last change
}

// Live reports whether the version is part of the desired state (not removed).
func (u UnitVersion) Live() bool { return u.RemovedAt == 0 }

// unitColumns are the columns of unit_versions, change_seq last (as syncedTables wants).
const unitColumns = "kind, scope, name, version, sha256, size, enabled, removed_at, updated_at, changed_by_id, changed_by_prefix, change_seq"

func scanUnit(row scanner) (UnitVersion, error) {
	var u UnitVersion
	err := row.Scan(&u.Kind, &u.Scope, &u.Name, &u.Version, &u.SHA256, &u.Size, &u.Enabled, &u.RemovedAt, &u.UpdatedAt,
		&u.ChangedByID, &u.ChangedByPrefix, &u.Change)
	return u, err
}

var sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Limits on the text of a unit reference; the upload's own validation is stricter.
const (
	maxUnitName    = 2*214 + 1 // "@scope/name", npm's limits
	maxUnitVersion = 256
)

// checkRef validates a unit reference; an empty version passes only when anyVersion is set.
func checkRef(ref UnitRef, anyVersion bool) error {
	if ref.Kind != UnitWorker && ref.Kind != UnitPlugin {
		return inputErr("BAD_REQUEST", "unit kind %q is neither %s nor %s", ref.Kind, UnitWorker, UnitPlugin)
	}
	if ref.Name == "" {
		return inputErr("BAD_REQUEST", "a unit needs a name")
	}
	if err := checkText("unit name", "BAD_REQUEST", ref.Name, maxUnitName); err != nil {
		return err
	}
	if ref.Version == "" && !anyVersion {
		return inputErr("BAD_REQUEST", "unit %s needs a version", ref.Name)
	}
	return checkText("unit version", "BAD_REQUEST", ref.Version, maxUnitVersion)
}

// Put stores u as live (a removed version comes back) with u's archive, size and
// enabled state, changed by by, and returns the change number of the write. A plugin is
// installed at one version at a time, so its other live versions are removed in the same
// write. u.Scope, when set, must be the namespace of u.Name; the stored row takes that
// namespace either way.
func (f Units) Put(ctx context.Context, u UnitVersion, by Principal) (int64, error) {
	s := f.s
	defer s.timed("put_unit")()
	scope, hash, err := checkUnit(u)
	if err != nil {
		return 0, err
	}
	return f.write(ctx, func(tx writeTx) error {
		now := s.now().Unix()
		if u.Kind == UnitPlugin {
			if _, err := tx.ExecContext(ctx, `UPDATE unit_versions SET removed_at = ?, updated_at = ?, changed_by_id = ?,
				changed_by_prefix = ?, change_seq = ? WHERE kind = ? AND name = ? AND version <> ? AND removed_at = 0`,
				now, now, by.ID, by.KeyPrefix, tx.seq, u.Kind, u.Name, u.Version); err != nil {
				return fmt.Errorf("replacing the other versions of plugin %s: %w", u.Name, err)
			}
		}
		return insertUnit(ctx, tx, u, scope, hash, now, by, `ON CONFLICT (kind, name, version) DO UPDATE SET scope = excluded.scope, sha256 = excluded.sha256,
			size = excluded.size, enabled = excluded.enabled, removed_at = 0, updated_at = excluded.updated_at,
			changed_by_id = excluded.changed_by_id, changed_by_prefix = excluded.changed_by_prefix, change_seq = excluded.change_seq`)
	})
}

// write runs fn in one write transaction, then announces the change on the feed (UnitsTopic); it returns the
// change number of the write.
func (f Units) write(ctx context.Context, fn func(tx writeTx) error) (int64, error) {
	s := f.s
	var change int64
	err := s.write(ctx, func(tx writeTx) error {
		change = tx.seq
		return fn(tx)
	})
	if err != nil {
		return 0, err
	}
	f.s.Feed.publish(UnitsTopic)
	return change, nil
}

// checkUnit validates a unit version to store and returns its namespace and its hash in
// lower case.
func checkUnit(u UnitVersion) (scope, hash string, err error) {
	if err := checkRef(u.UnitRef, false); err != nil {
		return "", "", err
	}
	scope = NamespaceOf(u.Name)
	if u.Scope != "" && u.Scope != scope {
		return "", "", inputErr("BAD_REQUEST", "unit %s is not in namespace %s", u.Name, u.Scope)
	}
	hash = strings.ToLower(u.SHA256)
	if !sha256Pattern.MatchString(hash) {
		return "", "", inputErr("BAD_REQUEST", "unit %s: %q is not a hex SHA-256", u.Name, u.SHA256)
	}
	if u.Size < 0 {
		return "", "", inputErr("BAD_REQUEST", "unit %s: negative size %d", u.Name, u.Size)
	}
	return scope, hash, nil
}

// insertUnit inserts u as a live row changed now by by, in tx; onConflict says what a row of
// the same version already there becomes.
func insertUnit(ctx context.Context, tx writeTx, u UnitVersion, scope, hash string, now int64, by Principal, onConflict string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO unit_versions (`+unitColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?) `+onConflict,
		u.Kind, scope, u.Name, u.Version, hash, u.Size, u.Enabled, now, by.ID, by.KeyPrefix, tx.seq)
	if err != nil {
		return fmt.Errorf("storing %s %s@%s: %w", u.Kind, u.Name, u.Version, err)
	}
	return nil
}

// SetEnabled enables or disables a live unit version (every live version when
// ref.Version is empty), changed by by, and returns the change number of the write.
func (f Units) SetEnabled(ctx context.Context, ref UnitRef, enabled bool, by Principal) (int64, error) {
	s := f.s
	defer s.timed("set_unit_enabled")()
	return f.change(ctx, ref, by, `enabled = ?`, enabled)
}

// Remove removes a unit version (every live version when ref.Version is empty), changed
// by by, and returns the change number of the write. The rows stay as tombstones, so a pull
// brings the removal to every instance.
func (f Units) Remove(ctx context.Context, ref UnitRef, by Principal) (int64, error) {
	s := f.s
	defer s.timed("remove_unit")()
	return f.change(ctx, ref, by, `removed_at = ?`, s.now().Unix())
}

// change sets set (one column = ?, with value) on the live rows ref names; none is
// ErrUnitNotFound.
func (f Units) change(ctx context.Context, ref UnitRef, by Principal, set string, value any) (int64, error) {
	s := f.s
	if err := checkRef(ref, true); err != nil {
		return 0, err
	}
	return f.write(ctx, func(tx writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE unit_versions SET `+set+`, updated_at = ?, changed_by_id = ?,
			changed_by_prefix = ?, change_seq = ? WHERE kind = ? AND name = ? AND (version = ? OR ? = '') AND removed_at = 0`,
			value, s.now().Unix(), by.ID, by.KeyPrefix, tx.seq, ref.Kind, ref.Name, ref.Version, ref.Version)
		if err != nil {
			return fmt.Errorf("changing %s %s: %w", ref.Kind, ref.Name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrUnitNotFound
		}
		return nil
	})
}

// Sync is the store's Sync: the state of the replica the desired state is read from, and
// false for a local store. A reader that deletes what the desired state does not name (the
// package store's collector) reads nothing from a replica that has not pulled.
func (f Units) Sync() (SyncStatus, bool) { return f.s.Sync() }

// Refresh asks for a pull that begins after the call, at most one per second as for
// unknown credentials (a request named a unit this instance does not hold, which may have
// been uploaded elsewhere since the last pull), and waits for it a little while. It reports
// whether such a pull succeeded; a local store, which is the desired state, reports false.
func (f Units) Refresh(ctx context.Context) bool {
	s := f.s
	if s.replica == nil {
		return false
	}
	return s.replica.demand(ctx)
}

// Versions returns every row of the desired state as this instance holds it (in sync
// mode, its replica as of the last pull), removed versions included, by kind, name and
// version: the whole of it, which each reconciliation compares with what is installed.
func (f Units) Versions(ctx context.Context) ([]UnitVersion, error) {
	return f.read(ctx, `SELECT `+unitColumns+` FROM unit_versions ORDER BY kind, name, version`)
}

// ChangesSince returns the rows of the desired state changed after change number
// change, removed versions included, in the order of their changes.
func (f Units) ChangesSince(ctx context.Context, change int64) ([]UnitVersion, error) {
	return f.read(ctx, `SELECT `+unitColumns+` FROM unit_versions WHERE change_seq > ?
		ORDER BY change_seq, kind, name, version`, change)
}

// LatestChange returns the change number of the last change to the desired state this
// instance holds (a unit version, or a reload request), 0 before any. An instance that has applied the rows up to it has
// converged; the store's other writes (keys, sessions, audit entries) share the numbering but
// do not count.
func (f Units) LatestChange(ctx context.Context) (int64, error) {
	s := f.s
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT MAX((SELECT COALESCE(MAX(change_seq), 0) FROM unit_versions),
		(SELECT COALESCE(MAX(change_seq), 0) FROM unit_reloads))`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("reading the desired state's change number: %w", err)
	}
	return n, nil
}

func (f Units) read(ctx context.Context, query string, args ...any) ([]UnitVersion, error) {
	s := f.s
	defer s.timed("list_units")()
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the desired state: %w", err)
	}
	defer rows.Close()
	out := []UnitVersion{}
	for rows.Next() {
		u, err := scanUnit(rows)
		if err != nil {
			return nil, fmt.Errorf("reading the desired state: %w", err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// reloadColumns are the columns of unit_reloads, change_seq last (as syncedTables wants).
const reloadColumns = "kind, requested_at, changed_by_id, changed_by_prefix, change_seq"

// RequestReload asks every instance to reload its units of kind (UnitPlugin: the plugins), by
// by, and returns the change number of the request: an instance that has reloaded after
// seeing it (ReloadRequested) has honoured it. Requests are not queued: one reload honours
// every request before it.
func (f Units) RequestReload(ctx context.Context, kind string, by Principal) (int64, error) {
	s := f.s
	defer s.timed("request_reload")()
	if kind != UnitWorker && kind != UnitPlugin {
		return 0, inputErr("BAD_REQUEST", "unit kind %q is neither %s nor %s", kind, UnitWorker, UnitPlugin)
	}
	var change int64
	err := s.write(ctx, func(tx writeTx) error {
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO unit_reloads (`+reloadColumns+`) VALUES (?, ?, ?, ?, ?)`,
			kind, s.now().Unix(), by.ID, by.KeyPrefix, tx.seq)
		if err != nil {
			return fmt.Errorf("requesting a reload of the %ss: %w", kind, err)
		}
		change = tx.seq
		return nil
	})
	if err != nil {
		return 0, err
	}
	f.s.Feed.publish(UnitsTopic)
	return change, nil
}

// ReloadRequested returns the change number of the latest request to reload the units of
// kind as this instance holds it, 0 when none was made.
func (f Units) ReloadRequested(ctx context.Context, kind string) (int64, error) {
	s := f.s
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(change_seq), 0) FROM unit_reloads WHERE kind = ?`, kind).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("reading the reload requests: %w", err)
	}
	return n, nil
}
