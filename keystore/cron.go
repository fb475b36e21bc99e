package keystore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Cron is the store's facet of cron triggers: the lease that names the one instance running
// the ticks, the runs of each worker's triggers and the paused workers. In sync mode every
// call goes to the primary, so every instance sees the same rows at once (the replica pulls
// none of them), and fails with ErrPrimaryUnavailable while it is away: an instance that
// cannot reach the primary runs no tick.
type Cron struct{ s *Store }

// MaxCronRuns is how many runs of a worker's triggers the store keeps, newest first.
const MaxCronRuns = 100

// Statuses of a cron run.
const (
	CronRunning = "running" // claimed, not finished (or its instance stopped before it did)
	CronOK      = "ok"      // the worker answered 2xx or 3xx
	CronFailed  = "failed"  // the worker answered another status, or could not be reached
	CronTimeout = "timeout" // no answer within the trigger's timeout
	CronSkipped = "skipped" // the trigger's previous run had not ended at the tick
)

// CronRun is one tick of a trigger. Times are Unix milliseconds.
type CronRun struct {
	ID          int64
	Worker      string
	Trigger     string
	ScheduledAt int64
	StartedAt   int64
	Instance    string
	Status      string
	HTTPStatus  int
	DurationMS  int64
	Error       string
	RequestID   string
}

// CronPause is a paused worker's record. PausedAt is in Unix seconds.
type CronPause struct {
	Worker         string
	PausedAt       int64
	PausedByPrefix string
}

// cronLease is the name of the lease row.
const cronLease = "cron"

// maxCronError caps the error text of a run.
const maxCronError = 1000

// on runs fn against the database holding the cron rows: the primary in sync mode, else the
// local file (writes one at a time, as SQLite wants).
func (c Cron) on(ctx context.Context, write bool, fn func(ctx context.Context, db *sql.DB) error) error {
	if r := c.s.replica; r != nil {
		return r.exchange(ctx, func(ctx context.Context) error { return fn(ctx, r.primary) })
	}
	if write {
		c.s.writeMu.Lock()
		defer c.s.writeMu.Unlock()
	}
	return fn(ctx, c.s.db)
}

// Acquire takes the lease for instance, or renews it, until ttl from now; it reports whether
// instance holds it: false while another instance's lease has not expired. The expiry is by
// the clock of the instance that wrote it, so instances sharing a primary keep their clocks
// in step (NTP).
func (c Cron) Acquire(ctx context.Context, instance string, ttl time.Duration) (bool, error) {
	now := c.s.now()
	const upsert = `INSERT INTO cron_lease (name, holder, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE cron_lease.holder = excluded.holder OR cron_lease.expires_at < ?`
	var holder string
	err := c.on(ctx, true, func(ctx context.Context, db *sql.DB) error {
		if _, err := db.ExecContext(ctx, upsert, cronLease, instance, now.Add(ttl).UnixMilli(), now.UnixMilli()); err != nil {
			return err
		}
		return db.QueryRowContext(ctx, `SELECT holder FROM cron_lease WHERE name = ?`, cronLease).Scan(&holder)
	})
	if err != nil {
		return false, fmt.Errorf("taking the cron lease: %w", err)
	}
	return holder == instance, nil
}

// Release gives the lease up if instance holds it, so another instance takes it at its next
// attempt rather than when it expires.
func (c Cron) Release(ctx context.Context, instance string) error {
	return c.on(ctx, true, func(ctx context.Context, db *sql.DB) error {
		_, err := db.ExecContext(ctx, `DELETE FROM cron_lease WHERE name = ? AND holder = ?`, cronLease, instance)
		return err
	})
}

