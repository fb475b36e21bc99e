package keystore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tursodatabase/libsql-client-go/libsql"
	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/troubleshooting"
)

// SyncOptions configure sync mode: the store is a replica, in its local file, of a libSQL
// server (the primary) that several runtime instances share.
type SyncOptions struct {
	URL      string        // libsql://, https://, http://, wss:// or ws://; never holds the token
	Token    string        // the primary's auth token (a JWT), or ""
	Interval time.Duration // between two pulls; 0 is DefaultSyncInterval
	Logger   *zap.Logger   // nil: no logging
}

// DefaultSyncInterval is how often a replica pulls when SyncOptions.Interval is 0; it bounds
// how long a revocation on one instance takes to reach the others.
const DefaultSyncInterval = 10 * time.Second

const (
	// primaryTimeout bounds each exchange with the primary, so a primary that stops answering
	// fails a write rather than holding it.
	primaryTimeout = 5 * time.Second
	// demandEvery is the shortest time between two pulls asked for by unknown credentials.
	demandEvery = time.Second
	// demandWait bounds how long a request with an unknown credential waits for that pull.
	demandWait = 2 * time.Second
	// maxQueuedAudit bounds the audit entries kept while the primary is away; past it the
	// oldest go, with a warning.
	maxQueuedAudit = 10000
)

// ErrPrimaryUnavailable is the error of a write in sync mode while the primary cannot be
// reached or refuses the store's token.
var ErrPrimaryUnavailable = errors.New("the key store primary is unreachable")

// primaryError is a failed exchange with the primary; its message names the primary by its
// URL, never by its token.
type primaryError struct {
	url string
	err error
}

func (e *primaryError) Error() string {
	var schema *SchemaError
	if errors.As(e.err, &schema) {
		return fmt.Sprintf("the key store primary %s: %v", e.url, e.err)
	}
	if refusedToken(e.err) {
		return fmt.Sprintf("the key store primary %s refused the token (check sync_token or RUNTIME_AUTH_DB_SYNC_TOKEN): %v", e.url, e.err)
	}
	return fmt.Sprintf("the key store primary %s is unreachable: %v", e.url, e.err)
}

func (e *primaryError) Is(target error) bool { return target == ErrPrimaryUnavailable }
func (e *primaryError) Unwrap() error        { return e.err }

// refusedToken reports whether the primary answered err because of the token.
func refusedToken(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "error code 401") || strings.Contains(msg, "error code 403")
}

// busy reports whether err is a write that met another instance's write on the primary.
func busy(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked")
}

// ours reports whether err is the store's own answer (not a failure of the primary).
func ours(err error) bool {
	var in *InputError
	var exists *UnitExistsError
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrSessionNotFound) || errors.Is(err, ErrUnitNotFound) ||
		errors.As(err, &in) || errors.As(err, &exists)
}

// SyncStatus describes a sync-mode store's link to its primary.
type SyncStatus struct {
	Primary   string    // the primary's URL
	Reachable bool      // the last exchange with the primary succeeded
	Synced    bool      // the replica has pulled from the primary at least once
	LastPull  time.Time // the last pull that succeeded; zero before the first
	Error     string    // why the last exchange failed, while not Reachable
	// Interval is how often the replica pulls: it bounds how long a change written through
	// another instance (a revocation, a session's end) takes to reach this one.
	Interval time.Duration
}

// Sync returns the state of the replica, and false for a local store.
func (s *Store) Sync() (SyncStatus, bool) {
	r := s.replica
	if r == nil {
		return SyncStatus{}, false
	}
	st := SyncStatus{Primary: r.url, Reachable: !r.down.Load(), Synced: r.synced.Load(), Interval: r.interval}
	if at := r.lastPull.Load(); at != 0 {
		st.LastPull = time.Unix(0, at)
	}
	if e := r.lastErr.Load(); e != nil && !st.Reachable {
		st.Error = *e
	}
	return st, true
}

// syncedTable is a table a replica pulls by change number, with its columns (change_seq last).
type syncedTable struct{ name, cols string }

// keyTables are the key store's own tables, which Migrate copies into a new primary.
var keyTables = []syncedTable{
	{"api_keys", "id, name, key_hash, key_prefix, role, permissions, created_at, last_used_at, revoked_at, namespaces, expires_at, description, change_seq"},
	{"sessions", "id, token_hash, key_id, root_fp, created_at, expires_at, last_seen_at, user_agent, ended_at, change_seq"},
	{"audit", "id, at, actor_id, actor_name, actor_prefix, action, target, scope, outcome, request_id, remote_addr, details, change_seq"},
	{"worker_secrets", secretColumns},
	// Custom domains are settings, not archives: they go with the keys.
	{"worker_domains", domainColumns},
}

