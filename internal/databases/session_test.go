package databases

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/hrana"
)

// pipe runs the statements of one pipeline in s and returns its results.
func pipe(t *testing.T, s *Session, body string) hrana.PipelineResponse {
	t.Helper()
	var resp hrana.PipelineResponse
	out := s.Execute(context.Background(), []byte(body))
	if err := json.Unmarshal(out, &resp); err != nil || resp.Results == nil {
		t.Fatalf("Execute(%s) = %s", body, out)
	}
	return resp
}

func execute(sql string, args ...string) string {
	return `{"type":"execute","stmt":{"sql":` + quote(sql) + `,"args":[` + strings.Join(args, ",") + `]}}`
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestSessionTypes runs a pipeline on a local database: each type goes in and comes back as
// Hrana writes it, with the columns, the affected rows and the last rowid; a failed statement
// is an error result naming SQLite's code, and the pipeline goes on after it.
func TestSessionTypes(t *testing.T) {
	m := New(t.TempDir(), nil)
	defer m.Close()
	s, err := m.Session(context.Background(), "app", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp := pipe(t, s, `{"requests":[`+strings.Join([]string{
		execute("create table t (i integer primary key, f real, s text, b blob, n)"),
		execute("insert into t values (?, ?, ?, ?, ?)", `{"type":"integer","value":"9007199254740993"}`, `{"type":"float","value":1.5}`,
			`{"type":"text","value":"héllo"}`, `{"type":"blob","base64":"AAH/"}`, `{"type":"null"}`),
		execute("insert into t (i) values (1)"),
		execute("select i, f, s, b, n from t order by i desc"),
		`{"type":"execute","stmt":{"sql":"select :a + 1 as x","named_args":[{"name":":a","value":{"type":"integer","value":"41"}}]}}`,
		execute("insert into t (i) values (1)"),
		execute("select count(*) from t"),
		`{"type":"batch"}`,
	}, ",")+`]}`)
	if len(resp.Results) != 8 {
		t.Fatalf("%d results, want 8", len(resp.Results))
	}
	for i, want := range []string{"ok", "ok", "ok", "ok", "ok", "error", "ok", "error"} {
		if resp.Results[i].Type != want {
			t.Fatalf("result %d = %+v, want %s", i, resp.Results[i], want)
		}
	}
	if r := resp.Results[1].Response.Result; r.AffectedRowCount != 1 || *r.LastInsertRowid != "9007199254740993" {
		t.Errorf("insert = %+v, want one row and its rowid", r)
	}
	sel := resp.Results[3].Response.Result
	if sel.AffectedRowCount != 0 || len(sel.Cols) != 5 || sel.Cols[0].Name != "i" || *sel.Cols[0].Decltype != "INTEGER" || len(sel.Rows) != 2 {
		t.Fatalf("select = %+v", sel)
	}
	got, _ := json.Marshal(sel.Rows[0])
	want := `[{"type":"integer","value":"9007199254740993"},{"type":"float","value":1.5},{"type":"text","value":"héllo"},{"type":"blob","base64":"AAH/"},{"type":"null"}]`
	if string(got) != want {
		t.Errorf("row = %s, want %s", got, want)
	}
	if x, _ := json.Marshal(resp.Results[4].Response.Result.Rows); string(x) != `[[{"type":"integer","value":"42"}]]` {
		t.Errorf("named argument = %s", x)
	}
	if e := resp.Results[5].Error; e.Code != "SQLITE_CONSTRAINT" || !strings.Contains(e.Message, "UNIQUE") {
		t.Errorf("duplicate key = %+v, want SQLITE_CONSTRAINT", e)
	}
	if x, _ := json.Marshal(resp.Results[6].Response.Result.Rows); string(x) != `[[{"type":"integer","value":"2"}]]` {
		t.Errorf("count after the failure = %s", x)
	}
	for _, bad := range []string{`{"type":"integer","value":12}`, `{"type":"integer","value":"1e3"}`, `{"type":"blob","base64":"!"}`, `{"type":"date"}`} {
		if r := pipe(t, s, `{"requests":[`+execute("select ?", bad)+`]}`).Results[0]; r.Type != "error" {
			t.Errorf("argument %s = %+v, want an error", bad, r)
		}
	}
}

// TestSessionTransaction: a transaction spans the calls of one session, another session does
// not see it, and closing the session rolls back what it left open.
func TestSessionTransaction(t *testing.T) {
	m := New(t.TempDir(), nil)
	defer m.Close()
	a, _ := m.Session(context.Background(), "app", 0, nil)
	pipe(t, a, `{"requests":[`+execute("create table t (v)")+`]}`)
	pipe(t, a, `{"requests":[`+execute("begin")+`]}`)
	pipe(t, a, `{"requests":[`+execute("insert into t values (1)")+`]}`)
	b, _ := m.Session(context.Background(), "app", 0, nil)
	defer b.Close()
	count := func(s *Session) string {
		rows, _ := json.Marshal(pipe(t, s, `{"requests":[`+execute("select count(*) from t")+`]}`).Results[0].Response.Result.Rows)
		return string(rows)
	}
	if got := count(a); got != `[[{"type":"integer","value":"1"}]]` {
		t.Errorf("the session reads %s inside its transaction", got)
	}
	if got := count(b); got != `[[{"type":"integer","value":"0"}]]` {
		t.Errorf("another session reads %s of an uncommitted transaction", got)
	}
	a.Close()
	if got := count(b); got != `[[{"type":"integer","value":"0"}]]` {
		t.Errorf("after the session closed another reads %s: its transaction was kept", got)
	}
}

// TestSessionBounds: a pipeline too large or not JSON is refused whole; an answer past
// maxAnswer is an error result; a write past the limit fails with SQLITE_FULL, told and
// recorded naming limits.database; a statement past its context is interrupted; statements
// that would reach outside the worker's file, or make a value past maxAnswer in the runtime's
// memory, are refused.
func TestSessionBounds(t *testing.T) {
	m := New(t.TempDir(), nil)
	defer m.Close()
	full := 0
	s, _ := m.Session(context.Background(), "app", 64<<10, func() { full++ })
	defer s.Close()
	for _, body := range []string{"not json", strings.Repeat(" ", maxStatements+1)} {
		if out := string(s.Execute(context.Background(), []byte(body))); !strings.HasPrefix(out, `{"error":`) {
			t.Errorf("Execute of %.20q = %.200s, want an error", body, out)
		}
	}
	big := pipe(t, s, `{"requests":[`+execute("with recursive n(i) as (select 1 union all select i+1 from n limit 40) select zeroblob(1000000) from n")+`]}`)
	if r := big.Results[0]; r.Type != "error" || !strings.Contains(r.Error.Message, "answer") {
		t.Errorf("an answer of 40 MB = %+v, want an error", r)
	}

	pipe(t, s, `{"requests":[`+execute("create table t (v)")+`]}`)
	fill := pipe(t, s, `{"requests":[`+execute("insert into t values (zeroblob(200000))")+`]}`)
	if r := fill.Results[0]; r.Type != "error" || !strings.Contains(r.Error.Message, "limits.database") || full != 1 {
		t.Errorf("a write past 64 KiB = %+v (told %d times), want the limit named", r, full)
	}
	if info := m.Info(context.Background(), "app"); !strings.Contains(info.Error, "limits.database") {
		t.Errorf("Info = %+v, want the limit named", info)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	out := s.Execute(ctx, []byte(`{"requests":[`+execute("with recursive n(i) as (select 1 union all select i+1 from n) select count(*) from n")+`]}`))
	if time.Since(start) > 5*time.Second || !strings.Contains(string(out), `"error"`) {
		t.Errorf("an endless statement took %s and answered %.200s", time.Since(start), out)
	}

	for _, sql := range []string{
		"attach 'x.db' as x", "ATTACH DATABASE ':memory:' AS m", "detach x", "vacuum", "VACUUM INTO '/tmp/x.db'",
		"pragma max_page_count = 100000", "PRAGMA main.cache_size=-1000000", `select * from "pragma_max_page_count"(1)`,
		"select * from pragma_cache_size", "select 1; select 2", "select load_extension('x')",
		"/* */ attach 'x' as y", "-- c\n PRAGMA [journal_mode] = off",
		"select length(zeroblob(100000000))", "select length(printf('%.*c', 100000000, 'x'))",
	} {
		if r := pipe(t, s, `{"requests":[`+execute(sql)+`]}`).Results[0]; r.Type != "error" {
			t.Errorf("%q ran: %+v", sql, r)
		}
	}
	for _, sql := range []string{"pragma foreign_keys = on", "select * from pragma_table_info('t')", "select 'attach' as pragma, 1; -- x",
		"select 'a;b'", `select "v" from t`} {
		if r := pipe(t, s, `{"requests":[`+execute(sql)+`]}`).Results[0]; r.Type != "ok" {
			t.Errorf("%q refused: %+v", sql, r.Error)
		}
	}
}
