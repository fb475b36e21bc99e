// Package wasmdb is the database/sql driver of a WebAssembly worker's own database (manifest
// database: true), for Go programs built with GOOS=wasip1 GOARCH=wasm: it sends each
// statement to the runtime's host module runtime_database as a Hrana-over-HTTP v2 pipeline,
// and the runtime runs it on the worker's database, a SQLite file or a namespace on the
// libSQL primary, the same one a process version of the worker opens.
//
//	import _ "github.com/caddy-runtime/runtime/wasmdb"
//
//	db, err := sql.Open("runtime", os.Getenv("DATABASE_URL"))
//
// The statements of one request run in order on one connection of the runtime: a
// transaction (db.Begin, or BEGIN … COMMIT) spans calls, and what a request leaves
// uncommitted is rolled back as it ends. Hence one connection at a time: a statement sent
// outside an open transaction (a second connection) is refused. Arguments and columns are
// int64, float64, string, []byte or nil (bool and time.Time are sent as an integer and text).
package wasmdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/caddy-runtime/runtime/internal/hrana"
)

// transport sends a pipeline to the runtime; tests replace it.
var transport = call

// URL is the DATABASE_URL the runtime gives a WebAssembly worker with a database.
const URL = "runtime:"

func init() { sql.Register("runtime", Driver{}) }

// Driver opens the worker's database; the name is DATABASE_URL ("runtime:") or "".
type Driver struct{}

// open counts the connections open: the runtime's session of a request is one.
var open atomic.Int32

// ErrSecondConn refuses a second connection while one is open.
var ErrSecondConn = errors.New("wasmdb: a request has one connection to its database: this statement would run outside the open transaction")

// Open returns the connection to the worker's database.
func (Driver) Open(name string) (driver.Conn, error) {
	if name != "" && name != URL {
		return nil, fmt.Errorf("wasmdb: %q is not a WebAssembly worker's database: open DATABASE_URL (%s)", name, URL)
	}
	if !open.CompareAndSwap(0, 1) {
		return nil, ErrSecondConn
	}
	return &conn{}, nil
}

type conn struct{ closed bool }

func (c *conn) Prepare(query string) (driver.Stmt, error) { return &stmt{c: c, query: query}, nil }

func (c *conn) Close() error {
	if !c.closed {
		c.closed = true
		open.Add(-1)
	}
	return nil
}

func (c *conn) Begin() (driver.Tx, error) { return c.BeginTx(context.Background(), driver.TxOptions{}) }

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	begin := "BEGIN"
	if !opts.ReadOnly {
		begin = "BEGIN IMMEDIATE" // takes the write lock now, not at a later statement's deadlock
	}
	if _, err := c.run(begin, nil); err != nil {
		return nil, err
	}
	return tx{c}, nil
}

func (c *conn) ExecContext(_ context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	res, err := c.run(query, args)
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (c *conn) QueryContext(_ context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	res, err := c.run(query, args)
	if err != nil {
		return nil, err
	}
	return &rows{res: res}, nil
}

// CheckNamedValue takes the types the runtime stores as they are.
func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	switch v := nv.Value.(type) {
	case nil, int64, float64, string, []byte:
		return nil
	case bool:
		nv.Value = int64(0)
		if v {
			nv.Value = int64(1)
		}
		return nil
	case time.Time:
		nv.Value = v.Format(time.RFC3339Nano)
		return nil
	}
	v, err := driver.DefaultParameterConverter.ConvertValue(nv.Value)
	if err != nil {
		return err
	}
	nv.Value = v
	return c.CheckNamedValue(nv)
}

type tx struct{ c *conn }

func (t tx) Commit() error {
	_, err := t.c.run("COMMIT", nil)
	return err
}

func (t tx) Rollback() error {
	_, err := t.c.run("ROLLBACK", nil)
	return err
}

type stmt struct {
	c     *conn
	query string
}

func (s *stmt) Close() error  { return nil }
func (s *stmt) NumInput() int { return -1 }

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.c.ExecContext(context.Background(), s.query, named(args))
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.c.QueryContext(context.Background(), s.query, named(args))
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.c.ExecContext(ctx, s.query, args)
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.c.QueryContext(ctx, s.query, args)
}

func named(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, v := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out
}

// result is a statement's answer, as database/sql takes it.
type result struct{ *hrana.StmtResult }

func (r *result) LastInsertId() (int64, error) {
	if r.LastInsertRowid == nil {
		return 0, errors.New("wasmdb: no row was inserted")
	}
	return strconv.ParseInt(*r.LastInsertRowid, 10, 64)
}

func (r *result) RowsAffected() (int64, error) { return r.AffectedRowCount, nil }

// Error is a statement the database refused; Code is SQLite's, e.g. SQLITE_CONSTRAINT.
type Error struct{ Message, Code string }

func (e *Error) Error() string { return e.Message }

// run sends one statement and returns its result.
func (c *conn) run(query string, args []driver.NamedValue) (*result, error) {
	if c.closed {
		return nil, driver.ErrBadConn
	}
	st := hrana.Stmt{SQL: query}
	for _, a := range args {
		v, err := encode(a.Value)
		if err != nil {
			return nil, err
		}
		if a.Name != "" {
			st.NamedArgs = append(st.NamedArgs, hrana.NamedArg{Name: ":" + a.Name, Value: v})
			continue
		}
		st.Args = append(st.Args, v)
	}
	body, err := json.Marshal(hrana.PipelineRequest{Requests: []hrana.StreamRequest{{Type: "execute", Stmt: &st}}})
	if err != nil {
		return nil, err
	}
	out, err := transport(body)
	if err != nil {
		return nil, err
	}
	var resp hrana.PipelineResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("wasmdb: the runtime's answer: %w", err)
	}
	switch {
	case resp.Error != "":
		return nil, &Error{Message: resp.Error}
	case len(resp.Results) != 1:
		return nil, fmt.Errorf("wasmdb: the runtime answered %d results to one statement", len(resp.Results))
	case resp.Results[0].Error != nil:
		return nil, &Error{Message: resp.Results[0].Error.Message, Code: resp.Results[0].Error.Code}
	case resp.Results[0].Response == nil || resp.Results[0].Response.Result == nil:
		return nil, errors.New("wasmdb: the runtime answered no result")
	}
	return &result{resp.Results[0].Response.Result}, nil
}

// encode is an argument's Hrana value; one the runtime cannot store as it is (a float JSON
// cannot write) is refused, not sent as something else.
func encode(x any) (hrana.Value, error) {
	switch x := x.(type) {
	case nil, int64, string, []byte:
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return hrana.Value{}, fmt.Errorf("wasmdb: cannot send the float %v", x)
		}
	default:
		return hrana.Value{}, fmt.Errorf("wasmdb: cannot send a %T", x)
	}
	v, _ := hrana.Typed(x)
	return v, nil
}

type rows struct {
	res *result
	i   int
}

func (r *rows) Columns() []string {
	cols := make([]string, len(r.res.Cols))
	for i, c := range r.res.Cols {
		cols[i] = c.Name
	}
	return cols
}

func (r *rows) Close() error { return nil }

func (r *rows) Next(dest []driver.Value) error {
	if r.i >= len(r.res.Rows) {
		return io.EOF
	}
	row := r.res.Rows[r.i]
	r.i++
	for i := range dest {
		if i >= len(row) {
			return errors.New("wasmdb: a row shorter than its columns")
		}
		v, err := row[i].Go()
		if err != nil {
			return fmt.Errorf("wasmdb: %w", err)
		}
		dest[i] = v
	}
	return nil
}
