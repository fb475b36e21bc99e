package integration

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// dbWorkerSource is a process worker on python3 and its sqlite3 module that keeps rows in
// its database, named by DATABASE_URL: a file: URL it opens with sqlite3, or the runtime's
// endpoint, which it speaks Hrana over HTTP to (POST /v2/pipeline), as a libSQL client would.
// /write?v= adds a row, /read lists them, /fill writes 256 KiB rows until a write fails,
// /open?path= tries another database file, /raw?host=&token= sends a pipeline with another
// Host header or token, /env shows its DATABASE_* variables.
const dbWorkerSource = `import http.server, json, os, sqlite3, urllib.request, urllib.parse, urllib.error

URL = os.environ.get("DATABASE_URL", "")

def pipeline(stmts, host=None, token=None):
    u = urllib.parse.urlsplit(URL)
    q = urllib.parse.parse_qs(u.query)
    tok = token if token is not None else q.get("authToken", [""])[0]
    body = {"requests": [{"type": "execute", "stmt": {"sql": s, "args": [{"type": "text", "value": a} for a in args]}} for s, args in stmts] + [{"type": "close"}]}
    req = urllib.request.Request(u.scheme + "://" + u.netloc + "/v2/pipeline", data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
    if host:
        req.add_header("Host", host)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            out = json.load(r)
    except urllib.error.HTTPError as e:  # the endpoint's refusal: its status and why
        raise Exception("%d %s" % (e.code, e.read().decode()))
    rows = []
    for res in out["results"]:
        if res["type"] == "error":
            raise Exception(res["error"]["message"])
        if res["type"] == "ok" and res["response"]["type"] == "execute":
            rows = [[c["value"] for c in row] for row in res["response"]["result"]["rows"]]
    return rows

def run(stmts):
    if URL.startswith("file:"):
        db = sqlite3.connect(URL[len("file:"):], timeout=5)
        try:
            rows = []
            for s, args in stmts:
                rows = [list(r) for r in db.execute(s, args).fetchall()]
            db.commit()
            return rows
        finally:
            db.close()
    return pipeline(stmts)

SCHEMA = ("create table if not exists t (v text)", [])

class H(http.server.BaseHTTPRequestHandler):
    def answer(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(u.query).items()}
        try:
            if u.path == "/write":
                run([SCHEMA, ("insert into t values (?)", [q["v"]])])
                return self.answer(200, {"ok": True})
            if u.path == "/read":
                return self.answer(200, {"rows": [r[0] for r in run([SCHEMA, ("select v from t", [])])]})
            if u.path == "/fill":
                written = 0
                try:
                    for i in range(int(q.get("n", "400"))):
                        run([SCHEMA, ("insert into t values (?)", ["x" * 262144])])
                        written += 1
                except Exception as e:
                    return self.answer(200, {"written": written, "error": str(e)})
                return self.answer(200, {"written": written, "error": ""})
            if u.path == "/open":
                db = sqlite3.connect(q["path"], timeout=1)
                rows = db.execute("select v from t").fetchall()
                return self.answer(200, {"rows": [r[0] for r in rows]})
            if u.path == "/raw":
                return self.answer(200, {"rows": [r[0] for r in pipeline([("select v from t", [])], q.get("host"), q.get("token"))]})
            if u.path == "/env":
                return self.answer(200, {k: v for k, v in os.environ.items() if k.startswith("DATABASE_")})
            self.answer(404, {})
        except urllib.error.HTTPError as e:
            self.answer(502, {"error": "%d %s" % (e.code, e.read().decode())})
        except Exception as e:
            self.answer(500, {"error": repr(e)})
    def log_message(self, *a):
        pass

if os.environ.get("LISTEN_FDS"):  # an isolated network: the runtime's listener is descriptor 3
    import socket
    srv = http.server.ThreadingHTTPServer(("", 0), H, bind_and_activate=False)
    srv.socket = socket.socket(fileno=3)
    srv.serve_forever()
http.server.ThreadingHTTPServer((os.environ.get("HOST", "127.0.0.1"), int(os.environ["PORT"])), H).serve_forever()
`

// dbWorker is the archive of the database worker name@version, with extra manifest lines.
func dbWorker(t *testing.T, name, version, extra string) []byte {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3 with its sqlite3 module")
	}
	manifest := fmt.Sprintf("name: '%s'\nversion: %s\ncommand: [/usr/bin/python3, server.py]\ndatabase: true\n%s", name, version, extra)
	return testkit.TarGz(t, testkit.File{Name: "manifest.yaml", Body: manifest}, testkit.File{Name: "server.py", Body: dbWorkerSource})
}

