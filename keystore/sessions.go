package keystore

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Sessions is the store's sessions table: the logins of the management panel, each a token
// of a key (or of the root key) that verifies as its principal until it ends or expires.
type Sessions struct{ s *Store }

// SessionPrefix starts every session token: "rts_" followed by 32 random bytes in unpadded
// base64url, like a key, so a token is as hard to guess.
const SessionPrefix = "rts_"

// Limits on sessions.
const (
	// MaxSessionsPerOwner bounds the live sessions of one key (or of the root key); a new one
	// past it ends the oldest.
	MaxSessionsPerOwner = 100
	maxUserAgentLength  = 256
)

// rootFPIterations is the PBKDF2 work of a root fingerprint: computed once per root key and
// process, it makes every guess at the root key from a copy of the store file as slow.
const rootFPIterations = 200_000

// SessionRecord is a stored session as listed, without its token. Times are Unix seconds;
// LastSeenAt is written at most once a minute.
type SessionRecord struct {
	ID         int64
	CreatedAt  int64
	ExpiresAt  int64
	LastSeenAt int64
	UserAgent  string

	keyID  int64  // 0: the root key
	rootFP string // root sessions: the fingerprint of the root key they began with
}

// sessionEntry is a verified session with its key (zero for a root session), as cached.
type sessionEntry struct {
	sess SessionRecord
	key  KeyRecord
}

// NewSession describes a session to begin.
type NewSession struct {
	// Principal is who logs in: a key's principal, or Root().
	Principal Principal
	// RootKey is the root key a root session begins with; it ends when the root key changes.
	RootKey   string
	TTL       time.Duration
	UserAgent string
	// Audit, when set, makes the audit entry of the login from the session as stored; the
	// entry is written in the session's own transaction, so neither is stored without the other.
	Audit func(SessionRecord) AuditEntry
}

// Create stores a new session and returns its token, which is never available again
// (only its SHA-256 is stored). The session ends at TTL, or when its key expires if sooner.
func (f Sessions) Create(ctx context.Context, ns NewSession) (string, SessionRecord, error) {
	s := f.s
	defer s.timed("create_session")()
	now := s.now()
	rec := SessionRecord{CreatedAt: now.Unix(), ExpiresAt: now.Add(ns.TTL).Unix(), LastSeenAt: now.Unix(),
		UserAgent: cleanUserAgent(ns.UserAgent)}
	switch {
	case ns.TTL < time.Second:
		return "", rec, errors.New("a session needs a lifetime of at least a second")
	case ns.Principal.IsRoot:
		if ns.RootKey == "" {
			return "", rec, errors.New("a root session needs the root key")
		}
		rec.rootFP = s.rootFingerprint(ns.RootKey)
	case ns.Principal.ID <= 0:
		return "", rec, errors.New("a session needs a key or the root key")
	default:
		rec.keyID = ns.Principal.ID
		if exp := ns.Principal.ExpiresAt; exp != 0 && exp < rec.ExpiresAt {
			rec.ExpiresAt = exp
		}
	}
	token, err := newSecret(SessionPrefix)
	if err != nil {
		return "", rec, err
	}
	var ended int64
	err = s.write(ctx, func(tx writeTx) error {
		// Expired rows go: every replica knows they are dead without being told.
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, now.Unix()); err != nil {
			return fmt.Errorf("pruning expired sessions: %w", err)
		}
		err := tx.QueryRowContext(ctx, `INSERT INTO sessions
			(token_hash, key_id, root_fp, created_at, expires_at, last_seen_at, user_agent, change_seq)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, HashKey(token), rec.keyID, rec.rootFP, rec.CreatedAt, rec.ExpiresAt,
			rec.LastSeenAt, rec.UserAgent, tx.seq).Scan(&rec.ID)
		if err != nil {
			return fmt.Errorf("storing the session: %w", err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET ended_at = ?, change_seq = ?
			WHERE key_id = ? AND ended_at IS NULL AND id NOT IN
			(SELECT id FROM sessions WHERE key_id = ? AND ended_at IS NULL ORDER BY id DESC LIMIT ?)`,
			now.Unix(), tx.seq, rec.keyID, rec.keyID, MaxSessionsPerOwner)
		if err != nil {
			return fmt.Errorf("ending the oldest sessions: %w", err)
		}
		ended, _ = res.RowsAffected()
		if ns.Audit == nil {
			return nil
		}
		e := ns.Audit(rec)
		return s.Audit.appendIn(ctx, tx, &e)
	})
	if err != nil {
		return "", rec, err
	}
	if ended > 0 {
		s.invalidate()
	}
	return token, rec, nil
}

