package databases

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/caddy-runtime/runtime/internal/hrana"
)

// maxAnswer bounds the answer to one call of a WebAssembly worker to its database.
const maxAnswer = maxStatements

// idleClose is how long a worker's local database stays open once none of its instances
// runs: a busy worker keeps it, an idle one lets the file go.
const idleClose = 30 * time.Second

// localDB is a worker's local database as the runtime opens it for the worker's WebAssembly
// instances: one pool shared by those running at once.
type localDB struct {
	db    *sql.DB
	users int
	idle  *time.Timer
}

// Session is one WebAssembly instance's use of its worker's database, the only one it can
// name: the statements of its calls run in order on one connection (local mode) or one
// stream of the primary (primary mode), so a transaction begun in one call goes on in the
// next. Close ends it, rolling back what was left uncommitted. A Session is used by one
// instance, one call at a time.
type Session struct {
	m      *Manager
	worker string
	limit  int64
	full   func() // told of each write refused at the limit; may be nil

	local   *localDB
	conn    *sql.Conn
	changes int64 // total_changes() after the connection's last statement

	ns    string
	baton string // the primary's stream, "" before the first call
}

// Session opens worker's database for one WebAssembly instance, bounded by limit bytes (0:
// none); full, when set, is told of each write refused at the limit. The caller closes it.
func (m *Manager) Session(ctx context.Context, worker string, limit int64, full func()) (*Session, error) {
	if m.refuse != nil {
		return nil, m.refuse
	}
	s := &Session{m: m, worker: worker, limit: limit, full: full}
	if m.remote != nil {
		s.ns = Namespace(worker)
		if err := m.remote.Ensure(ctx, s.ns); err != nil {
			return nil, err
		}
		return s, nil
	}
	var err error
	s.local, err = m.openLocal(worker)
	return s, err
}

// openLocal returns worker's local database, opening it unless an instance has it open.
func (m *Manager) openLocal(worker string) (*localDB, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.locals[worker]; l != nil {
		if l.idle != nil {
			l.idle.Stop()
			l.idle = nil
		}
		l.users++
		return l, nil
	}
	dir := m.Folder(worker)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating its database folder: %w", err)
	}
	// A busy timeout lets the instances running at once, and a process version of the same
	// worker, write the file in turn. The journal stays SQLite's default (or what the file
	// says): a rollback journal is no larger than the pages a transaction changes, where a
	// WAL would grow by up to its checkpoint's thousand pages past limits.database. Defensive
	// mode and an untrusted schema keep SQL from corrupting the file or running what its
	// schema holds with the runtime's rights.
	db, err := sql.Open("sqlite", filepath.Join(dir, File)+"?_defensive=1&_pragma=busy_timeout(5000)&_pragma=trusted_schema(0)")
	if err != nil {
		return nil, fmt.Errorf("opening its database: %w", err)
	}
	l := &localDB{db: db, users: 1}
	m.locals[worker] = l
	return l, nil
}

// closeLocal closes worker's local database now, whoever has it open (its purge).
func (m *Manager) closeLocal(worker string) {
	m.mu.Lock()
	l := m.locals[worker]
	delete(m.locals, worker)
	m.mu.Unlock()
	if l != nil {
		_ = l.db.Close()
	}
}

// Close closes the local databases the manager holds open.
func (m *Manager) Close() {
	m.mu.Lock()
	locals := m.locals
	m.locals = map[string]*localDB{}
	m.mu.Unlock()
	for _, l := range locals {
		_ = l.db.Close()
	}
}

// Close ends the session: a transaction left open is rolled back, and the worker's local
// database is closed once no instance has used it for idleClose.
func (s *Session) Close() {
	if s.ns != "" {
		if s.baton != "" { // the primary's stream would otherwise wait for its own timeout
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
			defer cancel()
			body, _ := json.Marshal(hrana.PipelineRequest{Baton: &s.baton, Requests: []hrana.StreamRequest{{Type: "close"}}})
			_, _, _ = s.m.remote.pipeline(ctx, s.ns, body)
		}
		return
	}
	s.release()
	m, l := s.m, s.local
	m.mu.Lock()
	defer m.mu.Unlock()
	if l.users--; l.users > 0 || m.locals[s.worker] != l {
		return
	}
	l.idle = time.AfterFunc(idleClose, func() {
		m.mu.Lock()
		gone := l.users == 0 && m.locals[s.worker] == l
		if gone {
			delete(m.locals, s.worker)
		}
		m.mu.Unlock()
		if gone {
			_ = l.db.Close()
		}
	})
}

