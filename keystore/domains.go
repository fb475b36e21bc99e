package keystore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Domains is the store's worker_domains table: the custom domains attached to workers,
// pending or verified, with their tombstones.
type Domains struct{ s *Store }

// ErrDomainTaken is an attach of a domain that another worker holds verified.
var ErrDomainTaken = errors.New("the domain is attached to another worker")

// ErrDomainNotFound is a change to a domain the worker does not hold.
var ErrDomainNotFound = errors.New("no such domain")

// ErrTooManyPending is an attach that would give a namespace more pending claims than its cap.
var ErrTooManyPending = errors.New("too many pending custom domains")

// PendingDomainTTL is how long a claim of a custom domain stays pending: one its TXT record
// has not verified by then is dropped (no longer listed, counted or in anyone's way), so a
// claim made of a name its claimant does not control does not hold the name forever.
const PendingDomainTTL = 7 * 24 * time.Hour

// WorkerDomain is a custom domain attached to a worker: served once a DNS TXT record proved the
// attacher controls it (VerifiedAt set). While pending, several workers may claim one domain,
// each with a token of its own; the first verified takes it and the other claims are dropped. Removed domains stay as tombstones (RemovedAt set) so
// that every instance learns of the removal. Times are Unix seconds.
type WorkerDomain struct {
	Domain          string // lower case, no trailing dot
	Worker          string // "app" or "@team/app"
	Scope           string // the namespace of Worker, "" when unscoped
	Token           string // the value the TXT record must hold
	VerifiedAt      int64  // 0 until verified
	CheckedAt       int64  // the last check, 0 before any
	CheckError      string // why the last check failed, "" when it passed or none ran
	RemovedAt       int64
	CreatedAt       int64
	ChangedByID     int64
	ChangedByPrefix string
	Change          int64
}

// Verified reports whether the domain is served.
func (d WorkerDomain) Verified() bool { return d.VerifiedAt != 0 && d.RemovedAt == 0 }

// domainColumns are the columns of worker_domains, change_seq last (as syncedTables wants).
const domainColumns = "domain, worker, scope, token, verified_at, checked_at, check_error, removed_at, created_at, changed_by_id, changed_by_prefix, change_seq"

func scanDomain(row scanner) (WorkerDomain, error) {
	var d WorkerDomain
	err := row.Scan(&d.Domain, &d.Worker, &d.Scope, &d.Token, &d.VerifiedAt, &d.CheckedAt, &d.CheckError, &d.RemovedAt, &d.CreatedAt,
		&d.ChangedByID, &d.ChangedByPrefix, &d.Change)
	return d, err
}

// newToken returns a fresh verification token: 128 random bits in hex.
func newToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("keystore: no randomness: " + err.Error())
	}
	return "runtime-" + hex.EncodeToString(b)
}

