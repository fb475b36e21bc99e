// Package keystore keeps API keys in a libSQL (SQLite) database file: only each key's SHA-256
// is stored, keys carry a role or explicit permissions and a namespace list, and verification
// is constant-time and cached.
package keystore

import (
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
	"os"
	"strings"
	"sync"
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
	ErrInvalidKey = errors.New("unknown, revoked or expired API key")
	ErrNotFound   = errors.New("no such API key")
)

// KeyRecord is a stored key as listed, without its secret.
type KeyRecord struct {
	ID          int64    `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	KeyPrefix   string   `json:"keyPrefix"`
	Role        string   `json:"role" enum:"admin,editor,viewer,custom"`
	Permissions []string `json:"permissions"`
	Namespaces  []string `json:"namespaces"`
	CreatedAt   int64    `json:"createdAt" doc:"Unix seconds"`
	LastUsedAt  int64    `json:"lastUsedAt,omitempty" doc:"Unix seconds; absent until first use"`
	ExpiresAt   int64    `json:"expiresAt,omitempty" doc:"Unix seconds; absent for keys that never expire"`
}

// Principal returns the principal the key resolves to.
func (k KeyRecord) Principal() Principal {
	return Principal{ID: k.ID, Name: k.Name, KeyPrefix: k.KeyPrefix, Role: k.Role,
		Permissions: k.Permissions, Namespaces: k.Namespaces}
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

// Store is the key store.
type Store struct {
	db      *sql.DB
	writeMu sync.Mutex // one writer at a time; SQLite allows no more
	now     func() time.Time
	cache   verifyCache
	usage   *usageRecorder
}

// Open opens (creating if needed) the key store at path and migrates its schema.
func Open(ctx context.Context, path string) (*Store, error) {
	// Create the file owner-only first: SQLite gives its -wal and -shm files the same mode.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening key store: %v", err)
	}
	f.Close()
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
		return nil, fmt.Errorf("opening key store %s: %v", path, err)
	}
	db.SetMaxOpenConns(8)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &Store{db: db, now: time.Now}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("key store %s: %w", path, err)
	}
	s.usage = newUsageRecorder(db, &s.writeMu)
	return s, nil
}

// Close records pending key usage and closes the database.
func (s *Store) Close() error {
	s.usage.stop()
	return s.db.Close()
}

// FlushUsage writes pending lastUsedAt updates now.
func (s *Store) FlushUsage(ctx context.Context) error { return s.usage.flush(ctx) }

// HashKey returns the hex SHA-256 of a key, the only form in which keys are stored.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func newSecret() (string, error) {
	b := make([]byte, keyRandomBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Create validates nk and stores a new key.
func (s *Store) Create(ctx context.Context, nk NewKey) (Created, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.createLocked(ctx, nk, nil)
}

// createLocked stores a new key; the caller holds writeMu. persist, when set, receives the
// secret before the key is stored, and an error from it stores nothing.
func (s *Store) createLocked(ctx context.Context, nk NewKey, persist func(secret string) error) (Created, error) {
	rec, err := Normalize(nk, s.now())
	if err != nil {
		return Created{}, err
	}
	secret, err := newSecret()
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
	if rec.ID, err = insertKey(ctx, s.db, rec, HashKey(secret)); err != nil {
		return Created{}, err
	}
	return Created{KeyRecord: rec, Secret: secret}, nil
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func insertKey(ctx context.Context, db execer, rec KeyRecord, hash string) (int64, error) {
	perms, _ := json.Marshal(storedPermissions(rec))
	ns, _ := json.Marshal(rec.Namespaces)
	res, err := db.ExecContext(ctx, `INSERT INTO api_keys
		(name, description, key_hash, key_prefix, role, permissions, namespaces, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		rec.Name, nullString(rec.Description), hash, rec.KeyPrefix, rec.Role, string(perms), string(ns), rec.CreatedAt, nullInt(rec.ExpiresAt))
	if err != nil {
		return 0, fmt.Errorf("storing key: %v", err)
	}
	return res.LastInsertId()
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
	if err := checkText("name", rec.Name, MaxNameLength); err != nil {
		return rec, err
	}
	if err := checkText("description", rec.Description, MaxDescriptionLength); err != nil {
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
			return rec, fmt.Errorf("key %d: corrupt permissions: %v", rec.ID, err)
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

// List returns every key that is not revoked, expired ones included, by id.
func (s *Store) List(ctx context.Context) ([]KeyRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE revoked_at IS NULL ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("listing keys: %v", err)
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
	rec, err := scanKey(s.db.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = ? AND revoked_at IS NULL`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return rec, ErrNotFound
	}
	return rec, err
}

// Revoke revokes the key with id. The row stays, but the key is never listed or accepted again.
func (s *Store) Revoke(ctx context.Context, id int64) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	res, err := s.db.ExecContext(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, s.now().Unix(), id)
	if err != nil {
		return fmt.Errorf("revoking key %d: %v", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	s.cache.forget(id)
	return nil
}

// Verify resolves a presented key to its principal, in constant time with respect to the
// secret. Unknown, revoked and expired keys give ErrInvalidKey.
func (s *Store) Verify(ctx context.Context, key string) (Principal, error) {
	if len(key) != keyLength || !strings.HasPrefix(key, KeyPrefix) {
		return Principal{}, ErrInvalidKey
	}
	sum := sha256.Sum256([]byte(key))
	now := s.now()
	rec, ok := s.cache.get(sum)
	if !ok {
		var stored string
		var err error
		rec, err = scanKey(s.db.QueryRowContext(ctx,
			`SELECT `+keyColumns+`, key_hash FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL`, hex.EncodeToString(sum[:])), &stored)
		if errors.Is(err, sql.ErrNoRows) {
			return Principal{}, ErrInvalidKey
		}
		if err != nil {
			return Principal{}, err
		}
		storedSum, err := hex.DecodeString(stored)
		if err != nil || subtle.ConstantTimeCompare(storedSum, sum[:]) != 1 {
			return Principal{}, ErrInvalidKey
		}
		s.cache.put(sum, rec)
	}
	if rec.Expired(now) {
		return Principal{}, ErrInvalidKey
	}
	s.usage.touch(rec.ID, rec.LastUsedAt, now)
	return rec.Principal(), nil
}

// CountActive returns the number of keys that are neither revoked nor expired.
func (s *Store) CountActive(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL
		AND (expires_at IS NULL OR expires_at > ?)`, s.now().Unix()).Scan(&n)
	return n, err
}

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

// verifyCache remembers verified keys by hash, so a request does not read the database; a
// revocation forgets the key before the revoking request answers.
type verifyCache struct {
	mu      sync.RWMutex
	entries map[[sha256.Size]byte]KeyRecord
}

// maxCached bounds the cache; past it, the cache starts over.
const maxCached = 10000

func (c *verifyCache) get(sum [sha256.Size]byte) (KeyRecord, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	rec, ok := c.entries[sum]
	return rec, ok
}

func (c *verifyCache) put(sum [sha256.Size]byte, rec KeyRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= maxCached {
		c.entries = map[[sha256.Size]byte]KeyRecord{}
	}
	c.entries[sum] = rec
}

func (c *verifyCache) forget(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for sum, rec := range c.entries {
		if rec.ID == id {
			delete(c.entries, sum)
		}
	}
}
