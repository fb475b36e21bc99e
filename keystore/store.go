// Package keystore is the runtime's database: one libSQL (SQLite) file, local or a replica of
// a primary (sync mode), whose tables are
//
//   - api_keys: the API keys (only each key's SHA-256; a role or explicit permissions and a
//     namespace list), verified in constant time and cached;
//   - sessions: the management panel's logins;
//   - audit: the audit trail;
//   - instances: the heartbeats of a cluster's instances;
//   - unit_versions and unit_reloads: the desired state (the uploaded unit versions, the
//     reload requests);
//   - traffic_splits: the workers' traffic splits;
//   - worker_domains: the workers' custom domains;
//   - worker_secrets: the workers' secrets, sealed;
//   - cron_lease, cron_runs and cron_pauses: which instance runs the cron ticks, the last runs
//     of each worker's triggers, the paused workers (on the primary in sync mode);
//   - store_meta: the file's own records (its id, mode, change counter and salt).
//
// A Store keeps the keys and the instances itself; each other concern is a facet of it, a
// field holding a small value that points back at the store: Store.Sessions, Store.Audit,
// Store.Units, Store.Traffic, Store.Domains, Store.Secrets and Store.Cron.
package keystore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/tursodatabase/libsql-client-go/libsql" // the libsql driver
	_ "modernc.org/sqlite"                               // the "sqlite" driver libsql uses for file: URLs
)

// Key format: "rtk_" followed by 32 random bytes in unpadded base64url (43 characters).
const (
	KeyPrefix       = "rtk_"
	keyRandomBytes  = 32
	keyLength       = len(KeyPrefix) + 43
	KeyPrefixLength = 12 // characters of a key shown as its keyPrefix
)

// Errors.
var (
	ErrInvalidKey      = errors.New("unknown, revoked or expired API key")
	ErrNotFound        = errors.New("no such API key")
	ErrInvalidSession  = errors.New("unknown, ended or expired session")
	ErrSessionNotFound = errors.New("no such session")
)

// KeyRecord is a stored key as listed, without its secret. Times are Unix seconds, 0 when
// unset (never used, never expires).
type KeyRecord struct {
	ID          int64
	Name        string
	Description string
	KeyPrefix   string
	Role        string
	Permissions []string
	Namespaces  []string
	CreatedAt   int64
	LastUsedAt  int64
	ExpiresAt   int64
}

// Principal returns the principal the key resolves to.
func (k KeyRecord) Principal() Principal {
	return Principal{ID: k.ID, Name: k.Name, KeyPrefix: k.KeyPrefix, Role: k.Role,
		Permissions: k.Permissions, Namespaces: k.Namespaces, ExpiresAt: k.ExpiresAt}
}

// Expired reports whether the key has expired at now.
func (k KeyRecord) Expired(now time.Time) bool {
	return k.ExpiresAt != 0 && now.Unix() >= k.ExpiresAt
}

// NewKey describes a key to create.
type NewKey struct {
	Name        string
	Description string
	Role        string   // empty: DefaultRole
	Permissions []string // role custom only
	Namespaces  []string // empty: ["*"]
	ExpiresAt   int64    // Unix seconds; 0 never
}

// Created is a new key with its secret, which is never available again.
type Created struct {
	KeyRecord
	Secret string
}

// Store is the runtime's database. It holds the API keys itself; its other tables are
// reached through its facets, one per concern, each a small value pointing back at the store.
type Store struct {
	Sessions Sessions // the management panel's sessions
	Audit    Audit    // the audit trail
	Units    Units    // the desired state: unit versions and reload requests
	Traffic  Traffic  // the workers' traffic splits
	Secrets  Secrets  // the workers' sealed secrets
	Domains  Domains  // the workers' custom domains
	Cron     Cron     // the cron lease, the runs of cron triggers and their pauses
	// Feed announces the changes of units, traffic splits, secrets and domains, made here
	// or pulled from the primary, to the parts that follow them.
	Feed Feed

	db      *sql.DB
	dir     string     // the folder of the store's file, which also holds BootstrapFile
	writeMu sync.Mutex // one writer at a time; SQLite allows no more
	now     func() time.Time
	// gen counts the writes that end a credential: revocations and ended sessions. A cached
	// verification carries the generation read before its rows were, and serves only while that
	// generation is current, so a read that raced such a write is never served after it.
	gen      atomic.Uint64
	keys     verifyCache[KeyRecord]
	sessions verifyCache[sessionEntry]
	usage    *usageRecorder // keys' lastUsedAt
	seen     *usageRecorder // sessions' lastSeenAt
	rootSalt []byte         // under rootMu: a replica takes its primary's
	rootFPs  sync.Map       // SHA-256 of a root key → its fingerprint
	rootMu   sync.Mutex     // one derivation of a root fingerprint at a time
	replica  *replica       // nil for a local store

	closeOnce sync.Once
	closeErr  error
	// listGen counts the writes to the keys' rows; listed is the last listing with the
	// generation read before its rows were, served while that generation is current. The store
	// is the only writer of its file, so no other change can make it stale.
	listGen atomic.Uint64
	listed  atomic.Pointer[listing]
	// The reads of a verification and of the key listing, prepared once: parsing SQL would
	// cost more than running it.
	keyByHash, keyByID, sessionByHash, listKeys *sql.Stmt
	observer                                    atomic.Pointer[Observer]
}

