package keystore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Audit is the store's audit table: the trail of audited actions, newest first.
type Audit struct{ s *Store }

// AuditEntry is one audited action. It never holds a secret: actors are named by id, name and
// key prefix, and details are what the action's audit line says besides.
type AuditEntry struct {
	ID     int64
	Time   time.Time
	Actor  *AuditActor // nil when nobody was authenticated (a refused login)
	Action string      // e.g. key.create, worker.upload
	Target string      // the object as people know it: "ci (#12)", "@team/app@1.2.0"
	// Scope is the namespace the entry is about ("@team"), "" when it is about no scoped unit;
	// keys restricted to namespaces see only entries of theirs.
	Scope      string
	Outcome    string // success, denied or failed
	RequestID  string
	RemoteAddr string
	Details    map[string]any
}

// AuditActor is who did an audited action.
type AuditActor struct {
	ID        int64
	Name      string
	KeyPrefix string
}

// AuditQuery selects entries, newest first. Zero fields select everything.
type AuditQuery struct {
	Action string    // exact action, or a family ending in "." ("worker.")
	Actor  string    // the actor's name or key prefix, exactly
	Target string    // entries whose target contains it
	Since  time.Time // at or after
	Until  time.Time // before
	// Scopes, when not nil, keeps only entries about these namespaces (a restricted key's).
	Scopes []string
	Before int64 // the cursor: entries with a smaller id
	Limit  int
}

// Append stores an audited action; e.Time defaults to now.
func (f Audit) Append(ctx context.Context, e AuditEntry) error {
	s := f.s
	defer s.timed("append_audit")()
	row, err := f.row(e)
	if err != nil {
		return err
	}
	if s.replica != nil {
		return s.replica.appendAudit(ctx, row)
	}
	return s.write(ctx, func(tx writeTx) error { return insertAudit(ctx, tx, row) })
}

// row is the row of e, its time now when e has none.
func (f Audit) row(e AuditEntry) (auditRow, error) {
	s := f.s
	if e.Time.IsZero() {
		e.Time = s.now()
	}
	details := []byte("{}")
	if len(e.Details) > 0 {
		var err error
		if details, err = json.Marshal(e.Details); err != nil {
			return auditRow{}, fmt.Errorf("encoding audit details: %w", err)
		}
	}
	var actorID any
	var name, prefix string
	if e.Actor != nil {
		actorID, name, prefix = e.Actor.ID, e.Actor.Name, e.Actor.KeyPrefix
	}
	return auditRow{e.Time.UnixMilli(), actorID, name, prefix, e.Action, e.Target, e.Scope, e.Outcome, e.RequestID, e.RemoteAddr, string(details)}, nil
}

// appendIn stores e in tx, the transaction of the change it records, so that the change and
// its entry are written together or not at all (a crash between two writes left a key
// without its key.create entry). A nil e stores nothing.
func (f Audit) appendIn(ctx context.Context, tx writeTx, e *AuditEntry) error {
	if e == nil {
		return nil
	}
	row, err := f.row(*e)
	if err != nil {
		return err
	}
	return insertAudit(ctx, tx, row)
}

// auditRow is an audit entry's columns, in the order insertAudit writes them.
type auditRow [11]any

// insertAudit stores an audit entry in tx.
func insertAudit(ctx context.Context, tx writeTx, row auditRow) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO audit
		(at, actor_id, actor_name, actor_prefix, action, target, scope, outcome, request_id, remote_addr, details, change_seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, append(row[:], tx.seq)...)
	if err != nil {
		return fmt.Errorf("storing an audit entry: %w", err)
	}
	return nil
}

// List returns up to q.Limit entries matching q, newest first, and whether more follow
// (then the last entry's id is the next page's Before).
func (f Audit) List(ctx context.Context, q AuditQuery) ([]AuditEntry, bool, error) {
	s := f.s
	defer s.timed("list_audit")()
	var where []string
	var args []any
	add := func(cond string, a ...any) { where = append(where, cond); args = append(args, a...) }
	switch {
	case strings.HasSuffix(q.Action, "."):
		add(`substr(action, 1, ?) = ?`, len(q.Action), q.Action)
	case q.Action != "":
		add(`action = ?`, q.Action)
	}
	if q.Actor != "" {
		add(`(actor_name = ? OR actor_prefix = ?)`, q.Actor, q.Actor)
	}
	if q.Target != "" {
		add(`instr(target, ?) > 0`, q.Target)
	}
	if !q.Since.IsZero() {
		add(`at >= ?`, q.Since.UnixMilli())
	}
	if !q.Until.IsZero() {
		add(`at < ?`, q.Until.UnixMilli())
	}
	if q.Scopes != nil {
		if len(q.Scopes) == 0 {
			return []AuditEntry{}, false, nil
		}
		add(`scope IN (?`+strings.Repeat(`, ?`, len(q.Scopes)-1)+`)`, anySlice(q.Scopes)...)
	}
	if q.Before > 0 {
		add(`id < ?`, q.Before)
	}
	query := `SELECT id, at, actor_id, actor_name, actor_prefix, action, target, scope, outcome, request_id, remote_addr, details FROM audit`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	limit := max(q.Limit, 1)
	query += fmt.Sprintf(` ORDER BY id DESC LIMIT %d`, limit+1)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, false, fmt.Errorf("reading the audit trail: %w", err)
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var e AuditEntry
		var at int64
		var actorID *int64
		var name, prefix, details string
		if err := rows.Scan(&e.ID, &at, &actorID, &name, &prefix, &e.Action, &e.Target, &e.Scope, &e.Outcome,
			&e.RequestID, &e.RemoteAddr, &details); err != nil {
			return nil, false, fmt.Errorf("reading the audit trail: %w", err)
		}
		e.Time = time.UnixMilli(at)
		if actorID != nil {
			e.Actor = &AuditActor{ID: *actorID, Name: name, KeyPrefix: prefix}
		}
		if err := json.Unmarshal([]byte(details), &e.Details); err != nil {
			return nil, false, fmt.Errorf("audit entry %d: its details are damaged: %w", e.ID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("reading the audit trail: %w", err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// Prune deletes the entries older than before and returns how many went.
func (f Audit) Prune(ctx context.Context, before time.Time) (int64, error) {
	s := f.s
	defer s.timed("prune_audit")()
	var n int64
	err := s.write(ctx, func(tx writeTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM audit WHERE at < ?`, before.UnixMilli())
		if err != nil {
			return fmt.Errorf("pruning the audit trail: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	if s.replica != nil {
		// The replica drops the same entries itself: a deletion is not pulled.
		if _, lerr := s.db.ExecContext(ctx, `DELETE FROM audit WHERE at < ?`, before.UnixMilli()); lerr != nil && err == nil {
			err = fmt.Errorf("pruning the audit trail: %w", lerr)
		}
	}
	return n, err
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