// uploadDB uploads the database worker name@version to s.
func uploadDB(t *testing.T, s *harness.Server, name, version, extra string) {
	t.Helper()
	if resp := s.Upload(s.API+"/workers/upload", name+".tgz", dbWorker(t, name, version, extra), harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("upload %s@%s = %s", name, version, resp)
	}
}

// dbRows reads the rows the worker at base sees.
func dbRows(t *testing.T, s *harness.Server, path string) []string {
	t.Helper()
	var out struct {
		Rows  []string `json:"rows"`
		Error string   `json:"error"`
	}
	resp := s.Get(path)
	if resp.Status != 200 || resp.JSON(&out) != nil {
		t.Fatalf("GET %s = %s", path, resp)
	}
	return out.Rows
}

// dbWrite has the worker at base add the row v.
func dbWrite(t *testing.T, s *harness.Server, base, v string) {
	t.Helper()
	if resp := s.Get(base + "/write?v=" + url.QueryEscape(v)); resp.Status != 200 {
		t.Fatalf("write through %s = %s", base, resp)
	}
}

// workerDatabase reads GET workers/…/database.
func workerDatabase(t *testing.T, s *harness.Server, name string) map[string]any {
	t.Helper()
	var body struct {
		Data map[string]any `json:"data"`
	}
	resp := s.Get(s.API+"/workers/_/"+name+"/database", harness.WithKey(rootKey))
	if resp.Status != 200 || resp.JSON(&body) != nil {
		t.Fatalf("database of %s = %s", name, resp)
	}
	return body.Data
}

// TestDatabaseLocal: a worker with database: true keeps its rows in a SQLite file of its own
// under state_dir across a disable and enable, a new version, a restart of its process and of
// the runtime; another worker cannot open that file by its path; the file is kept when the
// worker is removed unless the removal purges it.
func TestDatabaseLocal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := harness.Config{Dir: dir, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}}
	s := harness.Start(t, cfg)
	uploadDB(t, s, "notes", "1.0.0", "")
	uploadDB(t, s, "other", "1.0.0", "")

	var env map[string]string
	if resp := s.Get("/notes/env"); resp.Status != 200 || resp.JSON(&env) != nil {
		t.Fatalf("env = %s", resp)
	}
	path := env["DATABASE_PATH"]
	if env["DATABASE_URL"] != "file:"+path || !strings.Contains(path, string(filepath.Separator)+"databases"+string(filepath.Separator)) {
		t.Fatalf("DATABASE_URL %q, DATABASE_PATH %q: want a file: URL of a file under state_dir/databases", env["DATABASE_URL"], path)
	}
	dbWrite(t, s, "/notes", "kept")

	for _, verb := range []string{"disable", "enable"} {
		if resp := s.Do("POST", s.API+"/workers/_/notes/1.0.0/"+verb, harness.WithKey(rootKey)); resp.Status != 200 {
			t.Fatalf("%s = %s", verb, resp)
		}
	}
	if got := dbRows(t, s, "/notes/read"); len(got) != 1 || got[0] != "kept" {
		t.Fatalf("after disable and enable the worker reads %q, want [kept]", got)
	}
	uploadDB(t, s, "notes", "1.1.0", "")
	if resp := s.Do("POST", s.API+"/workers/_/notes/restart", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("restart = %s", resp)
	}
	if got := dbRows(t, s, "/notes/read"); len(got) != 1 || got[0] != "kept" {
		t.Fatalf("version 1.1.0 reads %q, want [kept]", got)
	}

	// Another worker knows the path (it is no secret), but the sandbox lets it open nothing
	// there: the open, or the read, fails.
	resp := s.Get("/other/open?path=" + url.QueryEscape(path))
	if resp.Status == 200 {
		t.Fatalf("another worker opened the database by its path: %s", resp)
	}
	if !strings.Contains(string(resp.Body), "unable to open") && !strings.Contains(string(resp.Body), "denied") {
		t.Errorf("another worker's open of the database failed otherwise than refused: %s", resp)
	}

	var listed []map[string]any
	if resp := s.Get(s.API+"/workers", harness.WithKey(rootKey)); resp.Status != 200 || resp.JSON(&listed) != nil {
		t.Fatalf("workers = %s", resp)
	}
	for _, w := range listed {
		if w["name"] == "notes" && w["database"] != "local" {
			t.Errorf("the worker's record = %v, want database local", w)
		}
	}
	info := workerDatabase(t, s, "notes")
	if info["mode"] != "local" || info["size"].(float64) <= 0 {
		t.Errorf("database record = %v, want mode local and a size", info)
	}

	// runtime backup copies the database beside the key store's copy.
	if out, err := harness.RunCommand(t, s.Dir, nil, "backup", "keys.db"); err != nil || !strings.Contains(out, "1 workers' databases") {
		t.Fatalf("runtime backup: %v\n%s", err, out)
	}
	copied, err := sql.Open("libsql", "file:"+filepath.Join(s.Dir, "keys.db.databases", "notes", "db.sqlite")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	if err := copied.QueryRow(`SELECT v FROM t`).Scan(&row); err != nil || row != "kept" {
		t.Errorf("the backup of the database holds %q (%v), want kept", row, err)
	}
	copied.Close()

	// The runtime restarts: the rows are there.
	s.Stop()
	s = harness.Start(t, cfg)
	if got := dbRows(t, s, "/notes/read"); len(got) != 1 || got[0] != "kept" {
		t.Fatalf("after a restart of the runtime the worker reads %q, want [kept]", got)
	}

	// Removed whole, the database stays for a worker uploaded again under the name; a purge
	// removes it, and the audit trail says so.
	if resp := s.Do("DELETE", s.API+"/workers/_/notes", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("delete = %s", resp)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("removing the worker removed its database: %v", err)
	}
	uploadDB(t, s, "notes", "2.0.0", "")
	if got := dbRows(t, s, "/notes/read"); len(got) != 1 {
		t.Fatalf("uploaded again after a removal, the worker reads %q, want [kept]", got)
	}
	if resp := s.Do("DELETE", s.API+"/workers/_/notes?purge=1", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("delete with purge = %s", resp)
	}
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Errorf("a purge left the database folder: %v", err)
	}
	audit := s.Get(s.API+"/audit?action=worker.database.purge", harness.WithKey(rootKey))
	if audit.Status != 200 || !strings.Contains(string(audit.Body), `"worker.database.purge"`) {
		t.Errorf("the purge is not in the audit trail: %s", audit)
	}
}