// Attach attaches domain (checked by the caller) to worker, by by, and returns its row:
// a new claim with a fresh token, or the live one when the worker holds it already. A domain
// another worker holds verified is ErrDomainTaken; one it holds pending blocks nothing (whoever
// verifies first gets it). A new claim that would give the worker's namespace more than
// maxPending pending claims is ErrTooManyPending (no cap when maxPending <= 0).
func (f Domains) Attach(ctx context.Context, domain, worker string, maxPending int, by Principal) (WorkerDomain, error) {
	s := f.s
	defer s.timed("attach_domain")()
	if err := checkRef(UnitRef{Kind: UnitWorker, Name: worker}, true); err != nil {
		return WorkerDomain{}, err
	}
	if err := checkText("domain", "BAD_REQUEST", domain, 253); err != nil {
		return WorkerDomain{}, err
	}
	var out WorkerDomain
	err := s.write(ctx, func(tx writeTx) error {
		now := s.now().Unix()
		if err := dropExpired(ctx, tx, now, `domain = ?`, domain); err != nil {
			return err
		}
		claims, err := readDomains(ctx, tx, `removed_at = 0 AND domain = ?`, domain)
		if err != nil {
			return err
		}
		for _, d := range claims {
			switch {
			case d.Worker == worker:
				out = d
				return nil
			case d.Verified():
				return ErrDomainTaken
			}
		}
		scope := NamespaceOf(worker)
		if maxPending > 0 {
			if err := dropExpired(ctx, tx, now, `scope = ?`, scope); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM worker_domains WHERE scope = ? AND removed_at = 0 AND verified_at = 0`,
				scope).Scan(&n); err != nil {
				return fmt.Errorf("counting the pending domains: %w", err)
			}
			if n >= maxPending {
				return ErrTooManyPending
			}
		}
		out = WorkerDomain{Domain: domain, Worker: worker, Scope: scope, Token: newToken(), CreatedAt: now,
			ChangedByID: by.ID, ChangedByPrefix: by.KeyPrefix, Change: tx.seq}
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO worker_domains (`+domainColumns+`) VALUES (?, ?, ?, ?, 0, 0, '', 0, ?, ?, ?, ?)`,
			domain, worker, scope, out.Token, now, by.ID, by.KeyPrefix, tx.seq)
		if err != nil {
			return fmt.Errorf("attaching domain %s: %w", domain, err)
		}
		return nil
	})
	if err != nil {
		return WorkerDomain{}, err
	}
	f.s.Feed.publish(DomainsTopic)
	return out, nil
}

// DropExpired drops the claims still pending PendingDomainTTL after they were made,
// as tombstones every instance learns of, and returns how many went. Listings skip them
// already; this keeps the table and the router's view of pending names current. A store
// holding none writes nothing.
func (f Domains) DropExpired(ctx context.Context) (int, error) {
	s := f.s
	defer s.timed("drop_expired_domains")()
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM worker_domains WHERE removed_at = 0 AND verified_at = 0 AND created_at <= ?`,
		pendingSince(s.now().Unix())).Scan(&n); err != nil || n == 0 {
		return 0, err
	}
	err := s.write(ctx, func(tx writeTx) error { return dropExpired(ctx, tx, s.now().Unix(), `1 = 1`) })
	if err != nil {
		return 0, err
	}
	f.s.Feed.publish(DomainsTopic)
	return n, nil
}

// pendingSince is the creation time before which a pending claim has expired at now.
func pendingSince(now int64) int64 { return now - int64(PendingDomainTTL/time.Second) }

// dropExpired tombstones the pending claims matching where (with args) older than
// PendingDomainTTL at now, so every instance learns that they went.
func dropExpired(ctx context.Context, tx writeTx, now int64, where string, args ...any) error {
	_, err := tx.ExecContext(ctx, `UPDATE worker_domains SET removed_at = ?, change_seq = ?
		WHERE removed_at = 0 AND verified_at = 0 AND created_at <= ? AND `+where, append([]any{now, tx.seq, pendingSince(now)}, args...)...)
	if err != nil {
		return fmt.Errorf("dropping expired domain claims: %w", err)
	}
	return nil
}

// RecordCheck stores the outcome of a DNS check of worker's domain: verified, or the
// reason it failed (a verified domain stays verified). The first claim verified takes the
// domain: the other workers' pending claims of it are dropped, and a check that passes after
// another worker's claim was verified is ErrDomainTaken. It returns the row as stored.
func (f Domains) RecordCheck(ctx context.Context, domain, worker string, verified bool, reason string) (WorkerDomain, error) {
	s := f.s
	defer s.timed("check_domain")()
	var out WorkerDomain
	err := s.write(ctx, func(tx writeTx) error {
		now := s.now().Unix()
		if verified {
			var held int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM worker_domains WHERE domain = ? AND worker != ? AND removed_at = 0 AND verified_at != 0`,
				domain, worker).Scan(&held); err != nil {
				return fmt.Errorf("reading domain %s: %w", domain, err)
			}
			if held > 0 {
				return ErrDomainTaken
			}
		}
		verifiedAt := "verified_at"
		if verified {
			verifiedAt = "CASE WHEN verified_at = 0 THEN ? ELSE verified_at END"
		}
		args := []any{}
		if verified {
			args = append(args, now)
		}
		args = append(args, now, reason, tx.seq, domain, worker, pendingSince(now))
		// An expired claim is not revived by a check: its claimant attaches it again.
		res, err := tx.ExecContext(ctx, `UPDATE worker_domains SET verified_at = `+verifiedAt+`, checked_at = ?, check_error = ?, change_seq = ?
			WHERE domain = ? AND worker = ? AND removed_at = 0 AND (verified_at != 0 OR created_at > ?)`, args...)
		if err != nil {
			return fmt.Errorf("recording the check of domain %s: %w", domain, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrDomainNotFound
		}
		if verified {
			if _, err := tx.ExecContext(ctx, `UPDATE worker_domains SET removed_at = ?, change_seq = ?
				WHERE domain = ? AND worker != ? AND removed_at = 0`, now, tx.seq, domain, worker); err != nil {
				return fmt.Errorf("dropping the other claims of domain %s: %w", domain, err)
			}
		}
		out, err = scanDomain(tx.QueryRowContext(ctx, `SELECT `+domainColumns+` FROM worker_domains WHERE domain = ? AND worker = ?`, domain, worker))
		return err
	})
	if err != nil {
		return WorkerDomain{}, err
	}
	f.s.Feed.publish(DomainsTopic)
	return out, nil
}

