package testkit

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	_ "github.com/tursodatabase/libsql-client-go/libsql"
)

// TestStartSqld starts the libSQL server the sync-mode tests use and runs a statement on it
// over its HTTP API (Hrana's pipeline), which is how libsql-client-go talks to it.
func TestStartSqld(t *testing.T) {
	s := StartSqld(t)
	exec := func(sql string) string {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"requests": []any{
			map[string]any{"type": "execute", "stmt": map[string]any{"sql": sql}},
			map[string]any{"type": "close"},
		}})
		resp, err := http.Post(s.URL+"/v2/pipeline", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", sql, resp.StatusCode, out.String())
		}
		return out.String()
	}
	exec("CREATE TABLE t (v TEXT)")
	exec("INSERT INTO t VALUES ('from the test')")
	if got := exec("SELECT v FROM t"); !strings.Contains(got, "from the test") {
		t.Errorf("SELECT answered %s", got)
	}
	s.Stop()
	if err := s.ready(); err == nil {
		t.Error("sqld still answers after Stop")
	}
}

// TestSqldThroughTheDriver reaches sqld with the driver the key store uses
// (libsql-client-go, over http://), in a transaction, as the sync mode will.
func TestSqldThroughTheDriver(t *testing.T) {
	s := StartSqld(t)
	db, err := sql.Open("libsql", s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE changes (n INTEGER PRIMARY KEY AUTOINCREMENT, what TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"create", "revoke"} {
		if _, err := tx.ExecContext(ctx, "INSERT INTO changes (what) VALUES (?)", what); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var n int
	var last string
	if err := db.QueryRowContext(ctx, "SELECT count(*), max(what) FROM changes WHERE n > ?", 0).Scan(&n, &last); err != nil || n != 2 || last != "revoke" {
		t.Errorf("read back %d rows, last %q, %v", n, last, err)
	}
}
