package keystore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
)

// BackupReport is what Backup copied.
type BackupReport struct {
	Keys, Sessions, AuditEntries int
	Bytes                        int64
	// Replica is set when the store is a sync-mode replica: its primary is the source of
	// truth, and the copy holds what the replica had pulled.
	Replica bool
}

// Backup writes a consistent copy of the key store at path to the new file to while a
// runtime may be using the store: SQLite's VACUUM INTO reads one snapshot (the WAL included)
// in a read transaction, which the runtime's writes do not wait for. to must not exist: a
// backup never writes over a file. The copy is owner-only, checked with integrity_check, and
// opens as the store did (a replica's copy as a replica).
func Backup(ctx context.Context, path, to string) (BackupReport, error) {
	var rep BackupReport
	path, err := filepath.Abs(path)
	if err != nil {
		return rep, err
	}
	if to, err = filepath.Abs(to); err != nil {
		return rep, err
	}
	if info, err := os.Stat(path); err != nil {
		return rep, fmt.Errorf("no key store to back up: %w", err)
	} else if !info.Mode().IsRegular() || info.Size() == 0 {
		return rep, fmt.Errorf("key store %s is not a regular, non-empty file: nothing to back up", path)
	}
	// Created here, owner-only and exclusively, so an existing file is refused and the copy
	// is never readable by others; VACUUM INTO writes into an empty file.
	f, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return rep, fmt.Errorf("%s exists: a backup is written to a new file, never over one; name another", to)
	}
	if err != nil {
		return rep, fmt.Errorf("creating the backup: %w", err)
	}
	f.Close()
	if rep, err = backup(ctx, path, to); err != nil {
		os.Remove(to)
		return rep, err
	}
	return rep, nil
}

func backup(ctx context.Context, path, to string) (BackupReport, error) {
	var rep BackupReport
	db, err := openDB(path)
	if err != nil {
		return rep, err
	}
	defer db.Close()
	if err := checkOurs(ctx, db); err != nil {
		return rep, fmt.Errorf("key store %s: %w", path, err)
	}
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, to); err != nil {
		return rep, fmt.Errorf("copying key store %s: %w", path, err)
	}
	// VACUUM INTO does not sync its output.
	f, err := os.OpenFile(to, os.O_RDWR, 0)
	if err != nil {
		return rep, err
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return rep, fmt.Errorf("writing the backup: %w", err)
	}
	return checkBackup(ctx, to)
}