// release gives the session's connection back to the pool, rolling back what it left open.
func (s *Session) release() {
	if s.conn == nil {
		return
	}
	_, _ = s.conn.ExecContext(context.Background(), "ROLLBACK") // fails, harmlessly, outside a transaction
	_ = s.conn.Close()
	s.conn = nil
}

// Execute runs one call's Hrana-over-HTTP v2 pipeline (the body of sqld's POST /v2/pipeline)
// and returns its answer: the pipeline's results, or {"error": "…"} when the call cannot run
// at all. Statements end when ctx does (the instance's timeout).
func (s *Session) Execute(ctx context.Context, body []byte) []byte {
	if len(body) > maxStatements {
		return errorAnswer(fmt.Errorf("the pipeline holds %s, more than the %s a call may send", humanize.IBytes(uint64(len(body))), humanize.IBytes(maxStatements)))
	}
	if s.ns != "" {
		return s.forward(ctx, body)
	}
	var req hrana.PipelineRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return errorAnswer(fmt.Errorf("the pipeline is not Hrana over HTTP v2 JSON: %w", err))
	}
	resp := hrana.PipelineResponse{Results: make([]hrana.StreamResult, 0, len(req.Requests))}
	left := maxAnswer
	for _, r := range req.Requests {
		res, size := s.request(ctx, r, left)
		left -= size
		resp.Results = append(resp.Results, res)
	}
	out, err := json.Marshal(resp)
	if err != nil {
		return errorAnswer(err)
	}
	return out
}

// request runs one request of a pipeline, its answer within left bytes.
func (s *Session) request(ctx context.Context, r hrana.StreamRequest, left int) (hrana.StreamResult, int) {
	switch r.Type {
	case "close":
		s.release()
		return hrana.StreamResult{Type: "ok", Response: &hrana.StreamResponse{Type: "close"}}, 32
	case "execute":
		if r.Stmt == nil {
			return failed(errors.New("an execute request needs its stmt")), 64
		}
		res, size, err := s.execute(ctx, r.Stmt, left)
		if err != nil {
			return failed(err), 128 + len(err.Error())
		}
		return hrana.StreamResult{Type: "ok", Response: &hrana.StreamResponse{Type: "execute", Result: res}}, size
	}
	return failed(fmt.Errorf("request type %q is not served to a WebAssembly worker: send execute and close", r.Type)), 128
}

// connect takes the session's connection, bounded by the limit and confined to its file.
func (s *Session) connect(ctx context.Context) error {
	if s.conn != nil {
		return nil
	}
	conn, err := s.local.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("opening its database: %w", err)
	}
	// No ATTACH: the connection reaches the worker's file alone (VACUUM INTO attaches too).
	// No string or blob past what an answer may hold: zeroblob(1e9) would take a gigabyte of
	// the runtime's memory.
	for id, n := range map[int]int{sqlite3.SQLITE_LIMIT_ATTACHED: 0, sqlite3.SQLITE_LIMIT_LENGTH: maxAnswer} {
		if _, err := sqlite.Limit(conn, id, n); err != nil {
			_ = conn.Close()
			return err
		}
	}
	limit := "2147483646" // SQLite's own largest
	if s.limit > 0 {
		var page int64
		if err := conn.QueryRowContext(ctx, "PRAGMA page_size").Scan(&page); err != nil || page <= 0 {
			_ = conn.Close()
			return fmt.Errorf("reading its database's page size: %w", err)
		}
		limit = strconv.FormatInt(max(s.limit/page, 1), 10)
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA max_page_count = "+limit); err != nil {
		_ = conn.Close()
		return fmt.Errorf("bounding its database: %w", err)
	}
	if err := conn.QueryRowContext(ctx, "SELECT total_changes()").Scan(&s.changes); err != nil {
		_ = conn.Close()
		return err
	}
	s.conn = conn
	return nil
}