// Holder is the instance holding the lease and until when, "" when none does.
func (c Cron) Holder(ctx context.Context) (string, time.Time, error) {
	var holder string
	var until int64
	err := c.on(ctx, false, func(ctx context.Context, db *sql.DB) error {
		err := db.QueryRowContext(ctx, `SELECT holder, expires_at FROM cron_lease WHERE name = ?`, cronLease).Scan(&holder, &until)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil || holder == "" || time.UnixMilli(until).Before(c.s.now()) {
		return "", time.Time{}, err
	}
	return holder, time.UnixMilli(until), nil
}

// Claim records run, the tick of run.Trigger at run.ScheduledAt, unless that tick has a row
// already (another instance claimed it): it reports whether this call recorded it, and sets
// run.ID. Past MaxCronRuns of the worker, the oldest go.
func (c Cron) Claim(ctx context.Context, run *CronRun) (bool, error) {
	run.Error = truncate(run.Error, maxCronError)
	claimed := false
	err := c.on(ctx, true, func(ctx context.Context, db *sql.DB) error {
		res, err := db.ExecContext(ctx, `INSERT INTO cron_runs (worker, trigger_name, scheduled_at, started_at, instance, status, http_status,
			duration_ms, error, request_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			run.Worker, run.Trigger, run.ScheduledAt, run.StartedAt, run.Instance, run.Status, run.HTTPStatus, run.DurationMS, run.Error, run.RequestID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		claimed = true
		if err := db.QueryRowContext(ctx, `SELECT id FROM cron_runs WHERE worker = ? AND trigger_name = ? AND scheduled_at = ?`,
			run.Worker, run.Trigger, run.ScheduledAt).Scan(&run.ID); err != nil {
			return err
		}
		_, err = db.ExecContext(ctx, `DELETE FROM cron_runs WHERE worker = ? AND id <= (
			SELECT id FROM cron_runs WHERE worker = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`, run.Worker, run.Worker, MaxCronRuns)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("recording a run of cron trigger %s of %s: %w", run.Trigger, run.Worker, err)
	}
	return claimed, nil
}

// Finish records the outcome of the claimed run.
func (c Cron) Finish(ctx context.Context, run CronRun) error {
	err := c.on(ctx, true, func(ctx context.Context, db *sql.DB) error {
		_, err := db.ExecContext(ctx, `UPDATE cron_runs SET status = ?, http_status = ?, duration_ms = ?, error = ? WHERE id = ?`,
			run.Status, run.HTTPStatus, run.DurationMS, truncate(run.Error, maxCronError), run.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the outcome of cron trigger %s of %s: %w", run.Trigger, run.Worker, err)
	}
	return nil
}

// Runs returns the kept runs of worker's triggers, newest first.
func (c Cron) Runs(ctx context.Context, worker string) ([]CronRun, error) {
	out := []CronRun{}
	err := c.on(ctx, false, func(ctx context.Context, db *sql.DB) error {
		out = out[:0]
		rows, err := db.QueryContext(ctx, `SELECT id, worker, trigger_name, scheduled_at, started_at, instance, status, http_status,
			duration_ms, error, request_id FROM cron_runs WHERE worker = ? ORDER BY id DESC LIMIT ?`, worker, MaxCronRuns)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r CronRun
			if err := rows.Scan(&r.ID, &r.Worker, &r.Trigger, &r.ScheduledAt, &r.StartedAt, &r.Instance, &r.Status, &r.HTTPStatus,
				&r.DurationMS, &r.Error, &r.RequestID); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("reading the cron runs of %s: %w", worker, err)
	}
	return out, nil
}

// SetPaused pauses (paused) or resumes the triggers of worker; by is who asked.
func (c Cron) SetPaused(ctx context.Context, worker string, paused bool, by Principal) error {
	scope := NamespaceOf(worker)
	err := c.on(ctx, true, func(ctx context.Context, db *sql.DB) error {
		if !paused {
			_, err := db.ExecContext(ctx, `DELETE FROM cron_pauses WHERE worker = ?`, worker)
			return err
		}
		_, err := db.ExecContext(ctx, `INSERT INTO cron_pauses (worker, scope, paused_at, paused_by_prefix) VALUES (?, ?, ?, ?)
			ON CONFLICT (worker) DO NOTHING`, worker, scope, c.s.now().Unix(), by.KeyPrefix)
		return err
	})
	if err != nil {
		return fmt.Errorf("pausing or resuming the cron triggers of %s: %w", worker, err)
	}
	return nil
}

// Paused returns the paused workers, by name.
func (c Cron) Paused(ctx context.Context) (map[string]CronPause, error) {
	out := map[string]CronPause{}
	err := c.on(ctx, false, func(ctx context.Context, db *sql.DB) error {
		clear(out)
		rows, err := db.QueryContext(ctx, `SELECT worker, paused_at, paused_by_prefix FROM cron_pauses`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p CronPause
			if err := rows.Scan(&p.Worker, &p.PausedAt, &p.PausedByPrefix); err != nil {
				return err
			}
			out[p.Worker] = p
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("reading the paused cron triggers: %w", err)
	}
	return out, nil
}

// Forget removes the runs and the pause of worker, removed whole: a worker uploaded later
// under its name starts with neither.
func (c Cron) Forget(ctx context.Context, worker string) error {
	err := c.on(ctx, true, func(ctx context.Context, db *sql.DB) error {
		if _, err := db.ExecContext(ctx, `DELETE FROM cron_pauses WHERE worker = ?`, worker); err != nil {
			return err
		}
		_, err := db.ExecContext(ctx, `DELETE FROM cron_runs WHERE worker = ?`, worker)
		return err
	})
	if err != nil {
		return fmt.Errorf("forgetting the cron runs of %s: %w", worker, err)
	}
	return nil
}

// truncate cuts s to at most n bytes, on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}