// secretsTable and domainsTable are the indexes of worker_secrets and worker_domains in
// keyTables (and syncedTables).
const (
	secretsTable = 3
	domainsTable = 4
)

// syncedTables are the tables a replica pulls by change number: keyTables, in their order,
// then the desired state's units, reload requests and traffic splits.
var syncedTables = append(slices.Clip(keyTables), syncedTable{"unit_versions", unitColumns}, syncedTable{"unit_reloads", reloadColumns},
	syncedTable{"traffic_splits", trafficColumns})

// replica keeps a sync-mode store's file up to date with the primary: it pulls the rows
// changed since its cursor every interval, and sooner when a credential is unknown.
type replica struct {
	s        *Store
	primary  *sql.DB
	url      string
	interval time.Duration
	logger   *zap.Logger

	pullMu sync.Mutex // one pull at a time
	cursor int64      // the last change number pulled, -1 before the first pull; under pullMu

	prepared atomic.Bool // the primary's schema is up to date
	synced   atomic.Bool
	down     atomic.Bool // the last exchange with the primary failed
	lastErr  atomic.Pointer[string]
	lastPull atomic.Int64 // Unix nanoseconds

	mu         sync.Mutex
	round      chan struct{} // closed when the next pull ends; nil when none is asked for
	roundOK    *atomic.Bool  // whether that pull succeeded
	lastDemand time.Time     // when the last pull asked for by a credential began
	audit      []auditRow    // entries waiting for the primary
	wake       chan struct{}
	quit, done chan struct{}
}

// openPrimary opens the primary's database handle; nothing is sent yet.
func openPrimary(opts SyncOptions) (*sql.DB, error) {
	var options []libsql.Option
	if opts.Token != "" {
		options = append(options, libsql.WithAuthToken(opts.Token))
	}
	conn, err := libsql.NewConnector(opts.URL, options...)
	if err != nil {
		return nil, fmt.Errorf("key store primary %s: %w", opts.URL, err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(4)
	db.SetConnMaxIdleTime(time.Minute)
	return db, nil
}

// preparePrimary brings the primary's schema up to date and gives it its identity; instances
// starting together may race, so a failed attempt is tried again.
func preparePrimary(ctx context.Context, db *sql.DB) (string, error) {
	var err error
	for attempt := range 5 {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
		}
		var schema *SchemaError
		if err = migrate(ctx, db); errors.As(err, &schema) {
			return "", err // waiting does not make it older
		} else if err != nil {
			continue
		}
		var id string
		if _, err = db.ExecContext(ctx, `INSERT OR IGNORE INTO store_meta (name, value) VALUES ('store_id', lower(hex(randomblob(16))))`); err != nil {
			continue
		}
		if err = db.QueryRowContext(ctx, `SELECT value FROM store_meta WHERE name = 'store_id'`).Scan(&id); err == nil {
			return id, nil
		}
	}
	return "", err
}

// startReplica links s, a freshly opened replica file, to its primary: a primary that cannot
// be reached leaves the replica serving what it holds (retrying in the background), while a
// primary that refuses the token, or is not a key store, stops the start.
func startReplica(ctx context.Context, s *Store, opts SyncOptions) (*replica, error) {
	primary, err := openPrimary(opts)
	if err != nil {
		return nil, err
	}
	r := &replica{
		s: s, primary: primary, url: opts.URL, interval: opts.Interval, logger: opts.Logger,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
	if r.interval <= 0 {
		r.interval = DefaultSyncInterval
	}
	if r.logger == nil {
		r.logger = zap.NewNop()
	}
	if r.cursor, err = metaInt(ctx, s.db, "pulled", -1); err != nil {
		primary.Close()
		return nil, err
	}
	r.synced.Store(r.cursor >= 0)
	if err := r.prepare(ctx); err != nil {
		if refusedToken(err) || !unreachable(err) {
			primary.Close()
			return nil, &primaryError{url: r.url, err: err}
		}
		r.failed(&primaryError{url: r.url, err: err})
	} else if err := r.pull(ctx); err != nil && !errors.Is(err, ErrPrimaryUnavailable) {
		primary.Close()
		return nil, err
	}
	go r.loop()
	return r, nil
}

// prepare prepares the primary (its schema and identity) unless that is done: a primary that
// was away when the instance started may come back empty.
func (r *replica) prepare(ctx context.Context) error {
	if r.prepared.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, primaryTimeout)
	defer cancel()
	if _, err := preparePrimary(ctx, r.primary); err != nil {
		return err
	}
	r.prepared.Store(true)
	return nil
}

// unreachable reports whether err means the primary could not be reached (as opposed to an
// answer from it).
func unreachable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"dial tcp", "connection refused", "connection reset", "EOF", "no such host",
		"stream is closed", "i/o timeout", "error code 5", "server misbehaving", "tls:"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// quitPulls ends the background pulls.
func (r *replica) quitPulls() {
	close(r.quit)
	<-r.done
}

// stop closes the link to the primary, after one last attempt at the queued audit entries;
// the pulls have ended.
func (r *replica) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), primaryTimeout)
	defer cancel()
	r.flushAudit(ctx)
	r.mu.Lock()
	if n := len(r.audit); n > 0 {
		r.logger.Error("key store primary unreachable at shutdown: audit entries were not stored", zap.Int("entries", n))
	}
	r.mu.Unlock()
	return r.primary.Close()
}