// TestDatabaseLimit: a worker writing past limits.database is stopped, with the error in its
// log and in the API's record of its database, and its next start is refused while its
// database is past the limit.
func TestDatabaseLimit(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "worker_database_size 4MiB"})
	uploadDB(t, s, "hog", "1.0.0", "limits:\n  database: 1GiB\n") // capped to 4MiB
	// 400 rows of 256 KiB: 100 MiB unless stopped. A stopped worker answers no more.
	resp, err := s.Send("GET", "/hog/fill?n=400")
	if err == nil && resp.Status == 200 {
		var out struct {
			Written int    `json:"written"`
			Error   string `json:"error"`
		}
		_ = resp.JSON(&out)
		if out.Error == "" {
			t.Fatalf("the worker wrote %d rows of 256 KiB past a 4 MiB database limit", out.Written)
		}
	}
	harness.Eventually(t, "the error in the worker's log", 10*time.Second, func() bool {
		logs := s.Get(s.API+"/workers/_/hog/logs", harness.WithKey(rootKey))
		return logs.Status == 200 && strings.Contains(string(logs.Body), "limits.database")
	})
	info := workerDatabase(t, s, "hog")
	if msg, _ := info["error"].(string); !strings.Contains(msg, "limits.database") {
		t.Errorf("the database record does not tell why the worker was stopped: %v", info)
	}
	// Past its limit, the worker is not started again: the answer says why.
	again := s.Get("/hog/read")
	if again.Status < 500 || !strings.Contains(string(again.Body), "limits.database") {
		t.Errorf("a request to a worker whose database is past its limit = %s", again)
	}
	b, _ := json.Marshal(info)
	t.Logf("database record: %s", b)
}

