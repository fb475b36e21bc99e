package integration

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// jsDBWorker is a Bun worker with a database and a schedule: each tick of its cron entry
// (POST /tick with Runtime-Cron) is a row of ticks in its SQLite file at DATABASE_PATH, opened
// with bun:sqlite; POST /write?note= adds a note, GET /rows shows both tables, /env its
// DATABASE_* variables, /open?path= tries to create a database elsewhere.
const jsDBWorker = `import { Database } from "bun:sqlite";

const db = new Database(process.env.DATABASE_PATH, { create: true });
db.run("CREATE TABLE IF NOT EXISTS ticks (id INTEGER PRIMARY KEY, trigger TEXT NOT NULL)");
db.run("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, note TEXT NOT NULL)");

export default {
  fetch(req) {
    const url = new URL(req.url);
    if (req.method === "POST" && url.pathname === "/tick") {
      const trigger = req.headers.get("runtime-cron");
      if (!trigger) return new Response("only the runtime's cron ticks", { status: 403 });
      db.run("INSERT INTO ticks (trigger) VALUES (?)", [trigger]);
      return new Response("ticked");
    }
    if (req.method === "POST" && url.pathname === "/write") {
      db.run("INSERT INTO notes (note) VALUES (?)", [url.searchParams.get("note")]);
      return new Response("written", { status: 201 });
    }
    if (url.pathname === "/rows") {
      return Response.json({
        ticks: db.query("SELECT trigger FROM ticks ORDER BY id").all().map((r) => r.trigger),
        notes: db.query("SELECT note FROM notes ORDER BY id").all().map((r) => r.note),
      });
    }
    if (url.pathname === "/open") {
      try {
        new Database(url.searchParams.get("path"), { create: true }).run("CREATE TABLE t (x)");
        return new Response("opened");
      } catch (err) {
        return new Response(String(err), { status: 403 });
      }
    }
    return Response.json({ DATABASE_URL: process.env.DATABASE_URL ?? "", DATABASE_PATH: process.env.DATABASE_PATH ?? "" });
  },
};
`

// TestJSDatabaseAndCron: a Bun worker with database: true writes and reads rows with
// bun:sqlite in the file DATABASE_PATH names (and nowhere else it is not given), and its cron
// entry of @every 1s calls it, each tick a row; on the host's network, in an isolated one and
// under worker_user. Bun alone: Node 20 has no built-in SQLite, Deno's downloads its library.
func TestJSDatabaseAndCron(t *testing.T) {
	t.Parallel()
	bun := jsEngines[0].binary(t)
	for name, setting := range map[string]string{"host": "", "isolated": "worker_network isolated", "worker_user": "worker_user nobody"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if setting != "" && os.Geteuid() != 0 {
				t.Skip(setting + " needs root")
			}
			s := startJS(t, bun, setting)
			if name == "worker_user" {
				apps := filepath.Join(s.DataDir, "apps")
				if err := os.MkdirAll(apps, 0o755); err != nil {
					t.Fatal(err)
				}
				openToOthers(apps) // the test's temporary folders are its own; state_dir stays closed
			}
			uploadOK(t, s, "workers", "notes.tgz", jsArchive(t, "notes", "database: true\ncron:\n  - { name: beat, schedule: \"@every 1s\", path: /tick }\n",
				harness.File{Name: "index.js", Body: jsDBWorker}), rootKey)
			var env map[string]string
			if resp := s.Get("/notes/env"); resp.Status != 200 || resp.JSON(&env) != nil {
				t.Fatalf("GET /notes/env = %s", resp)
			}
			// Under worker_user the folder is mounted in the worker's scratch, which it cannot
			// pass state_dir to reach (see TestDatabaseWorkerUser).
			path, where := env["DATABASE_PATH"], string(filepath.Separator)+"databases"+string(filepath.Separator)
			if name == "worker_user" {
				where = "/.database/db.sqlite"
			}
			if path == "" || env["DATABASE_URL"] != "file:"+path || !strings.Contains(path, where) {
				t.Fatalf("DATABASE_URL %q, DATABASE_PATH %q: want a file: URL of a file at %s", env["DATABASE_URL"], path, where)
			}
			if resp := s.Do("POST", "/notes/write?note=kept"); resp.Status != 201 {
				t.Fatalf("POST /notes/write = %s", resp)
			}
			// The data rule is the database's folder alone: not the version's folder, not state_dir.
			for _, other := range []string{filepath.Join(s.DataDir, "apps", "notes", "1.0.0", "x.db"), filepath.Join(s.DataDir, "state", "x.db")} {
				if resp := s.Get("/notes/open?" + url.Values{"path": {other}}.Encode()); resp.Status != 403 {
					t.Errorf("the worker created a database at %s: %s", other, resp)
				}
			}
			var rows struct{ Ticks, Notes []string }
			harness.EventuallyNil(t, 30*time.Second, func() error {
				resp, err := s.Send("GET", "/notes/rows")
				if err != nil || resp.Status != 200 || resp.JSON(&rows) != nil {
					return fmt.Errorf("GET /notes/rows = %v %v", resp, err)
				}
				if len(rows.Ticks) < 2 {
					return fmt.Errorf("%d ticks recorded so far", len(rows.Ticks))
				}
				return nil
			})
			if len(rows.Notes) != 1 || rows.Notes[0] != "kept" || rows.Ticks[0] != "beat" {
				t.Errorf("rows = %+v; want the note kept and ticks of beat", rows)
			}
		})
	}
}