// execute runs one statement, its answer within left bytes, and returns its result and
// about the bytes it takes.
func (s *Session) execute(ctx context.Context, st *hrana.Stmt, left int) (*hrana.StmtResult, int, error) {
	if err := checkStatement(st.SQL); err != nil {
		return nil, 0, err
	}
	args := make([]any, 0, len(st.Args)+len(st.NamedArgs))
	for i, v := range st.Args {
		a, err := v.Go()
		if err != nil {
			return nil, 0, fmt.Errorf("argument %d: %w", i+1, err)
		}
		args = append(args, a)
	}
	for _, n := range st.NamedArgs {
		a, err := n.Value.Go()
		if err != nil {
			return nil, 0, fmt.Errorf("argument %s: %w", n.Name, err)
		}
		name := strings.TrimLeft(n.Name, ":@$")
		if name == "" {
			return nil, 0, errors.New("a named argument needs its name")
		}
		args = append(args, sql.Named(name, a))
	}
	if err := s.connect(ctx); err != nil {
		return nil, 0, err
	}
	res, size, err := s.query(ctx, st.SQL, args, left)
	if s.isFull(err) {
		return nil, 0, s.m.Full(s.worker, s.limit)
	}
	return res, size, err
}

// query runs sql on the session's connection and reads what it answers.
func (s *Session) query(ctx context.Context, query string, args []any, left int) (*hrana.StmtResult, int, error) {
	rows, err := s.conn.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, 0, err
	}
	res := &hrana.StmtResult{Cols: make([]hrana.Col, len(types)), Rows: [][]hrana.Value{}}
	size := 128
	for i, t := range types {
		res.Cols[i].Name = t.Name()
		if d := t.DatabaseTypeName(); d != "" {
			res.Cols[i].Decltype = &d
		}
		size += 48 + len(t.Name()) + len(t.DatabaseTypeName())
	}
	cells, ptrs := make([]any, len(types)), make([]any, len(types))
	for i := range cells {
		ptrs[i] = &cells[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, 0, err
		}
		row := make([]hrana.Value, len(cells))
		for i, c := range cells {
			var n int
			row[i], n = hrana.Typed(c)
			size += n
		}
		if size > left {
			return nil, 0, fmt.Errorf("the answer passes the %s a call may take: select fewer rows or smaller values", humanize.IBytes(maxAnswer))
		}
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if err := rows.Close(); err != nil {
		return nil, 0, err
	}
	var changes, total, rowid int64
	if err := s.conn.QueryRowContext(ctx, "SELECT changes(), total_changes(), last_insert_rowid()").Scan(&changes, &total, &rowid); err != nil {
		return nil, 0, err
	}
	if total != s.changes { // changes() tells the last statement that changed rows, maybe an earlier one
		res.AffectedRowCount = changes
	}
	s.changes = total
	id := strconv.FormatInt(rowid, 10)
	res.LastInsertRowid = &id
	return res, size, nil
}

// isFull tells a write refused at max_page_count, telling the session's full.
func (s *Session) isFull(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) || e.Code()&0xff != sqlite3.SQLITE_FULL {
		return false
	}
	if s.full != nil {
		s.full()
	}
	return true
}

// forward sends the pipeline to the worker's namespace on the primary, on the session's
// stream, refusing it while the namespace is past its limit.
func (s *Session) forward(ctx context.Context, body []byte) []byte {
	var req struct {
		Baton    *string         `json:"baton"`
		Requests json.RawMessage `json:"requests"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Requests) == 0 {
		return errorAnswer(fmt.Errorf("the pipeline is not Hrana over HTTP v2 JSON: %v", err))
	}
	r := s.m.remote
	if s.limit > 0 && r.past(ctx, s.ns, s.limit, r.gauge(s.ns), func(err error) { s.m.record(s.worker, err) }) {
		if s.full != nil {
			s.full()
		}
		return errorAnswer(LimitError(s.limit))
	}
	req.Baton = nil
	if s.baton != "" {
		req.Baton = &s.baton
	}
	body, _ = json.Marshal(req)
	_, out, err := r.pipeline(ctx, s.ns, body) // sqld's error answers are passed on as they are
	if err != nil {
		return errorAnswer(err)
	}
	var resp hrana.PipelineResponse
	if json.Unmarshal(out, &resp) != nil || resp.Results == nil {
		return out // sqld's {"error": …}, passed on as it is
	}
	s.baton = ""
	if resp.Baton != nil {
		s.baton = *resp.Baton
	}
	resp.Baton, resp.BaseURL = nil, nil // the stream is the session's, not the worker's
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(resp)
	return bytes.TrimSpace(b.Bytes())
}

// sqliteCode names an SQLite result code as Hrana's errors do, e.g. SQLITE_CONSTRAINT.
func sqliteCode(code int) string {
	text := sqlite.ErrorCodeString[code&0xff]
	if i := strings.LastIndex(text, "("); i >= 0 && strings.HasSuffix(text, ")") {
		return text[i+1 : len(text)-1]
	}
	return ""
}
