//go:build !wasip1

package wasmdb

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/caddy-runtime/runtime/internal/databases"
)

// TestDriver runs database/sql through the driver against the runtime's own executor (the
// session a WebAssembly instance gets), in this process: values keep their types, a
// transaction spans calls and rolls back, errors carry SQLite's code, and a second
// connection while one is open is refused.
func TestDriver(t *testing.T) {
	m := databases.New(t.TempDir(), nil)
	defer m.Close()
	s, err := m.Session(context.Background(), "app", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	transport = func(b []byte) ([]byte, error) { return s.Execute(context.Background(), b), nil }
	defer func() { transport = call }()

	db, err := sql.Open("runtime", URL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("create table t (i integer primary key, f real, s text, b blob, n, ok)"); err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec("insert into t values (?, ?, ?, ?, ?, ?)", int64(1)<<62, 2.25, "héllo", []byte{0, 255}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := res.LastInsertId(); id != 1<<62 {
		t.Errorf("LastInsertId = %d", id)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Errorf("RowsAffected = %d", n)
	}
	var (
		i, ok int64
		f     float64
		str   string
		b     []byte
		n     any
	)
	if err := db.QueryRow("select i, f, s, b, n, ok from t where s = ?", "héllo").Scan(&i, &f, &str, &b, &n, &ok); err != nil {
		t.Fatal(err)
	}
	if i != 1<<62 || f != 2.25 || str != "héllo" || !bytes.Equal(b, []byte{0, 255}) || n != nil || ok != 1 {
		t.Errorf("read back %d %v %q %v %v %d", i, f, str, b, n, ok)
	}

	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("insert into t (s) values ('gone')"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("select 1"); !errors.Is(err, ErrSecondConn) {
		t.Errorf("a statement outside the open transaction = %v, want ErrSecondConn", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var count int
	if err := db.QueryRow("select count(*) from t").Scan(&count); err != nil || count != 1 {
		t.Errorf("after a rollback count = %d (%v), want 1", count, err)
	}

	_, err = db.Exec("insert into t (i) values (?)", int64(1)<<62)
	var e *Error
	if !errors.As(err, &e) || e.Code != "SQLITE_CONSTRAINT" {
		t.Errorf("a duplicate key = %v, want SQLITE_CONSTRAINT", err)
	}
	if _, err := db.Exec("attach 'x.db' as x"); err == nil {
		t.Error("ATTACH ran")
	}
	if _, err := sql.Open("runtime", "file:other.db"); err != nil {
		t.Fatal(err) // sql.Open connects lazily
	}
	if _, err := (Driver{}).Open("file:other.db"); err == nil {
		t.Error("the driver opened a database other than its worker's")
	}
}
