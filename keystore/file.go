package keystore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
)

// sqliteHeader starts every SQLite database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// errForeign is a SQLite database without the store's tables.
var errForeign = errors.New("this is a SQLite database of something else (it has no api_keys table); " +
	"restore the key store from a backup, or move this file away to start over with a new, empty store (and a new bootstrap key)")

// prepareFile checks the file where the store should be: a new store of mode is created where
// there is none, and an existing file must be a SQLite database.
func prepareFile(ctx context.Context, path, mode string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return createStore(ctx, path, mode)
	}
	if err != nil {
		return fmt.Errorf("key store %s: %w", path, err)
	}
	restore := "restore the key store from a backup, or move this file away to start over with a new, empty store (and a new bootstrap key)"
	if !info.Mode().IsRegular() {
		return fmt.Errorf("key store %s is not a regular file (%s); %s", path, info.Mode().Type(), restore)
	}
	if info.Size() == 0 {
		return fmt.Errorf("key store %s is empty (0 bytes): every key it held is gone, and the runtime does not start "+
			"on it rather than silently begin with no keys; %s", path, restore)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("key store %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, sqliteHeader) {
		return fmt.Errorf("key store %s is not a SQLite database (a foreign or damaged file); %s", path, restore)
	}
	// Read-only, so that another program's database is left exactly as it was. Other errors
	// are left to the read-write open: a store whose WAL needs recovery cannot be read here.
	u := url.URL{Scheme: "file", Path: path, RawQuery: "mode=ro&_pragma=busy_timeout(10000)"}
	db, err := sql.Open("libsql", u.String())
	if err != nil {
		return fmt.Errorf("key store %s: %w", path, err)
	}
	defer db.Close()
	if err := checkOurs(ctx, db); errors.Is(err, errForeign) {
		return fmt.Errorf("key store %s: %w", path, err)
	}
	return nil
}

// createStore creates a new, migrated store of mode at path through a temporary file renamed
// into place, so that a crash never leaves an empty file that the next start would refuse.
func createStore(ctx context.Context, path, mode string) error {
	tmp := path + ".new"
	for _, f := range []string{tmp, tmp + "-wal", tmp + "-shm"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("creating key store %s: %w", path, err)
		}
	}
	// Owner-only from the start: SQLite gives its -wal and -shm files the same mode.
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("creating key store %s: %w", path, err)
	}
	f.Close()
	db, err := openDB(tmp)
	if err == nil {
		err = migrate(ctx, db)
		if err == nil {
			_, err = db.ExecContext(ctx, `INSERT INTO store_meta (name, value) VALUES ('mode', ?)`, mode)
		}
		// Closing the last connection checkpoints the WAL into the file and removes it.
		err = errors.Join(err, db.Close())
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("creating key store %s: %w", path, err)
	}
	return nil
}

// The modes a store file is kept in (store_meta's "mode"; files from before it are local).
const (
	modeLocal = "local"
	modeSync  = "sync" // a replica of a primary
)

// checkMode refuses to open a store file in a mode it was not made for: a local store is not
// a replica of anything, and a replica is a copy that its primary would overwrite.
func checkMode(ctx context.Context, db *sql.DB, path, mode string) error {
	have := modeLocal
	err := db.QueryRowContext(ctx, `SELECT value FROM store_meta WHERE name = 'mode'`).Scan(&have)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("key store %s: reading its mode: %w", path, err)
	}
	switch {
	case have == mode:
		return nil
	case mode == modeSync:
		return fmt.Errorf("key store %s is a local store (key_store local), not a replica: to share its keys, copy them into "+
			"an empty primary with `caddy runtime keystore-migrate --from %s --to <sync_url>` (the token from RUNTIME_AUTH_DB_SYNC_TOKEN), "+
			"which also makes this file the replica; or move the file away to start with the primary's keys", path, path)
	default:
		return fmt.Errorf("key store %s is the replica of a sync-mode primary (key_store sync): start with key_store sync and "+
			"its sync_url, or move the file away to start over with a new, empty local store (and a new bootstrap key)", path)
	}
}
