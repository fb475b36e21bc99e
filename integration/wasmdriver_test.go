package integration

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// wasmDBPackage is the archive of the guest driver's test worker (testkit/testwasmdb).
func wasmDBPackage(t *testing.T, name, version, extra string) []byte {
	t.Helper()
	module, err := os.ReadFile(harness.TestWasmDB(t))
	if err != nil {
		t.Fatal(err)
	}
	return harness.TarGz(t, pkg(fmt.Sprintf("name: '%s'\nversion: %s\nruntime: wasm\nmodule: app.wasm\n%s", name, version, extra),
		harness.File{Name: "app.wasm", Body: string(module)})...)
}

// dbFile is the SQLite file the runtime keeps for worker name's database (local mode).
func dbFile(s *harness.Server, name string) string {
	return filepath.Join(s.DataDir, "state", "databases", name, "db.sqlite")
}

// wasmRows reads the rows the guest driver's worker at base lists.
func wasmRows(t *testing.T, s *harness.Server, base string) []string {
	t.Helper()
	var out struct {
		Rows []string `json:"rows"`
	}
	if resp := s.Get(base + "/read"); resp.Status != 200 || resp.JSON(&out) != nil {
		t.Fatalf("GET %s/read = %s", base, resp)
	}
	return out.Rows
}

// wasmSQL runs one statement through the worker at base and returns its error, "" if none.
func wasmSQL(t *testing.T, s *harness.Server, base, sql string) string {
	t.Helper()
	var out struct {
		Error string `json:"error"`
	}
	if resp := s.Get(base + "/sql?q=" + url.QueryEscape(sql)); resp.Status != 200 || resp.JSON(&out) != nil {
		t.Fatalf("GET %s/sql = %s", base, resp)
	}
	return out.Error
}