// Open opens the local key store at path and migrates its schema. A new store is created
// only where no file exists: an empty, damaged or foreign file is refused with an error
// naming it, since starting on it would silently lose every key.
func Open(ctx context.Context, path string) (*Store, error) {
	return open(ctx, path, nil)
}

// OpenSync opens the key store at path as a replica of the primary opts names (sync mode):
// credentials are checked against the replica, writes go to the primary first. A primary
// that cannot be reached leaves the store serving what the replica holds; one that refuses
// the token is an error.
func OpenSync(ctx context.Context, path string, opts SyncOptions) (*Store, error) {
	return open(ctx, path, &opts)
}

func open(ctx context.Context, path string, sync *SyncOptions) (*Store, error) {
	path, err := filepath.Abs(path) // a file: URL takes absolute paths only
	if err != nil {
		return nil, fmt.Errorf("key store %s: %w", path, err)
	}
	mode := modeLocal
	if sync != nil {
		mode = modeSync
	}
	if err := prepareFile(ctx, path, mode); err != nil {
		return nil, err
	}
	db, err := openDB(path)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, dir: filepath.Dir(path), now: time.Now}
	s.Sessions, s.Audit, s.Units, s.Traffic, s.Secrets, s.Domains, s.Cron = Sessions{s}, Audit{s}, Units{s}, Traffic{s}, Secrets{s}, Domains{s}, Cron{s}
	fail := func(format string, args ...any) (*Store, error) {
		s.closeStatements()
		db.Close()
		return nil, fmt.Errorf(format, args...)
	}
	if err := migrate(ctx, db); err != nil {
		return fail("key store %s: %w", path, err)
	}
	if err := checkMode(ctx, db, path, mode); err != nil {
		return fail("%w", err)
	}
	var salt string
	if err := db.QueryRowContext(ctx, `SELECT value FROM store_meta WHERE name = 'root_salt'`).Scan(&salt); err != nil {
		return fail("key store %s: reading its salt: %v", path, err)
	}
	if err := s.setSalt(salt); err != nil {
		return fail("key store %s: %v", path, err)
	}
	if err := s.prepare(ctx); err != nil {
		return fail("key store %s: %v", path, err)
	}
	s.usage = newUsageRecorder(s.write,
		`UPDATE api_keys SET last_used_at = ?, change_seq = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`, s.keysChanged)
	s.seen = newUsageRecorder(s.write,
		`UPDATE sessions SET last_seen_at = ?, change_seq = ? WHERE id = ? AND last_seen_at < ?`, func() {})
	if sync != nil {
		if s.replica, err = startReplica(ctx, s, *sync); err != nil {
			s.usage.stop()
			s.seen.stop()
			return fail("%w", err)
		}
	}
	return s, nil
}

// setSalt sets the salt of root fingerprints (hex), forgetting those derived with another.
func (s *Store) setSalt(salt string) error {
	b, err := hex.DecodeString(salt)
	if err != nil || len(b) == 0 {
		return errors.New("its salt is damaged; restore the file from a backup")
	}
	s.rootMu.Lock()
	defer s.rootMu.Unlock()
	if !bytes.Equal(b, s.rootSalt) {
		s.rootSalt = b
		s.rootFPs.Clear()
	}
	return nil
}

// prepare prepares the statements of a verification and of the key listing.
func (s *Store) prepare(ctx context.Context) error {
	for _, st := range []struct {
		stmt  **sql.Stmt
		query string
	}{
		{&s.keyByHash, `SELECT ` + keyColumns + `, key_hash FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL`},
		{&s.keyByID, `SELECT ` + keyColumns + ` FROM api_keys WHERE id = ? AND revoked_at IS NULL`},
		{&s.sessionByHash, `SELECT ` + sessionColumns + `, token_hash FROM sessions WHERE token_hash = ? AND ended_at IS NULL`},
		{&s.listKeys, `SELECT ` + keyColumns + ` FROM api_keys WHERE revoked_at IS NULL ORDER BY id`},
	} {
		var err error
		if *st.stmt, err = s.db.PrepareContext(ctx, st.query); err != nil {
			return fmt.Errorf("preparing %q: %w", st.query, err)
		}
	}
	return nil
}