// Verify resolves a session token to its principal and session. A session whose
// token is unknown, that was ended, that expired, whose key was revoked or expired, or (root
// sessions) that began with another root key than rootKey gives ErrInvalidSession.
func (f Sessions) Verify(ctx context.Context, token, rootKey string) (Principal, SessionRecord, error) {
	s := f.s
	sum, ok := secretSum(token, SessionPrefix)
	if !ok {
		return Principal{}, SessionRecord{}, ErrInvalidSession
	}
	now := s.now()
	gen := s.gen.Load() // before the rows are read: see Store.gen
	e, memo, ok := s.sessions.get(sum, gen)
	if !ok {
		var err error
		if e, gen, err = readFresh(ctx, s, gen, ErrInvalidSession, func() (sessionEntry, error) { return f.read(ctx, sum) }); err != nil {
			return Principal{}, SessionRecord{}, err
		}
		memo = s.sessions.put(sum, e, gen)
	}
	if now.Unix() >= e.sess.ExpiresAt {
		return Principal{}, SessionRecord{}, ErrInvalidSession
	}
	var p Principal
	if e.sess.keyID == 0 {
		if rootKey == "" || subtle.ConstantTimeCompare([]byte(s.rootFingerprint(rootKey)), []byte(e.sess.rootFP)) != 1 {
			return Principal{}, SessionRecord{}, ErrInvalidSession
		}
		p = Root()
	} else {
		if e.key.Expired(now) {
			return Principal{}, SessionRecord{}, ErrInvalidSession
		}
		s.usage.touch(e.key.ID, e.key.LastUsedAt, now)
		p = e.key.Principal()
	}
	s.seen.touch(e.sess.ID, e.sess.LastSeenAt, now)
	p.memo = memo
	return p, e.sess, nil
}

const sessionColumns = `id, created_at, expires_at, last_seen_at, user_agent, key_id, root_fp`

func scanSession(row scanner, extra ...any) (SessionRecord, error) {
	var rec SessionRecord
	err := row.Scan(append([]any{&rec.ID, &rec.CreatedAt, &rec.ExpiresAt, &rec.LastSeenAt, &rec.UserAgent,
		&rec.keyID, &rec.rootFP}, extra...)...)
	return rec, err
}

// read reads the session with token hash sum and, for a key's session, its key, which
// must not be revoked.
func (f Sessions) read(ctx context.Context, sum [sha256.Size]byte) (sessionEntry, error) {
	s := f.s
	var e sessionEntry
	var stored string
	var err error
	done := s.timed("verify_session")
	e.sess, err = scanSession(s.sessionByHash.QueryRowContext(ctx, hex.EncodeToString(sum[:])), &stored)
	done()
	if errors.Is(err, sql.ErrNoRows) {
		return e, ErrInvalidSession
	}
	if err != nil {
		return e, err
	}
	if !sameHash(stored, sum) {
		return e, ErrInvalidSession
	}
	if e.sess.keyID == 0 {
		return e, nil
	}
	e.key, err = s.Get(ctx, e.sess.keyID)
	if errors.Is(err, ErrNotFound) {
		return e, ErrInvalidSession
	}
	return e, err
}

// owner returns the key id and root fingerprint that the sessions of p carry.
func (f Sessions) owner(p Principal, rootKey string) (int64, string, bool) {
	s := f.s
	if !p.IsRoot {
		return p.ID, "", p.ID > 0
	}
	if rootKey == "" {
		return 0, "", false
	}
	return 0, s.rootFingerprint(rootKey), true
}