// checkBackup opens the copy read-only, checks its integrity and counts what it holds.
func checkBackup(ctx context.Context, to string) (BackupReport, error) {
	var rep BackupReport
	u := url.URL{Scheme: "file", Path: to, RawQuery: "mode=ro"}
	db, err := sql.Open("libsql", u.String())
	if err != nil {
		return rep, err
	}
	defer db.Close()
	var check string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		return rep, fmt.Errorf("the backup %s does not pass integrity_check (%q, %w)", to, check, err)
	}
	err = db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM api_keys), (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM audit)`).
		Scan(&rep.Keys, &rep.Sessions, &rep.AuditEntries)
	if err != nil {
		return rep, fmt.Errorf("reading the backup %s: %w", to, err)
	}
	mode := modeLocal
	if err := db.QueryRowContext(ctx, `SELECT value FROM store_meta WHERE name = 'mode'`).Scan(&mode); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return rep, fmt.Errorf("reading the backup %s: %w", to, err)
	}
	rep.Replica = mode == modeSync
	info, err := os.Stat(to)
	if err != nil {
		return rep, err
	}
	rep.Bytes = info.Size()
	return rep, nil
}

// DatabasesReport is what BackupDatabases copied.
type DatabasesReport struct {
	Databases int
	Bytes     int64
	// Skipped are the sparse files not copied (worker folder/path): written out, their holes
	// could fill the backup's disk.
	Skipped []string
}

// BackupDatabases writes a consistent copy of each worker's local database, the SQLite file
// named file in each folder of dir (state_dir/databases), into the new folder to, in the same
// layout, while the workers may be writing them: VACUUM INTO reads one snapshot of each. A
// worker's other files in its folder are not copied. Nothing to copy (no dir) is no error;
// to must not exist.
func BackupDatabases(ctx context.Context, dir, file, to string) (DatabasesReport, error) {
	var rep DatabasesReport
	dir, err := filepath.Abs(dir) // a file: URL of a relative path reads as a host
	if err != nil {
		return rep, err
	}
	if to, err = filepath.Abs(to); err != nil {
		return rep, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, fmt.Errorf("the workers' databases: %w", err)
	}
	if err := os.Mkdir(to, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return rep, fmt.Errorf("%s exists: a backup is written to a new folder, never over one; name another", to)
		}
		return rep, fmt.Errorf("creating the backup of the workers' databases: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n, err := backupFolder(ctx, filepath.Join(dir, e.Name()), file, filepath.Join(to, e.Name()), &rep.Skipped)
		if err != nil {
			return rep, fmt.Errorf("backing up the database of %s: %w", e.Name(), err)
		}
		if n > 0 {
			rep.Databases++
			rep.Bytes += n
		}
	}
	return rep, nil
}

// sparseSlack is how much larger than its allocation a file copied as it is may be (a last
// block partly written, a small hole).
const sparseSlack = 1 << 20

// sqliteMagic starts every SQLite database file.
const sqliteMagic = "SQLite format 3\x00"

// backupFolder copies one worker's database folder src to the new folder to, created once
// there is something to copy, and returns the bytes written. The SQLite file named file is
// copied by VACUUM INTO (its journal and WAL files are in that snapshot); any other regular
// file (a WebAssembly worker keeps its own files there, db.sqlite too maybe not SQLite) as it
// is. Links are not followed: a worker could point one anywhere. A sparse file is not copied
// but added to skipped.
func backupFolder(ctx context.Context, src, file, to string, skipped *[]string) (int64, error) {
	root, err := os.OpenRoot(src)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	var written int64
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || !d.Type().IsRegular() || rel == file+"-wal" || rel == file+"-shm" || rel == file+"-journal" {
			return err
		}
		info, err := d.Info()
		if err != nil || info.Size() == 0 && rel == file {
			return err // a database not written yet
		}
		dst := filepath.Join(to, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		var n int64
		switch {
		case rel == file && isSQLite(path):
			n, err = vacuumInto(ctx, path, dst)
		case info.Size() > allocatedSize(info)+sparseSlack:
			// Holes the worker was not charged for would be written out whole: a worker
			// could fill the backup's disk, or, refused, stop every backup.
			*skipped = append(*skipped, filepath.Join(filepath.Base(src), rel))
			return nil
		default:
			n, err = copyFile(root, rel, dst)
		}
		written += n
		return err
	})
	return written, err
}

// isSQLite tells whether the file at path starts as a SQLite database does.
func isSQLite(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(sqliteMagic))
	_, err = io.ReadFull(f, head)
	return err == nil && string(head) == sqliteMagic
}

// copyFile copies the regular file name of root to the new file dst, synced; root keeps a
// link swapped in meanwhile from leading out of it.
func copyFile(root *os.Root, name, dst string) (int64, error) {
	in, err := root.Open(name)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	return n, errors.Join(err, out.Close())
}

// vacuumInto copies the SQLite file src to the new file dst, read-only on src, synced, and
// checked with integrity_check; it returns the copy's size.
func vacuumInto(ctx context.Context, src, dst string) (int64, error) {
	u := url.URL{Scheme: "file", Path: src, RawQuery: "mode=ro"}
	db, err := sql.Open("libsql", u.String())
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(dst, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	var check string
	if err := db.QueryRowContext(ctx, `SELECT integrity_check FROM pragma_integrity_check() LIMIT 1`).Scan(&check); err != nil || check != "ok" {
		return 0, fmt.Errorf("the database does not pass integrity_check (%q, %v)", check, err)
	}
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}