// TestDatabaseSync: in sync mode two instances on one sqld with namespaces give a worker
// the same database, a namespace on the primary behind an endpoint of each instance: a row
// written through A is read through B, whose workers run in isolated networks (as root). Another worker reaches that namespace neither by
// naming it in its request's host nor with the worker's token, and never sees the primary's
// credentials. A WebAssembly worker's database: true is refused at upload.
func TestDatabaseSync(t *testing.T) {
	t.Parallel()
	admin := testkit.FreePort(t)
	keyFile, key := testkit.JWTKeys(t)
	primary := testkit.StartSqld(t, "--enable-namespaces", "--admin-listen-addr", fmt.Sprintf("127.0.0.1:%d", admin),
		"--auth-jwt-key-file", keyFile)
	token := testkit.SignJWT(key)
	// sqld takes the namespace from the host's first label: localhost has one label only,
	// which names the default namespace, the key store's.
	app := fmt.Sprintf("key_store sync {\n\t\t\turl http://localhost:%d\n\t\t\ttoken {env.PRIMARY_TOKEN}\n\t\t\tinterval 1s\n"+
		"\t\t\tadmin_url http://127.0.0.1:%d\n\t\t}", primary.Port, admin)
	env := map[string]string{"RUNTIME_ROOT_KEY": rootKey, "PRIMARY_TOKEN": token}
	a := harness.Start(t, harness.Config{App: app, Env: env})
	// B's workers run in networks of their own, where the endpoint listens inside theirs.
	isolated := app
	if os.Geteuid() == 0 {
		isolated += "\n\t\tworker_network isolated"
	}
	b := harness.Start(t, harness.Config{App: isolated, Env: env})
	for _, s := range []*harness.Server{a, b} {
		uploadDB(t, s, "shared", "1.0.0", "")
		uploadDB(t, s, "other", "1.0.0", "")
	}

	var envA map[string]string
	if resp := a.Get("/shared/env"); resp.Status != 200 || resp.JSON(&envA) != nil {
		t.Fatalf("env = %s", resp)
	}
	if !strings.HasPrefix(envA["DATABASE_URL"], "http://127.0.0.1:") || envA["DATABASE_PATH"] != "" {
		t.Fatalf("DATABASE_URL %q, DATABASE_PATH %q: want the runtime's endpoint", envA["DATABASE_URL"], envA["DATABASE_PATH"])
	}
	if strings.Contains(fmt.Sprint(envA), token) {
		t.Fatalf("the worker sees the primary's token: %v", envA)
	}
	dbWrite(t, a, "/shared", "from A")
	if got := dbRows(t, b, "/shared/read"); len(got) != 1 || got[0] != "from A" {
		t.Fatalf("B reads %q, want [from A]", got)
	}
	dbWrite(t, b, "/other", "other's own")

	// The other worker names the shared namespace in its host, as sqld reads it: it still
	// reads its own rows alone.
	u, _ := url.Parse(envA["DATABASE_URL"])
	for _, host := range []string{"default.localhost", sharedNamespace("shared") + ".localhost"} {
		if got := dbRows(t, a, "/other/raw?host="+url.QueryEscape(host)); len(got) != 1 || got[0] != "other's own" {
			t.Errorf("the other worker, naming %s in its host, reads %q, want its own row", host, got)
		}
	}
	// With the shared worker's token (which it could only guess), its endpoint refuses it.
	resp := a.Get("/other/raw?token=" + url.QueryEscape(u.Query().Get("authToken")))
	if resp.Status == 200 {
		t.Errorf("the other worker, with the shared worker's token, = %s", resp)
	}
	info := workerDatabase(t, b, "shared")
	if info["mode"] != "primary" {
		t.Errorf("database record on B = %v, want mode primary", info)
	}

	// A WebAssembly worker reaches its namespace through the runtime's database module: a row
	// written through A is read through B, and the other worker's rows stay its own.
	for _, s := range []*harness.Server{a, b} {
		uploadOK(t, s, "workers", "wasmdb.tgz", wasmDBPackage(t, "wasmdb", "1.0.0", "database: true\n"), rootKey)
	}
	if resp := a.Get("/wasmdb/write?v=" + url.QueryEscape("wasm from A")); resp.Status != 200 {
		t.Fatalf("the WebAssembly worker's write through A = %s", resp)
	}
	if got := wasmRows(t, b, "/wasmdb"); len(got) != 1 || got[0] != "wasm from A" {
		t.Errorf("the WebAssembly worker reads %q through B, want [wasm from A]", got)
	}
	if resp := b.Get("/wasmdb/tx?v=rolled-back"); resp.Status != 200 {
		t.Errorf("a transaction on the primary = %s", resp)
	}
	if got := wasmRows(t, a, "/wasmdb"); len(got) != 1 {
		t.Errorf("after a rolled back transaction A reads %q", got)
	}
	if msg, _ := workerDatabase(t, a, "wasmdb")["mode"].(string); msg != "primary" {
		t.Errorf("the WebAssembly worker's database mode = %q, want primary", msg)
	}

	// Past limits.database the endpoint refuses the worker's statements, saying why, in the
	// worker's log too. The endpoint measures the namespace at most once a second: the writes
	// go on until its next measurement (not sqld's storage_bytes_used, a minute stale).
	uploadDB(t, a, "hog", "1.0.0", "limits:\n  database: 256KiB\n")
	var fill struct {
		Written int    `json:"written"`
		Error   string `json:"error"`
	}
	harness.Eventually(t, "the endpoint to refuse the hog's writes", 20*time.Second, func() bool {
		resp := a.Get("/hog/fill?n=8")
		return resp.Status == 200 && resp.JSON(&fill) == nil && strings.Contains(fill.Error, "limits.database")
	})
	logs := a.Get(a.API+"/workers/_/hog/logs", harness.WithKey(rootKey))
	if !strings.Contains(string(logs.Body), "limits.database") {
		t.Errorf("the hog's log does not say why its writes are refused: %s", logs)
	}
	if msg, _ := workerDatabase(t, a, "hog")["error"].(string); !strings.Contains(msg, "limits.database") {
		t.Errorf("the hog's database record does not say why its writes are refused: %q", msg)
	}
}

