// Command testwasmdb is a WebAssembly worker for tests (GOOS=wasip1 GOARCH=wasm) that keeps
// rows in its database through the guest driver (package wasmdb), by PATH_INFO:
//
//	/write   adds the row ?v= to table t
//	/read    lists the rows of t
//	/sql     runs the statement ?q= and answers its rows or its error
//	/fill    adds ?n= rows of ?kib= KiB (default 64) until a write fails
//	/types   stores and reads back one value of each type
//	/tx      adds the row ?v= in a transaction it rolls back
package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	_ "github.com/caddy-runtime/runtime/wasmdb"
)

func main() {
	q, _ := url.ParseQuery(os.Getenv("QUERY_STRING"))
	db, err := sql.Open("runtime", os.Getenv("DATABASE_URL"))
	if err == nil {
		_, err = db.Exec("create table if not exists t (v text)")
	}
	if err != nil {
		answer(500, map[string]any{"error": err.Error()})
		return
	}
	switch os.Getenv("PATH_INFO") {
	case "/write":
		if _, err := db.Exec("insert into t values (?)", q.Get("v")); err != nil {
			answer(500, map[string]any{"error": err.Error()})
			return
		}
		answer(200, map[string]any{"ok": true})
	case "/read":
		rows, err := query(db, "select v from t order by rowid")
		if err != nil {
			answer(500, map[string]any{"error": err.Error()})
			return
		}
		vs := []any{}
		for _, r := range rows {
			vs = append(vs, r[0])
		}
		answer(200, map[string]any{"rows": vs})
	case "/sql":
		rows, err := query(db, q.Get("q"))
		if err != nil {
			answer(200, map[string]any{"error": err.Error()})
			return
		}
		answer(200, map[string]any{"rows": rows})
	case "/fill":
		n, _ := strconv.Atoi(q.Get("n"))
		kib, _ := strconv.Atoi(q.Get("kib"))
		if kib == 0 {
			kib = 64
		}
		written := 0
		for ; written < n; written++ {
			if _, err := db.Exec("insert into t values (?)", strings.Repeat("x", kib<<10)); err != nil {
				answer(200, map[string]any{"written": written, "error": err.Error()})
				return
			}
		}
		answer(200, map[string]any{"written": written, "error": ""})
	case "/types":
		if _, err := db.Exec("create table if not exists typed (i integer, f real, s text, b blob, n)"); err == nil {
			_, err = db.Exec("insert into typed values (?, ?, ?, ?, ?)", int64(-9007199254740993), 1.5, "héllo", []byte{0, 1, 255}, nil)
		}
		var i int64
		var f float64
		var s string
		var b []byte
		var n any
		if err == nil {
			err = db.QueryRow("select i, f, s, b, n from typed order by rowid desc limit 1").Scan(&i, &f, &s, &b, &n)
		}
		if err != nil {
			answer(500, map[string]any{"error": err.Error()})
			return
		}
		answer(200, map[string]any{"i": strconv.FormatInt(i, 10), "f": f, "s": s, "b": b, "n": n})
	case "/tx":
		tx, err := db.Begin()
		if err == nil {
			_, err = tx.Exec("insert into t values (?)", q.Get("v"))
		}
		if err == nil {
			err = tx.Rollback()
		}
		if err != nil {
			answer(500, map[string]any{"error": err.Error()})
			return
		}
		answer(200, map[string]any{"ok": true})
	default:
		answer(404, map[string]any{})
	}
}

// query runs sql and reads every row, each cell as the driver gives it.
func query(db *sql.DB, sql string) ([][]any, error) {
	rows, err := db.Query(sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	out := [][]any{}
	for rows.Next() {
		cells, ptrs := make([]any, len(cols)), make([]any, len(cols))
		for i := range cells {
			ptrs[i] = &cells[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, cells)
	}
	return out, rows.Err()
}

func answer(status int, body any) {
	b, _ := json.Marshal(body)
	fmt.Printf("Status: %d\r\nContent-Type: application/json\r\n\r\n%s", status, b)
}