// Remove detaches domain from worker, by by.
func (f Domains) Remove(ctx context.Context, domain, worker string, by Principal) error {
	return f.RemoveAudited(ctx, domain, worker, by, nil)
}

// RemoveAudited is Domains.Remove that also stores e, the detach's audit entry, in the
// same transaction (none when e is nil).
func (f Domains) RemoveAudited(ctx context.Context, domain, worker string, by Principal, e *AuditEntry) error {
	s := f.s
	defer s.timed("remove_domain")()
	err := s.write(ctx, func(tx writeTx) error {
		now := s.now().Unix()
		res, err := tx.ExecContext(ctx, `UPDATE worker_domains SET removed_at = ?, changed_by_id = ?, changed_by_prefix = ?, change_seq = ?
			WHERE domain = ? AND worker = ? AND removed_at = 0`, now, by.ID, by.KeyPrefix, tx.seq, domain, worker)
		if err != nil {
			return fmt.Errorf("removing domain %s: %w", domain, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrDomainNotFound
		}
		return s.Audit.appendIn(ctx, tx, e)
	})
	if err != nil {
		return err
	}
	f.s.Feed.publish(DomainsTopic)
	return nil
}

// List returns the live domains as this instance holds them, of worker only when worker is
// not "", by domain: the verified ones and the pending claims not expired (several workers
// may claim one domain while it is pending).
func (f Domains) List(ctx context.Context, worker string) ([]WorkerDomain, error) {
	s := f.s
	defer s.timed("list_domains")()
	return readDomains(ctx, s.db, `removed_at = 0 AND (verified_at != 0 OR created_at > ?) AND (? = '' OR worker = ?)`,
		pendingSince(s.now().Unix()), worker, worker)
}

// readDomains reads the rows of worker_domains matching where (with args), by domain and
// worker.
func readDomains(ctx context.Context, db queryer, where string, args ...any) ([]WorkerDomain, error) {
	rows, err := db.QueryContext(ctx, `SELECT `+domainColumns+` FROM worker_domains WHERE `+where+` ORDER BY domain, worker`, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the domains: %w", err)
	}
	defer rows.Close()
	out := []WorkerDomain{}
	for rows.Next() {
		d, err := scanDomain(rows)
		if err != nil {
			return nil, fmt.Errorf("reading the domains: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