// openDB opens the SQLite file at path with the store's settings.
func openDB(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	// url.URL writes "file:///abs"; libsql accepts that form for absolute paths.
	db, err := sql.Open("libsql", u.String())
	if err != nil {
		return nil, fmt.Errorf("opening key store %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return db, nil
}

// Close records pending key and session usage, stops pulling (sync mode), closes the prepared
// statements and closes the database.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Store) close() error {
	var errs []error
	if s.replica != nil {
		s.replica.quitPulls()
	}
	s.usage.stop()
	s.seen.stop()
	if s.replica != nil {
		errs = append(errs, s.replica.stop())
	}
	return errors.Join(append(errs, s.closeStatements(), s.db.Close())...)
}

// closeStatements closes the statements prepare made; those it did not make are nil.
func (s *Store) closeStatements() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.keyByHash, s.keyByID, s.sessionByHash, s.listKeys} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// FlushUsage writes pending lastUsedAt and lastSeenAt updates now.
func (s *Store) FlushUsage(ctx context.Context) error {
	return errors.Join(s.usage.flush(ctx), s.seen.flush(ctx))
}

// HashKey returns the hex SHA-256 of a key, the only form in which keys are stored.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// newSecret returns prefix followed by 32 random bytes in unpadded base64url.
func newSecret(prefix string) (string, error) {
	b := make([]byte, keyRandomBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// secretSum returns the SHA-256 of a presented secret, or false when it is not prefix followed
// by 43 characters.
func secretSum(secret, prefix string) ([sha256.Size]byte, bool) {
	if len(secret) != keyLength || !strings.HasPrefix(secret, prefix) {
		return [sha256.Size]byte{}, false
	}
	return sha256.Sum256([]byte(secret)), true
}

// sameHash compares a stored hex hash with a computed one in constant time.
func sameHash(stored string, sum [sha256.Size]byte) bool {
	b, err := hex.DecodeString(stored)
	return err == nil && subtle.ConstantTimeCompare(b, sum[:]) == 1
}

// Create validates nk and stores a new key.
func (s *Store) Create(ctx context.Context, nk NewKey) (Created, error) {
	return s.CreateAudited(ctx, nk, nil)
}

// CreateAudited is Create that also stores audit's entry for the key as stored (its id is
// known only then), in the same transaction: the key and its key.create entry are written
// together or not at all, on the local file as on a sync-mode primary. A nil audit stores
// no entry.
func (s *Store) CreateAudited(ctx context.Context, nk NewKey, audit func(KeyRecord) AuditEntry) (Created, error) {
	defer s.timed("create")()
	var c Created
	err := s.write(ctx, func(tx writeTx) error {
		var err error
		if c, err = s.createIn(ctx, tx, nk, nil); err != nil || audit == nil {
			return err
		}
		e := audit(c.KeyRecord)
		return s.Audit.appendIn(ctx, tx, &e)
	})
	if err != nil {
		return Created{}, err
	}
	s.keysChanged()
	return c, nil
}

// createIn stores a new key in tx. persist, when set, receives the secret before the key is
// stored, and an error from it stores nothing.
func (s *Store) createIn(ctx context.Context, tx writeTx, nk NewKey, persist func(secret string) error) (Created, error) {
	rec, err := Normalize(nk, s.now())
	if err != nil {
		return Created{}, err
	}
	secret, err := newSecret(KeyPrefix)
	if err != nil {
		return Created{}, err
	}
	if persist != nil {
		if err := persist(secret); err != nil {
			return Created{}, err
		}
	}
	rec.KeyPrefix = secret[:KeyPrefixLength]
	rec.CreatedAt = s.now().Unix()
	if rec.ID, err = insertKey(ctx, tx, rec, HashKey(secret)); err != nil {
		return Created{}, err
	}
	return Created{KeyRecord: rec, Secret: secret}, nil
}

func insertKey(ctx context.Context, tx writeTx, rec KeyRecord, hash string) (int64, error) {
	perms, _ := json.Marshal(storedPermissions(rec))
	ns, _ := json.Marshal(rec.Namespaces)
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO api_keys
		(name, description, key_hash, key_prefix, role, permissions, namespaces, created_at, expires_at, change_seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		rec.Name, nullString(rec.Description), hash, rec.KeyPrefix, rec.Role, string(perms), string(ns), rec.CreatedAt,
		nullInt(rec.ExpiresAt), tx.seq).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("storing key: %w", err)
	}
	return id, nil
}

// storedPermissions keeps explicit permissions for custom keys only; other roles take theirs
// from the role at read time, so a role's permissions can grow with the runtime.
func storedPermissions(rec KeyRecord) []string {
	if rec.Role == RoleCustom {
		return rec.Permissions
	}
	return []string{}
}

// Normalize validates a new key as of now and returns the record it would be stored as:
// defaults filled in, permissions resolved from the role, duplicates removed.
func Normalize(nk NewKey, now time.Time) (KeyRecord, error) {
	rec := KeyRecord{Name: strings.TrimSpace(nk.Name), Description: strings.TrimSpace(nk.Description), Role: nk.Role, ExpiresAt: nk.ExpiresAt}
	if rec.Name == "" {
		return rec, inputErr("MISSING_KEY_NAME", "a key needs a name")
	}
	if err := checkText("name", "INVALID_KEY_NAME", rec.Name, MaxNameLength); err != nil {
		return rec, err
	}
	if err := checkText("description", "BAD_REQUEST", rec.Description, MaxDescriptionLength); err != nil {
		return rec, err
	}
	if rec.Role == "" {
		rec.Role = DefaultRole
	}
	if !KnownRole(rec.Role) {
		return rec, inputErr("INVALID_KEY_ROLE", "unknown role %q; use admin, editor, viewer or custom", rec.Role)
	}
	var err error
	switch {
	case rec.Role == RoleCustom:
		if rec.Permissions, err = NormalizePermissions(nk.Permissions); err != nil {
			return rec, err
		}
	case len(nk.Permissions) > 0:
		return rec, inputErr("INVALID_PERMISSION", "permissions are chosen only for role custom; role %s grants its own", rec.Role)
	default:
		rec.Permissions = RolePermissions(rec.Role)
	}
	ns := nk.Namespaces
	if ns == nil {
		ns = []string{AllNamespaces}
	}
	if rec.Namespaces, err = NormalizeNamespaces(ns); err != nil {
		return rec, err
	}
	if rec.ExpiresAt != 0 && rec.ExpiresAt <= now.Unix() {
		return rec, inputErr("INVALID_EXPIRATION", "the key would already be expired")
	}
	return rec, nil
}

const keyColumns = `id, name, COALESCE(description, ''), key_prefix, role, permissions, namespaces,
	created_at, COALESCE(last_used_at, 0), COALESCE(expires_at, 0)`

type scanner interface{ Scan(dest ...any) error }

func scanKey(row scanner, extra ...any) (KeyRecord, error) {
	var rec KeyRecord
	var perms, ns string
	dest := append([]any{&rec.ID, &rec.Name, &rec.Description, &rec.KeyPrefix, &rec.Role, &perms, &ns,
		&rec.CreatedAt, &rec.LastUsedAt, &rec.ExpiresAt}, extra...)
	if err := row.Scan(dest...); err != nil {
		return rec, err
	}
	if rec.Role == RoleCustom {
		if err := json.Unmarshal([]byte(perms), &rec.Permissions); err != nil {
			return rec, fmt.Errorf("key %d: corrupt permissions: %w", rec.ID, err)
		}
	} else {
		rec.Permissions = RolePermissions(rec.Role)
	}
	if rec.Permissions == nil {
		rec.Permissions = []string{}
	}
	if err := json.Unmarshal([]byte(ns), &rec.Namespaces); err != nil || len(rec.Namespaces) == 0 {
		return rec, fmt.Errorf("key %d: corrupt namespaces", rec.ID)
	}
	return rec, nil
}

// listing is a cached List, as read at generation gen of Store.listGen.
type listing struct {
	gen  uint64
	keys []KeyRecord
}

// ListGeneration names the keys' rows as they are now: it changes with every write to them
// (creations, revocations, last use), so answers built from a listing may be kept under it.
func (s *Store) ListGeneration() uint64 { return s.listGen.Load() }

// keysChanged ends the cached listing; a write to the keys' rows calls it after its commit.
func (s *Store) keysChanged() { s.listGen.Add(1) }

// List returns every key that is not revoked, expired ones included, by id. The slice is the
// caller's; the records' own slices are shared and must not be changed.
func (s *Store) List(ctx context.Context) ([]KeyRecord, error) {
	gen := s.listGen.Load() // before the rows are read: see Store.listGen
	if l := s.listed.Load(); l != nil && l.gen == gen {
		return slices.Clone(l.keys), nil
	}
	keys, err := s.readKeys(ctx)
	if err != nil {
		return nil, err
	}
	s.listed.Store(&listing{gen: gen, keys: keys})
	return slices.Clone(keys), nil
}

// readKeys reads the keys List returns.
func (s *Store) readKeys(ctx context.Context) ([]KeyRecord, error) {
	defer s.timed("list")()
	rows, err := s.listKeys.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing keys: %w", err)
	}
	defer rows.Close()
	out := []KeyRecord{}
	for rows.Next() {
		rec, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, rows.Err()
}

// Get returns the key with id unless it is revoked.
func (s *Store) Get(ctx context.Context, id int64) (KeyRecord, error) {
	defer s.timed("get")()
	rec, err := scanKey(s.keyByID.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return rec, ErrNotFound
	}
	return rec, err
}

// Revoke revokes the key with id and ends its sessions. The row stays, but the key is never
// listed or accepted again, from the next verification on.
func (s *Store) Revoke(ctx context.Context, id int64) error { return s.RevokeAudited(ctx, id, nil) }

// RevokeAudited is Revoke that also stores e, the revocation's audit entry, in the same
// transaction (none when e is nil).
func (s *Store) RevokeAudited(ctx context.Context, id int64, e *AuditEntry) error {
	defer s.timed("revoke")()
	err := s.write(ctx, func(tx writeTx) error {
		now := s.now().Unix()
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = ?, change_seq = ? WHERE id = ? AND revoked_at IS NULL`,
			now, tx.seq, id)
		if err != nil {
			return fmt.Errorf("revoking key %d: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrNotFound
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET ended_at = ?, change_seq = ? WHERE key_id = ? AND ended_at IS NULL`,
			now, tx.seq, id); err != nil {
			return fmt.Errorf("ending the sessions of key %d: %w", id, err)
		}
		return s.Audit.appendIn(ctx, tx, e)
	})
	if err != nil {
		return err
	}
	s.keysChanged()
	s.invalidate()
	return nil
}

