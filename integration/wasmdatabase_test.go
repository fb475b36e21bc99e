package integration

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// wasmDBRead reads the rows file of the WebAssembly worker at base from its database folder.
func wasmDBRead(t *testing.T, s *harness.Server, base string) string {
	t.Helper()
	resp := s.Get(base + "/read?path=" + url.QueryEscape("/.database/rows.txt"))
	if resp.Status != 200 {
		t.Fatalf("reading the rows through %s = %s", base, resp)
	}
	return string(resp.Body)
}

// TestDatabaseWasm: a WebAssembly worker with database: true finds its database folder at
// /.database for files of its own (DATABASE_URL names the runtime's database module, see
// TestWasmDatabaseDriver); what it writes there survives a disable and enable, a new version and a restart of the
// runtime, lands in the worker's own folder under state_dir/databases (which runtime backup
// copies), where another
// worker reaches it neither by path nor by a symbolic link; limits.database stops its writes,
// and past it the worker's next request is refused with 503, the error in its log and the API.
func TestDatabaseWasm(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := harness.Config{Dir: dir, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "\t\tworker_database_size 1MiB"}
	s := harness.Start(t, cfg)
	upload := func(name, version, extra string) {
		t.Helper()
		uploadOK(t, s, "workers", name+".tgz", wasmPackage(t, name, version, "database: true\n"+extra), rootKey)
	}
	upload("notes", "1.0.0", "")
	upload("other", "1.0.0", "")

	var e wasmEcho
	if resp := s.Get("/notes/"); resp.Status != 200 || resp.JSON(&e) != nil {
		t.Fatalf("GET / = %s", resp)
	}
	if e.Env["DATABASE_URL"] != "runtime:" || e.Env["DATABASE_PATH"] != "" {
		t.Fatalf("DATABASE_URL %q, DATABASE_PATH %q: want the runtime's database module named, no path", e.Env["DATABASE_URL"], e.Env["DATABASE_PATH"])
	}
	if resp := s.Get("/notes/append?v=kept"); resp.Status != 200 {
		t.Fatalf("append = %s", resp)
	}
	folder := filepath.Join(s.DataDir, "state", "databases", "notes")
	host := filepath.Join(folder, "rows.txt")
	if b, err := os.ReadFile(host); err != nil || string(b) != "kept\n" {
		t.Fatalf("the worker's database folder holds %q (%v), want its row", b, err)
	}

	for _, verb := range []string{"disable", "enable"} {
		if resp := s.Do("POST", s.API+"/workers/_/notes/1.0.0/"+verb, harness.WithKey(rootKey)); resp.Status != 200 {
			t.Fatalf("%s = %s", verb, resp)
		}
	}
	if got := wasmDBRead(t, s, "/notes"); got != "kept\n" {
		t.Fatalf("after disable and enable the worker reads %q", got)
	}
	upload("notes", "1.1.0", "")
	if got := wasmDBRead(t, s, "/notes"); got != "kept\n" {
		t.Fatalf("version 1.1.0 reads %q", got)
	}
	s.Stop()
	s = harness.Start(t, cfg)
	if got := wasmDBRead(t, s, "/notes"); got != "kept\n" {
		t.Fatalf("after a restart of the runtime the worker reads %q", got)
	}

	// Another worker has a folder of its own; the first's is out of its reach: by the path
	// on the host, by climbing out of its own, or by a link it makes.
	for _, path := range []string{
		"/other/read?path=" + url.QueryEscape("/.database/rows.txt"),
		"/other/read?path=" + url.QueryEscape(host),
		"/other/read?path=" + url.QueryEscape("/.database/../notes/rows.txt"),
		"/other/symlink?name=l&target=" + url.QueryEscape("../notes/rows.txt"),
		"/other/symlink?name=a&target=" + url.QueryEscape(host),
	} {
		if resp := s.Get(path); resp.Status == 200 || strings.Contains(string(resp.Body), "kept") {
			t.Errorf("GET %s reached the first worker's database: %s", path, resp)
		}
	}

	// runtime backup copies the worker's files as they are.
	if out, err := harness.RunCommand(t, s.Dir, nil, "backup", "keys.db"); err != nil || !strings.Contains(out, "workers' databases") {
		t.Fatalf("runtime backup: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(s.Dir, "keys.db.databases", "notes", "rows.txt")); err != nil || string(b) != "kept\n" {
		t.Errorf("the backup of the worker's folder holds %q (%v), want its row", b, err)
	}

	info := workerDatabase(t, s, "notes")
	if info["mode"] != "local" || info["size"].(float64) <= 0 {
		t.Errorf("database record = %v, want mode local and a size", info)
	}

	// limits.database (capped at 1 MiB by worker_database_size): the instance's writes stop at
	// it, with the error in the worker's log and the API.
	resp := s.Get("/notes/fill?n=64&kib=64") // 4 MiB unless stopped
	if resp.Status != 200 || !strings.Contains(string(resp.Body), "error") {
		t.Fatalf("filling the database past its limit = %s", resp)
	}
	if info, err := os.Stat(filepath.Join(folder, "fill.bin")); err != nil || info.Size() > 1<<20 {
		t.Fatalf("the worker wrote %v past a 1 MiB limit (%v)", info, err)
	}
	logs := s.Get(s.API+"/workers/_/notes/logs", harness.WithKey(rootKey))
	if logs.Status != 200 || !strings.Contains(string(logs.Body), "limits.database") {
		t.Errorf("the worker's log does not tell its database reached its limit: %s", logs)
	}
	databaseError := func(why string) {
		t.Helper()
		info := workerDatabase(t, s, "notes")
		if msg, _ := info["error"].(string); !strings.Contains(msg, "limits.database") {
			b, _ := json.Marshal(info)
			t.Errorf("the database record does not tell %s: %s", why, b)
		}
	}
	databaseError("why the writes failed")

	// A version with a lower limit finds the folder past it: its requests are refused, as a
	// process worker's start is.
	upload("notes", "1.2.0", "limits:\n  database: 256KiB\n")
	again := s.Get("/notes/")
	if again.Status != 503 || !strings.Contains(string(again.Body), "limits.database") {
		t.Errorf("a request to a worker whose database is past its limit = %s", again)
	}
	databaseError("why the worker is refused")
}