// TestWasmDatabaseDriver: a Go WebAssembly worker writes rows with database/sql through the
// guest driver (package wasmdb) into the same SQLite file a process version of it would open;
// they survive a disable and enable, a new version and a restart of the runtime, and a process
// version reads them; requests
// writing at once lose none; values keep their types; a rolled back transaction leaves
// nothing; another worker reaches none of them, by SQL (ATTACH) or by its folder; a module
// importing the database without database: true is refused at upload; limits.database stops
// a write past it, with the error in the worker's log and the API.
func TestWasmDatabaseDriver(t *testing.T) {
	t.Parallel()
	cfg := harness.Config{Dir: t.TempDir(), Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "\t\tworker_database_size 4MiB"}
	s := harness.Start(t, cfg)
	upload := func(name, version, extra string) {
		t.Helper()
		uploadOK(t, s, "workers", name+".tgz", wasmDBPackage(t, name, version, "database: true\n"+extra), rootKey)
	}

	refused := s.Upload(s.API+"/workers/upload", "bare.tgz", wasmDBPackage(t, "bare", "1.0.0", ""), harness.WithKey(rootKey))
	if refused.Status != 400 || !strings.Contains(string(refused.Body), "INVALID_MODULE") || !strings.Contains(string(refused.Body), "database: true") {
		t.Fatalf("a module importing runtime_database without database: true = %s, want 400 INVALID_MODULE naming database: true", refused)
	}

	upload("notes", "1.0.0", "")
	upload("other", "1.0.0", "")
	var typed struct {
		I string  `json:"i"`
		F float64 `json:"f"`
		S string  `json:"s"`
		B []byte  `json:"b"`
		N any     `json:"n"`
	}
	if resp := s.Get("/notes/types"); resp.Status != 200 || resp.JSON(&typed) != nil {
		t.Fatalf("types = %s", resp)
	}
	if typed.I != "-9007199254740993" || typed.F != 1.5 || typed.S != "héllo" || string(typed.B) != "\x00\x01\xff" || typed.N != nil {
		t.Errorf("values read back = %+v, want each as written", typed)
	}
	if resp := s.Get("/notes/write?v=kept"); resp.Status != 200 {
		t.Fatalf("write = %s", resp)
	}
	if resp := s.Get("/notes/tx?v=rolled-back"); resp.Status != 200 {
		t.Fatalf("tx = %s", resp)
	}
	if got := wasmRows(t, s, "/notes"); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("rows = %q, want [kept]", got)
	}
	file := dbFile(s, "notes")
	if info, err := os.Stat(file); err != nil || info.Size() == 0 {
		t.Fatalf("the worker's SQLite file: %v %v", info, err)
	}

	// Requests writing at once lose no row.
	var wg sync.WaitGroup
	const writers = 16
	for i := range writers {
		wg.Go(func() {
			if resp := s.Get(fmt.Sprintf("/notes/write?v=c%d", i)); resp.Status != 200 {
				t.Errorf("concurrent write %d = %s", i, resp)
			}
		})
	}
	wg.Wait()
	if got := wasmRows(t, s, "/notes"); len(got) != writers+1 {
		t.Fatalf("after %d concurrent writes the worker reads %d rows: %q", writers, len(got), got)
	}

	for _, verb := range []string{"disable", "enable"} {
		if resp := s.Do("POST", s.API+"/workers/_/notes/1.0.0/"+verb, harness.WithKey(rootKey)); resp.Status != 200 {
			t.Fatalf("%s = %s", verb, resp)
		}
	}
	upload("notes", "1.1.0", "")
	s.Stop()
	s = harness.Start(t, cfg)
	if got := wasmRows(t, s, "/notes"); len(got) != writers+1 || got[0] != "kept" {
		t.Fatalf("after disable, enable, a new version and a restart the worker reads %q", got)
	}

	// A process version of the worker opens the same file and reads the same rows.
	uploadDB(t, s, "notes", "2.0.0", "")
	if got := dbRows(t, s, "/notes/read"); len(got) != writers+1 || got[0] != "kept" {
		t.Errorf("a process version of the worker reads %q, want the WebAssembly versions' rows", got)
	}

	// The other worker has a database of its own, and no statement reaches the first's.
	if got := wasmRows(t, s, "/other"); len(got) != 0 {
		t.Errorf("the other worker reads %q, want none of the first's rows", got)
	}
	for _, attack := range []string{
		"ATTACH '" + file + "' AS stolen",
		"attach database 'file:" + file + "' as stolen",
		"VACUUM INTO '" + filepath.Join(s.DataDir, "copy.sqlite") + "'",
		"SELECT * FROM pragma_max_page_count(1000000000)",
		"PRAGMA max_page_count = 1000000000",
		"select 1; ATTACH '" + file + "' AS stolen",
	} {
		if msg := wasmSQL(t, s, "/other", attack); msg == "" {
			t.Errorf("%s ran", attack)
		}
	}
	if got := wasmRows(t, s, "/other"); len(got) != 0 {
		t.Errorf("after the attacks the other worker reads %q", got)
	}
	// Its folder at /.database holds its own files, but not the database the runtime opens.
	uploadOK(t, s, "workers", "files.tgz", wasmPackage(t, "files", "1.0.0", "database: true\n"), rootKey)
	if resp := s.Get("/files/read?path=" + url.QueryEscape("/.database/db.sqlite")); resp.Status == 200 {
		t.Errorf("a worker reads its database file through its folder: %s", resp)
	}

	// limits.database: a write past it fails with SQLITE_FULL, told to the worker, its log and
	// the API.
	upload("hog", "1.0.0", "limits:\n  database: 256KiB\n")
	var fill struct {
		Written int    `json:"written"`
		Error   string `json:"error"`
	}
	if resp := s.Get("/hog/fill?n=64&kib=16"); resp.Status != 200 || resp.JSON(&fill) != nil || !strings.Contains(fill.Error, "limits.database") {
		t.Fatalf("filling past 256 KiB = %s, want the limit named", resp)
	}
	if fill.Written == 0 || fill.Written >= 16 {
		t.Errorf("%d rows of 16 KiB written under a 256 KiB limit", fill.Written)
	}
	if info, err := os.Stat(dbFile(s, "hog")); err != nil || info.Size() > 256<<10 {
		t.Errorf("the hog's file is %v (%v), past its limit", info, err)
	}
	logs := s.Get(s.API+"/workers/_/hog/logs", harness.WithKey(rootKey))
	if logs.Status != 200 || !strings.Contains(string(logs.Body), "limits.database") {
		t.Errorf("the hog's log does not tell why its write failed: %s", logs)
	}
	if msg, _ := workerDatabase(t, s, "hog")["error"].(string); !strings.Contains(msg, "limits.database") {
		t.Errorf("the hog's database record = %q, want the limit named", msg)
	}
}

// TestExampleDBWasm builds examples/db-wasm as examples/README.md says, uploads it and keeps an
// entry in its guestbook across a new version.
func TestExampleDBWasm(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(work, "app.wasm"), ".")
	cmd.Dir = "../examples/db-wasm"
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the example: %v\n%s", err, out)
	}
	manifest, err := os.ReadFile("../examples/db-wasm/manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	module, err := os.ReadFile(filepath.Join(work, "app.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	archive := func(version string) []byte {
		m := strings.Replace(string(manifest), "version: 1.0.0", "version: "+version, 1)
		return harness.TarGz(t, harness.File{Name: "manifest.yaml", Body: m}, harness.File{Name: "app.wasm", Body: string(module)})
	}
	uploadOK(t, s, "workers", "guestbook.tgz", archive("1.0.0"), rootKey)
	if resp := s.Do("POST", "/guestbook-wasm/", harness.WithBody("application/x-www-form-urlencoded", []byte("text=hello"))); resp.Status != 201 {
		t.Fatalf("POST an entry = %s", resp)
	}
	uploadOK(t, s, "workers", "guestbook.tgz", archive("1.1.0"), rootKey)
	var got struct {
		Entries []string `json:"entries"`
	}
	if resp := s.Get("/guestbook-wasm/"); resp.Status != 200 || resp.JSON(&got) != nil || !slices.Equal(got.Entries, []string{"hello"}) {
		t.Fatalf("GET the entries after a new version = %s", resp)
	}
}