// Verify resolves a presented key to its principal, in constant time with respect to the
// secret. Unknown, revoked and expired keys give ErrInvalidKey.
func (s *Store) Verify(ctx context.Context, key string) (Principal, error) {
	sum, ok := secretSum(key, KeyPrefix)
	if !ok {
		return Principal{}, ErrInvalidKey
	}
	now := s.now()
	gen := s.gen.Load() // before the row is read: see Store.gen
	rec, memo, ok := s.keys.get(sum, gen)
	if !ok {
		var err error
		if rec, gen, err = readFresh(ctx, s, gen, ErrInvalidKey, func() (KeyRecord, error) { return s.readKey(ctx, sum) }); err != nil {
			return Principal{}, err
		}
		memo = s.keys.put(sum, rec, gen)
	}
	if rec.Expired(now) {
		return Principal{}, ErrInvalidKey
	}
	s.usage.touch(rec.ID, rec.LastUsedAt, now)
	p := rec.Principal()
	p.memo = memo
	return p, nil
}

// readFresh reads a credential's rows with read, read at generation gen. In sync mode, a
// credential the replica does not hold (read gives unknown) may have been made on another
// instance since the last pull: the replica pulls, and it is read again, at the generation
// after the pull, which it returns.
func readFresh[V any](ctx context.Context, s *Store, gen uint64, unknown error, read func() (V, error)) (V, uint64, error) {
	v, err := read()
	if !errors.Is(err, unknown) || s.replica == nil {
		return v, gen, err
	}
	again, uerr := s.replica.unknown(ctx)
	switch {
	case again:
		gen = s.gen.Load()
		v, err = read()
	case uerr != nil:
		err = uerr
	}
	return v, gen, err
}

// readKey reads the key whose secret has hash sum, unless it is revoked.
func (s *Store) readKey(ctx context.Context, sum [sha256.Size]byte) (KeyRecord, error) {
	var stored string
	done := s.timed("verify")
	rec, err := scanKey(s.keyByHash.QueryRowContext(ctx, hex.EncodeToString(sum[:])), &stored)
	done()
	switch {
	case errors.Is(err, sql.ErrNoRows) || err == nil && !sameHash(stored, sum):
		return rec, ErrInvalidKey
	case err != nil:
		return rec, err
	}
	return rec, nil
}

// CountActive returns the number of keys that are neither revoked nor expired.
func (s *Store) CountActive(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, countActive, s.now().Unix()).Scan(&n)
	return n, err
}

// countActive counts the keys that are neither revoked nor expired at its parameter.
const countActive = `SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullInt(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}
