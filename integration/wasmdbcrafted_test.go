package integration

import (
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
	_ "modernc.org/sqlite" // to craft the hostile files the way a process version could write them
)

// craftDB writes a SQLite file at path with the statements run on it, as a process version of
// a worker, which may write its database file as it likes, could leave it.
func craftDB(t *testing.T, path string, stmts ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("crafting %s: %s: %v", path, s, err)
		}
	}
}

// TestWasmDatabaseCraftedFile: the runtime opens a WebAssembly worker's SQLite file in its own
// process, and a process version of the same worker may have written that file as it liked. A
// file that is no database, one whose pages are corrupt, and one whose schema holds a trigger
// asking for a gigabyte fail that worker's requests with SQLite's error and nothing else: the
// runtime goes on serving, and another worker's database answers as before.
func TestWasmDatabaseCraftedFile(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Dir: t.TempDir(), Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})

	// Not a database: bytes that only begin like one.
	junk := "SQLite format 3\x00" + strings.Repeat("\xff\x00\x7f\x80", 16<<10)
	writeFiles(t, filepath.Dir(dbFile(s, "garbage")), map[string]string{"db.sqlite": junk})
	// Corrupt pages: a real file whose table's pages are overwritten, its header and schema kept.
	craftDB(t, dbFile(s, "corrupt"), "create table t (v text)", "with recursive n(i) as (select 1 union all select i + 1 from n where i < 400) insert into t select hex(randomblob(200)) from n")
	b, err := os.ReadFile(dbFile(s, "corrupt"))
	if err != nil || len(b) < 8<<10 {
		t.Fatalf("the crafted file: %d bytes, %v", len(b), err)
	}
	for i := 4096 + 100; i < len(b); i += 7 {
		b[i] ^= 0x5a
	}
	writeFiles(t, filepath.Dir(dbFile(s, "corrupt")), map[string]string{"db.sqlite": string(b)})
	// A hostile schema: each insert asks for a gigabyte through a trigger the worker never wrote.
	craftDB(t, dbFile(s, "trigger"), "create table t (v text)", "create table big (b blob)",
		"create trigger grow after insert on t begin insert into big values (zeroblob(1000000000)); end")

	for _, name := range []string{"garbage", "corrupt", "trigger", "good"} {
		uploadOK(t, s, "workers", name+".tgz", wasmDBPackage(t, name, "1.0.0", "database: true\n"), rootKey)
	}
	if resp := s.Get("/good/write?v=kept"); resp.Status != 200 {
		t.Fatalf("the good worker's write = %s", resp)
	}

	for _, c := range []struct{ name, path, want string }{
		{"garbage", "/read", "not a database"},
		{"corrupt", "/read", "malformed"},
		{"trigger", "/write?v=x", "too big"},
	} {
		resp := s.Get("/" + c.name + c.path)
		if resp.Status != 500 || !strings.Contains(string(resp.Body), c.want) {
			t.Errorf("%s: GET %s = %s, want 500 with SQLite's %q", c.name, c.path, resp, c.want)
		}
		if h := s.Get(s.API + "/health"); h.Status != 200 {
			t.Fatalf("after the %s file the runtime's health = %s", c.name, h)
		}
		if got := wasmRows(t, s, "/good"); !slices.Equal(got, []string{"kept"}) {
			t.Errorf("after the %s file the good worker reads %q, want [kept]", c.name, got)
		}
	}
}
