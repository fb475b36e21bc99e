// Command db-wasm is a guestbook as a WebAssembly worker with a database of its own: a Go
// program built for WASI preview 1 (GOOS=wasip1 GOARCH=wasm) that keeps its entries with
// database/sql through the runtime's guest driver, github.com/caddy-runtime/runtime/wasmdb.
// Its database is the same a process worker of the name would open: a SQLite file under
// state_dir on one instance, its namespace on the libSQL primary in a cluster.
//
//	GET  /   the entries, newest first, as JSON
//	POST /   adds the entry of the form field text
package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"

	_ "github.com/caddy-runtime/runtime/wasmdb"
)

func main() {
	db, err := sql.Open("runtime", os.Getenv("DATABASE_URL")) // DATABASE_URL is "runtime:"
	if err == nil {
		_, err = db.Exec("create table if not exists entries (id integer primary key, text text not null)")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "opening the database:", err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { list(w, db) })
	mux.HandleFunc("POST /{$}", func(w http.ResponseWriter, r *http.Request) {
		text := r.FormValue("text")
		if text == "" || len(text) > 1000 {
			http.Error(w, "text: 1 to 1000 bytes", http.StatusBadRequest)
			return
		}
		if _, err := db.Exec("insert into entries (text) values (?)", text); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		list(w, db)
	})
	if err := cgi.Serve(http.StripPrefix(os.Getenv("SCRIPT_NAME"), mux)); err != nil {
		fmt.Fprintln(os.Stderr, "serving:", err)
		os.Exit(1)
	}
}

// list writes the entries, newest first.
func list(w http.ResponseWriter, db *sql.DB) {
	rows, err := db.Query("select text from entries order by id desc limit 100")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer rows.Close()
	entries := []string{}
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		entries = append(entries, text)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"entries": entries})
}