// List returns the live sessions of p (for the root principal: those begun with
// rootKey), oldest first.
func (f Sessions) List(ctx context.Context, p Principal, rootKey string) ([]SessionRecord, error) {
	s := f.s
	out := []SessionRecord{}
	keyID, fp, ok := f.owner(p, rootKey)
	if !ok {
		return out, nil
	}
	defer s.timed("list_sessions")()
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE key_id = ? AND root_fp = ? AND expires_at > ? AND ended_at IS NULL ORDER BY id`, keyID, fp, s.now().Unix())
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		rec, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, rows.Err()
}

// End ends the live session id of p (for the root principal: one begun with rootKey);
// any other id gives ErrSessionNotFound.
func (f Sessions) End(ctx context.Context, p Principal, rootKey string, id int64) error {
	s := f.s
	keyID, fp, ok := f.owner(p, rootKey)
	if !ok {
		return ErrSessionNotFound
	}
	return f.end(ctx, `id = ? AND key_id = ? AND root_fp = ? AND expires_at > ?`, id, keyID, fp, s.now().Unix())
}

// EndOthers ends every live session of p (for the root principal: those begun with
// rootKey) but the one with id keep (0: none kept), and returns how many it ended.
func (f Sessions) EndOthers(ctx context.Context, p Principal, rootKey string, keep int64) (int, error) {
	s := f.s
	keyID, fp, ok := f.owner(p, rootKey)
	if !ok {
		return 0, nil
	}
	n, err := f.endCount(ctx, `id != ? AND key_id = ? AND root_fp = ? AND expires_at > ?`, keep, keyID, fp, s.now().Unix())
	if errors.Is(err, ErrSessionNotFound) {
		return 0, nil
	}
	return n, err
}

// EndToken ends the session with token, if there is one (logout).
func (f Sessions) EndToken(ctx context.Context, token string) error {
	sum, ok := secretSum(token, SessionPrefix)
	if !ok {
		return nil
	}
	err := f.end(ctx, `token_hash = ?`, hex.EncodeToString(sum[:]))
	if errors.Is(err, ErrSessionNotFound) {
		return nil
	}
	return err
}

// end ends the live sessions that where (a condition on their columns, with args)
// selects, effective from the next verification on; none gives ErrSessionNotFound. The rows
// stay until they expire, so that the end reaches every replica.
func (f Sessions) end(ctx context.Context, where string, args ...any) error {
	_, err := f.endCount(ctx, where, args...)
	return err
}

// endCount is end, also returning how many sessions it ended.
func (f Sessions) endCount(ctx context.Context, where string, args ...any) (int, error) {
	s := f.s
	defer s.timed("end_sessions")()
	var ended int64
	err := s.write(ctx, func(tx writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET ended_at = ?, change_seq = ? WHERE ended_at IS NULL AND `+where,
			append([]any{s.now().Unix(), tx.seq}, args...)...)
		if err != nil {
			return fmt.Errorf("ending a session: %w", err)
		}
		if ended, _ = res.RowsAffected(); ended == 0 {
			return ErrSessionNotFound
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.invalidate()
	return int(ended), nil
}

// rootFingerprint returns the fingerprint root sessions carry of rootKey: PBKDF2 with the
// store's own salt, derived once per root key and process (keyed by the root key's SHA-256,
// so that handlers with different root keys sharing the store do not derive it again and
// again).
func (s *Store) rootFingerprint(rootKey string) string {
	sum := sha256.Sum256([]byte(rootKey))
	if fp, ok := s.rootFPs.Load(sum); ok {
		return fp.(string)
	}
	s.rootMu.Lock()
	defer s.rootMu.Unlock()
	if fp, ok := s.rootFPs.Load(sum); ok {
		return fp.(string)
	}
	b, err := pbkdf2.Key(sha256.New, rootKey, s.rootSalt, rootFPIterations, sha256.Size)
	if err != nil {
		panic("keystore: PBKDF2: " + err.Error()) // only for parameters this package never passes
	}
	fp := hex.EncodeToString(b)
	s.rootFPs.Store(sum, fp)
	return fp
}

// cleanUserAgent keeps a User-Agent fit for a listing: valid UTF-8, printable, bounded.
func cleanUserAgent(ua string) string {
	ua = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(ua, ""))
	if utf8.RuneCountInString(ua) > maxUserAgentLength {
		ua = string([]rune(ua)[:maxUserAgentLength])
	}
	return strings.TrimSpace(ua)
}