// sharedNamespace is the primary's namespace of worker's database, as docs/workers.md
// describes it: w- and the first 16 bytes of the name's SHA-256 in hex.
func sharedNamespace(worker string) string {
	sum := sha256.Sum256([]byte(worker))
	return "w-" + hex.EncodeToString(sum[:16])
}

// TestDatabaseWorkerUser: a worker running under worker_user, which cannot pass state_dir
// (the runtime's, 0700), still reaches its database: the stage mounts the folder inside the
// worker's scratch tmpfs, and DATABASE_PATH names it there.
func TestDatabaseWorkerUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("worker_user needs the runtime to run as root")
	}
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "worker_user nobody"})
	apps := filepath.Join(s.DataDir, "apps")
	if err := os.MkdirAll(apps, 0o755); err != nil {
		t.Fatal(err)
	}
	openToOthers(apps) // the test's temporary folders are its own; state_dir stays closed
	uploadDB(t, s, "notes", "1.0.0", "")
	dbWrite(t, s, "/notes", "as nobody")
	if resp := s.Do("POST", s.API+"/workers/_/notes/restart", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("restart = %s", resp)
	}
	if got := dbRows(t, s, "/notes/read"); len(got) != 1 || got[0] != "as nobody" {
		t.Fatalf("after a restart the worker reads %q, want [as nobody]", got)
	}
	var env map[string]string
	if resp := s.Get("/notes/env"); resp.Status != 200 || resp.JSON(&env) != nil || !strings.HasSuffix(env["DATABASE_PATH"], "/.database/db.sqlite") {
		t.Errorf("env = %v, want DATABASE_PATH in the scratch folder's .database", env)
	}
	if info := workerDatabase(t, s, "notes"); info["size"].(float64) <= 0 {
		t.Errorf("database record = %v, want a size", info)
	}
}

// TestExampleDB packages examples/db as examples/README.md says: its entries outlive a new
// upload and a restart of its process.
func TestExampleDB(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	s := startWithRoot(t)
	archive := filepath.Join(t.TempDir(), "guestbook.tgz")
	runIn(t, "..", "tar", "-czf", archive, "-C", "examples/db", ".")
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	uploadOK(t, s, "workers", "guestbook.tgz", data, rootKey)
	if resp := s.Do("POST", "/guestbook/?name=Ada"); resp.Status != 201 {
		t.Fatalf("POST = %s", resp)
	}
	uploadOK(t, s, "workers", "guestbook.tgz", data, rootKey)
	if resp := s.Do("POST", s.API+"/workers/_/guestbook/restart", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("restart = %s", resp)
	}
	if resp := s.Get("/guestbook/"); resp.Status != 200 || !strings.Contains(string(resp.Body), `"entries": ["Ada"]`) {
		t.Fatalf("GET after a new upload and a restart = %s", resp)
	}
}

// TestCPanelDatabase: an app with a database shows, on its page, where the database is and
// the bytes it holds against its limit, as the API measures them.
func TestCPanelDatabase(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	uploadDB(t, s, "notes", "1.0.0", "limits:\n  database: 8MiB\n")
	dbWrite(t, s, "/notes", "a row")
	p, problems := openPanel(t, s)
	p.do("opening the app's page", chromedp.Navigate(p.base+"/apps/notes"))
	p.signIn(rootKey)
	p.do("waiting for the database", chromedp.WaitVisible(chromedp.Search(`//section[h2[normalize-space()="Database"]]//strong[contains(., "KiB")]`)))
	text := p.text(`section[aria-labelledby="database-h"]`)
	if !strings.Contains(text, "a SQLite file on this instance") || !strings.Contains(text, "of 8.0 MiB") {
		t.Errorf("the database section says %q, want where it is and its limit", text)
	}
	p.namesEveryControl("the app page with a database")
	problems.check(t)
}