// failed notes a failed exchange with the primary, logging the change of state once.
func (r *replica) failed(err error) {
	msg := err.Error()
	r.lastErr.Store(&msg)
	if !r.down.Swap(true) {
		r.logger.Warn("key store primary unreachable: credentials are checked against the replica, writes answer 503",
			zap.String("primary", r.url), zap.Error(err), troubleshooting.PrimaryUnreachable.Field())
	}
}

// reached notes a successful exchange with the primary, logging the change of state once.
func (r *replica) reached() {
	if r.down.Swap(false) {
		r.logger.Info("key store primary reachable again", zap.String("primary", r.url))
	}
}

// write runs fn in a write transaction on the primary, then pulls, so this instance reads
// its own write at once.
func (r *replica) write(ctx context.Context, fn func(tx writeTx) error) error {
	if err := r.exchange(ctx, func(ctx context.Context) error { return runWrite(ctx, r.primary, fn) }); err != nil {
		return err
	}
	if err := r.pull(ctx); err != nil {
		r.logger.Warn("wrote to the key store primary but could not read the change back; it reaches this instance at the next pull",
			zap.Error(err))
	}
	return nil
}

// exchange runs fn, a write, against the prepared primary, each attempt bounded by
// primaryTimeout; an attempt that meets another instance's write is tried again. The store's
// own refusals come back as they are; any other failure is a primaryError.
func (r *replica) exchange(ctx context.Context, fn func(ctx context.Context) error) error {
	var err error
	for attempt := range 20 {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
		}
		if err = r.prepare(ctx); err != nil {
			break
		}
		wctx, cancel := context.WithTimeout(ctx, primaryTimeout)
		err = fn(wctx)
		cancel()
		if err == nil || ours(err) || !busy(err) {
			break
		}
	}
	if err != nil && !ours(err) {
		perr := &primaryError{url: r.url, err: err}
		r.failed(perr)
		return perr
	}
	r.reached()
	return err
}

