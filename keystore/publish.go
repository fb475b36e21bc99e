package keystore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// UnitExistsError is Units.Add's refusal: the desired state holds Existing, a row of the
// same unit version (live or removed) or, for a plugin, another live version.
type UnitExistsError struct{ Existing UnitVersion }

func (e *UnitExistsError) Error() string {
	state := "live"
	if !e.Existing.Live() {
		state = "removed"
	}
	return fmt.Sprintf("the desired state holds %s %s@%s (%s, sha256 %s, change %d)", e.Existing.Kind, e.Existing.Name,
		e.Existing.Version, state, e.Existing.SHA256, e.Existing.Change)
}

// Add stores u as a new live row, as Units.Put does, unless the desired state
// holds a row of the same unit version, live or removed, or for a plugin another live version
// (which Units.Put would remove): then it writes nothing and returns a *UnitExistsError
// with that row. The check and the write are one transaction (on the primary in sync mode),
// so a row written meanwhile by another instance is never replaced. It publishes what an
// instance holds without overruling the cluster.
func (f Units) Add(ctx context.Context, u UnitVersion, by Principal) (int64, error) {
	s := f.s
	defer s.timed("add_unit")()
	scope, hash, err := checkUnit(u)
	if err != nil {
		return 0, err
	}
	return f.write(ctx, func(tx writeTx) error {
		existing, err := scanUnit(tx.QueryRowContext(ctx, `SELECT `+unitColumns+` FROM unit_versions
			WHERE kind = ? AND name = ? AND (version = ? OR kind = ? AND removed_at = 0)
			ORDER BY version = ? DESC LIMIT 1`, u.Kind, u.Name, u.Version, UnitPlugin, u.Version))
		switch {
		case err == nil:
			return &UnitExistsError{Existing: existing}
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("reading %s %s: %w", u.Kind, u.Name, err)
		}
		return insertUnit(ctx, tx, u, scope, hash, s.now().Unix(), by, "")
	})
}
