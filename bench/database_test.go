package bench

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/tursodatabase/libsql-client-go/libsql" // the local SQLite file, as a libSQL client opens it

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// envWorker is a process worker that answers its DATABASE_* variables, so the benchmark
// speaks to the endpoint the runtime made for it.
const envWorker = `import http.server, json, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({k: v for k, v in os.environ.items() if k.startswith("DATABASE_")}).encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer((os.environ["HOST"], int(os.environ["PORT"])), H).serve_forever()
`

// hrana is one Hrana-over-HTTP target: a pipeline URL, its headers.
type hrana struct {
	client *http.Client
	url    string
	host   string
	token  string
}

// exec sends stmt with its text arguments as one pipeline and fails on any error.
func (h hrana) exec(stmt string, args ...string) error {
	values := []map[string]string{}
	for _, a := range args {
		values = append(values, map[string]string{"type": "text", "value": a})
	}
	body, _ := json.Marshal(map[string]any{"requests": []any{
		map[string]any{"type": "execute", "stmt": map[string]any{"sql": stmt, "args": values}},
		map[string]string{"type": "close"},
	}})
	req, err := http.NewRequest(http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	if h.host != "" {
		req.Host = h.host
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || bytes.Contains(out, []byte(`"type":"error"`)) {
		return fmt.Errorf("%s: %d %s", h.url, resp.StatusCode, out)
	}
	return nil
}

// BenchmarkDatabase compares a worker's statements to its own database through the runtime's
// endpoint (sync mode: a namespace on sqld, which the endpoint forwards to with the primary's
// token) with the same statements straight to sqld (the same namespace, by its host) and on a
// local SQLite file through libSQL's Go driver (what a worker in local mode does itself): a
// write (INSERT of one row) and a read (SELECT of one row by its key), one statement per
// request over keep-alive HTTP.
func BenchmarkDatabase(b *testing.B) {
	admin := testkit.FreePort(b)
	keyFile, key := testkit.JWTKeys(b)
	primary := testkit.StartSqld(b, "--enable-namespaces", "--admin-listen-addr", fmt.Sprintf("127.0.0.1:%d", admin), "--auth-jwt-key-file", keyFile)
	token := testkit.SignJWT(key)
	s := harness.Start(b, harness.Config{Global: accessLog, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "PRIMARY_TOKEN": token},
		App: fmt.Sprintf("key_store sync {\n\t\t\turl http://localhost:%d\n\t\t\ttoken {env.PRIMARY_TOKEN}\n\t\t\tadmin_url http://127.0.0.1:%d\n\t\t}", primary.Port, admin)})
	archive := testkit.TarGz(b, testkit.File{Name: "manifest.yaml", Body: "name: db\nversion: 1.0.0\ncommand: [/usr/bin/python3, server.py]\ndatabase: true\nttl: 1h\n"},
		testkit.File{Name: "server.py", Body: envWorker})
	if resp := s.Upload(s.API+"/workers/upload", "db.tgz", archive, harness.WithKey(rootKey)); resp.Status != http.StatusOK {
		b.Fatalf("upload = %s", resp)
	}
	var env map[string]string
	if resp := s.Get("/db/"); resp.Status != http.StatusOK || json.Unmarshal(resp.Body, &env) != nil {
		b.Fatalf("the worker's variables = %s", resp)
	}
	endpoint, err := url.Parse(env["DATABASE_URL"])
	if err != nil || endpoint.Scheme != "http" {
		b.Fatalf("DATABASE_URL %q: want the runtime's endpoint", env["DATABASE_URL"])
	}
	client, _ := newClient()
	defer client.CloseIdleConnections()
	sum := sha256.Sum256([]byte("db"))
	targets := map[string]hrana{
		"runtime": {client: client, url: "http://" + endpoint.Host + "/v2/pipeline", token: env["DATABASE_AUTH_TOKEN"]},
		"sqld": {client: client, url: primary.URL + "/v2/pipeline", host: fmt.Sprintf("w-%s.localhost:%d", hex.EncodeToString(sum[:16]), primary.Port),
			token: token},
	}
	local, err := sql.Open("libsql", "file:"+filepath.Join(b.TempDir(), "db.sqlite"))
	if err != nil {
		b.Fatal(err)
	}
	defer local.Close()

	const create, insert, query = "CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v TEXT)", "INSERT OR REPLACE INTO t VALUES (?, 'value')", "SELECT v FROM t WHERE k = ?"
	ops := map[string]func(arg string) error{
		"local-file-write": func(arg string) error { _, err := local.Exec(insert, arg); return err },
		"local-file-read": func(arg string) error {
			var v string
			return local.QueryRow(query, arg).Scan(&v)
		},
	}
	if _, err := local.Exec(create); err != nil {
		b.Fatal(err)
	}
	for name, h := range targets {
		if err := h.exec(create); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		ops[name+"-write"] = func(arg string) error { return h.exec(insert, arg) }
		ops[name+"-read"] = func(arg string) error { return h.exec(query, arg) }
	}
	for _, t := range []string{"local-file", "runtime", "sqld"} { // the row the reads find
		if err := ops[t+"-write"]("key"); err != nil {
			b.Fatalf("%s: %v", t, err)
		}
		if err := ops[t+"-read"]("key"); err != nil {
			b.Fatalf("%s: %v", t, err)
		}
	}
	names := []string{"runtime-write", "sqld-write", "local-file-write", "runtime-read", "sqld-read", "local-file-read"}
	for i := range *rounds {
		for j := range names {
			name := names[(i+j)%len(names)]
			b.Run(name, func(b *testing.B) {
				arg := "key"
				for n := 0; b.Loop(); n++ {
					if strings.HasSuffix(name, "-write") {
						arg = fmt.Sprint(n % 1000)
					}
					if err := ops[name](arg); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