// loop pulls every interval (sooner after a failure, with back-off up to the interval), and
// when a credential asks for it, at most once per demandEvery.
func (r *replica) loop() {
	defer close(r.done)
	backoff := time.Second
	first := r.interval
	if r.down.Load() {
		first = min(backoff, r.interval) // away at the start: try again soon
	}
	timer := time.NewTimer(first)
	defer timer.Stop()
	for {
		demanded := false
		select {
		case <-r.quit:
			return
		case <-timer.C:
		case <-r.wake:
			demanded = true
			r.mu.Lock()
			wait := time.Until(r.lastDemand.Add(demandEvery))
			r.mu.Unlock()
			if wait > 0 {
				select {
				case <-time.After(wait):
				case <-r.quit:
					return
				}
			}
		}
		r.mu.Lock()
		done, ok := r.round, r.roundOK
		r.round, r.roundOK = nil, nil
		if demanded {
			r.lastDemand = time.Now()
		}
		r.mu.Unlock()
		err := r.pull(context.Background())
		if done != nil {
			ok.Store(err == nil)
			close(done)
		}
		next := r.interval
		if err != nil {
			next, backoff = min(backoff, r.interval), min(backoff*2, r.interval)
		} else {
			backoff = time.Second
			ctx, cancel := context.WithTimeout(context.Background(), primaryTimeout)
			r.flushAudit(ctx)
			cancel()
			r.s.usage.kick()
			r.s.seen.kick()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// demand asks for a pull that begins after the call (a credential this instance does not
// know may have been created on another) and waits for it, at most demandWait. It reports
// whether such a pull succeeded.
func (r *replica) demand(ctx context.Context) bool {
	r.mu.Lock()
	if r.round == nil {
		r.round, r.roundOK = make(chan struct{}), &atomic.Bool{}
	}
	done, ok := r.round, r.roundOK
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(demandWait)
	defer t.Stop()
	select {
	case <-done:
		return ok.Load()
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// unknown answers a credential the replica does not hold: look again (true) once a pull that
// began after the call succeeded; otherwise the credential stays unknown, unless the replica
// has never pulled, when no credential can be checked yet (an ErrPrimaryUnavailable).
func (r *replica) unknown(ctx context.Context) (bool, error) {
	if r.demand(ctx) {
		return true, nil
	}
	if r.synced.Load() {
		return false, nil
	}
	msg := "no pull has succeeded yet"
	if e := r.lastErr.Load(); e != nil {
		msg = *e
	}
	return false, fmt.Errorf("%w: the replica holds no keys yet (%s)", ErrPrimaryUnavailable, msg)
}

// pull copies the rows changed on the primary since the cursor into the replica, in one local
// transaction, and ends the cached verifications they may change.
//
// The primary is read in one read transaction, so the counter and the rows are of one moment:
// read one by one, a row changed in between would carry a number above the counter and be
// missing until the next pull. Change numbers commit in order, so every change up to the
// counter is there.
func (r *replica) pull(ctx context.Context) error {
	r.pullMu.Lock()
	defer r.pullMu.Unlock()
	err := r.pullLocked(ctx)
	if err != nil {
		perr := &primaryError{url: r.url, err: err}
		r.failed(perr)
		return perr
	}
	r.reached()
	r.lastPull.Store(time.Now().UnixNano())
	return nil
}

func (r *replica) pullLocked(ctx context.Context) error {
	if err := r.prepare(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, primaryTimeout)
	defer cancel()
	tx, err := r.primary.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // it only read
	meta, err := readMeta(ctx, tx)
	if err != nil {
		return err
	}
	upto, err := strconv.ParseInt(meta["change_seq"], 10, 64)
	if err != nil {
		return fmt.Errorf("the primary's change number %q: %w", meta["change_seq"], err)
	}
	local, err := readMeta(ctx, r.s.db)
	if err != nil {
		return err
	}
	cursor := r.cursor
	if local["primary_id"] != meta["store_id"] {
		cursor = -1 // another primary (or the first pull): start over from its first row
	}
	// The instances' rows carry no change number (see Store.Heartbeat): a few rows, read whole.
	instances, err := readAll(ctx, tx, `SELECT `+instanceColumns+` FROM instances`, instanceColumns)
	if err != nil {
		return err
	}
	if cursor >= upto && cursor >= 0 {
		if err := r.applyInstances(ctx, instances); err != nil {
			return fmt.Errorf("applying the pulled instances to the replica: %w", err)
		}
		return nil
	}
	pulled := make([][][]any, len(syncedTables))
	for i, t := range syncedTables {
		if pulled[i], err = readRows(ctx, tx, t.name, t.cols, cursor, upto); err != nil {
			return err
		}
	}
	if err := r.apply(ctx, pulled, instances, cursor < 0, upto, meta); err != nil {
		return fmt.Errorf("applying the pulled rows to the replica: %w", err)
	}
	r.cursor = upto
	r.synced.Store(true)
	if len(pulled[0]) > 0 || cursor < 0 {
		r.s.keysChanged()
	}
	if len(pulled[0])+len(pulled[1]) > 0 || cursor < 0 {
		r.s.invalidate()
	}
	if len(pulled[len(keyTables)])+len(pulled[len(keyTables)+1]) > 0 || cursor < 0 { // unit_versions, unit_reloads
		r.s.Feed.publish(UnitsTopic)
	}
	if len(pulled[len(keyTables)+2]) > 0 || cursor < 0 { // traffic_splits
		r.s.Feed.publish(TrafficTopic)
	}
	if len(pulled[secretsTable]) > 0 || cursor < 0 {
		r.s.Feed.publish(SecretsTopic)
	}
	if len(pulled[domainsTable]) > 0 || cursor < 0 {
		r.s.Feed.publish(DomainsTopic)
	}
	return nil
}

// applyInstances replaces the replica's instance rows with those pulled.
func (r *replica) applyInstances(ctx context.Context, instances [][]any) error {
	tx, err := r.s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := replaceInstances(ctx, tx, instances); err != nil {
		return err
	}
	return tx.Commit()
}

// replaceInstances replaces the instance rows in tx with rows (in instanceColumns).
func replaceInstances(ctx context.Context, tx *sql.Tx, rows [][]any) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM instances`); err != nil {
		return err
	}
	return insertRows(ctx, tx, "INSERT", "instances", instanceColumns, rows)
}

// insertRows inserts rows, in the columns cols, into table with verb (INSERT, or INSERT OR
// REPLACE).
func insertRows(ctx context.Context, tx *sql.Tx, verb, table, cols string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	n := strings.Count(cols, ",") + 1
	stmt, err := tx.PrepareContext(ctx, verb+` INTO `+table+` (`+cols+`) VALUES (?`+strings.Repeat(", ?", n-1)+`)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, row := range rows {
		if _, err := stmt.ExecContext(ctx, row...); err != nil {
			return err
		}
	}
	return nil
}

// apply writes pulled rows (by syncedTables) and the instance rows into the replica in one
// transaction, with the new cursor and the primary's identity and salt; restart empties the
// replica first.
func (r *replica) apply(ctx context.Context, pulled [][][]any, instances [][]any, restart bool, upto int64, meta map[string]string) error {
	tx, err := r.s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for i, t := range syncedTables {
		if restart {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+t.name); err != nil {
				return err
			}
		}
		if err := insertRows(ctx, tx, "INSERT OR REPLACE", t.name, t.cols, pulled[i]); err != nil {
			return err
		}
	}
	if err := replaceInstances(ctx, tx, instances); err != nil {
		return err
	}
	// Expired sessions go here as on the primary: a deletion is not pulled.
	if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, r.s.now().Unix()); err != nil {
		return err
	}
	for name, value := range map[string]string{"pulled": strconv.FormatInt(upto, 10), "primary_id": meta["store_id"], "root_salt": meta["root_salt"]} {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO store_meta (name, value) VALUES (?, ?)`, name, value); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return r.s.setSalt(meta["root_salt"])
}

// readRows reads the columns cols of table's rows with a change number in (after, upto].
func readRows(ctx context.Context, db queryer, table, cols string, after, upto int64) ([][]any, error) {
	rows, err := readAll(ctx, db, `SELECT `+cols+` FROM `+table+` WHERE change_seq > ? AND change_seq <= ?`, cols, after, upto)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", table, err)
	}
	return rows, nil
}

// readAll runs query, which selects the columns cols, and returns its rows as read.
func readAll(ctx context.Context, db queryer, query, cols string, args ...any) ([][]any, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	n := strings.Count(cols, ",") + 1
	var out [][]any
	for rows.Next() {
		row := make([]any, n)
		ptrs := make([]any, n)
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// queryer runs queries; *sql.DB and *sql.Tx are queryers.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readMeta reads the store_meta table.
func readMeta(ctx context.Context, db queryer) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT name, value FROM store_meta`)
	if err != nil {
		return nil, fmt.Errorf("reading the store's settings: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, fmt.Errorf("reading the store's settings: %w", err)
		}
		out[name] = value
	}
	return out, rows.Err()
}

// metaInt reads the integer setting name from store_meta, or def when it is not set.
func metaInt(ctx context.Context, db *sql.DB, name string, def int64) (int64, error) {
	var v string
	err := db.QueryRowContext(ctx, `SELECT value FROM store_meta WHERE name = ?`, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return def, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the store's %s: %w", name, err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the store's %s %q is damaged", name, v)
	}
	return n, nil
}

// appendAudit stores an audit entry on the primary, or, while the primary is away, queues it
// for the next successful pull: an audited action never fails for its entry.
func (r *replica) appendAudit(ctx context.Context, row auditRow) error {
	if !r.down.Load() {
		err := r.s.write(ctx, func(tx writeTx) error { return insertAudit(ctx, tx, row) })
		if !errors.Is(err, ErrPrimaryUnavailable) {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.audit) >= maxQueuedAudit {
		r.audit = r.audit[1:]
		r.logger.Warn("key store primary unreachable: dropped the oldest queued audit entry", zap.Int("queued", maxQueuedAudit))
	}
	r.audit = append(r.audit, row)
	return nil
}

// flushAudit writes the queued audit entries to the primary in one transaction; on failure
// they stay queued.
func (r *replica) flushAudit(ctx context.Context) {
	r.mu.Lock()
	batch := r.audit
	r.audit = nil
	r.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	err := r.s.write(ctx, func(tx writeTx) error {
		for _, row := range batch {
			if err := insertAudit(ctx, tx, row); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		r.mu.Lock()
		r.audit = append(batch, r.audit...)
		r.mu.Unlock()
		return
	}
	r.logger.Info("stored the audit entries queued while the key store primary was away", zap.Int("entries", len(batch)))
}
