package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/version"
)

type health struct {
	OK      bool   `json:"ok"`
	Status  string `json:"status"`
	Version string `json:"version"`
}

// TestVersionCommand checks that `runtime version`, Caddy's command, prints the runtime's
// version line first, "runtime v0.4.0 (commit abc1234)" with the version of the VERSION file,
// the one discovery reports, then Caddy's (bin/runtime sets it: the module leaves the host's
// version alone), and that `runtime runtime version`, the module's command in any build,
// prints the same line.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	out, err := harness.RunCommand(t, t.TempDir(), nil, "version")
	if err != nil {
		t.Fatalf("runtime version: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`^(runtime (v\S+) \(commit ([0-9a-f]{7}(-dirty)?|unknown)\))\nCaddy v2\.\d+\.\d+\S* `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("runtime version printed %q, want \"runtime v<version> (commit <commit>)\\nCaddy v2.…\"", out)
	}
	file, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(string(file)); m[2] != want {
		t.Errorf("runtime version names %q, the VERSION file %q", m[2], want)
	}
	s := harness.Start(t, harness.Config{})
	if m[2] != s.Version {
		t.Errorf("runtime version names %q, discovery %q", m[2], s.Version)
	}
	if out, err := harness.RunCommand(t, t.TempDir(), nil, "runtime", "version"); err != nil || out != m[1]+"\n" {
		t.Errorf("runtime runtime version: %v, %q; want %q", err, out, m[1])
	}
}

// TestDiscoveryAndHealth checks the four public endpoints exactly as the spec shows them, with
// one version across all four.
func TestDiscoveryAndHealth(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{})
	disc := s.Get("/.well-known/runtime")
	var d map[string]any
	if err := disc.JSON(&d); err != nil || disc.Status != 200 {
		t.Fatalf("discovery = %s", disc)
	}
	if d["api"] != "/api" || d["version"] == "" || len(d) != 2 {
		t.Fatalf("discovery = %v, want exactly {api:/api, version}", d)
	}
	if d["version"] != version.Release {
		t.Errorf("version = %v, want the VERSION file's %q", d["version"], version.Release)
	}
	for path, status := range map[string]string{
		"/api/health": "healthy", "/api/health/ready": "ready", "/api/health/live": "live",
	} {
		resp := s.Get(path)
		var h health
		if err := resp.JSON(&h); err != nil || resp.Status != 200 {
			t.Fatalf("%s = %s", path, resp)
		}
		if h != (health{OK: true, Status: status, Version: d["version"].(string)}) {
			t.Errorf("%s = %+v, want ok, status %q and version %v", path, h, status, d["version"])
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s Content-Type = %q", path, ct)
		}
	}
}

// TestAPIPrefix checks that RUNTIME_API_PREFIX moves everything under <prefix>/api and that
// /api is then not the API; and that the Caddyfile beats the environment.
func TestAPIPrefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     harness.Config
		api     string
		notAPIs []string
	}{
		{"env /_", harness.Config{Env: map[string]string{"RUNTIME_API_PREFIX": "/_"}}, "/_/api", []string{"/api"}},
		{"env _", harness.Config{Env: map[string]string{"RUNTIME_API_PREFIX": "_"}}, "/_/api", []string{"/api"}},
		{"env /", harness.Config{Env: map[string]string{"RUNTIME_API_PREFIX": "/"}}, "/api", []string{"/_/api"}},
		{"Caddyfile beats env", harness.Config{Runtime: "api_prefix /edge", Env: map[string]string{"RUNTIME_API_PREFIX": "/_"}}, "/edge/api", []string{"/api", "/_/api"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := harness.Start(t, tt.cfg)
			if s.API != tt.api {
				t.Fatalf("discovery api = %q, want %q", s.API, tt.api)
			}
			for _, p := range []string{"/health", "/health/ready", "/health/live", "/openapi.json", "/docs"} {
				if resp := s.Get(tt.api + p); resp.Status != 200 {
					t.Errorf("%s%s = %d", tt.api, p, resp.Status)
				}
			}
			if resp := s.Get(tt.api + "/nothing"); resp.Status != 404 || resp.ErrorCode() != "NOT_FOUND" {
				t.Errorf("%s/nothing = %s", tt.api, resp)
			}
			for _, notAPI := range tt.notAPIs {
				for _, p := range []string{"/health", "/openapi.json", "/nothing"} {
					// Not the API: a worker path, and no worker has that name.
					resp := s.Get(notAPI + p)
					if resp.Status != 404 || strings.Contains(string(resp.Body), "healthy") || resp.ErrorCode() == "" {
						t.Errorf("%s%s = %s, want a 404 envelope", notAPI, p, resp)
					}
				}
			}
			var doc struct{ Paths map[string]any }
			if err := s.Get(tt.api + "/openapi.json").JSON(&doc); err != nil {
				t.Fatal(err)
			}
			for p := range doc.Paths {
				if p != "/.well-known/runtime" && !strings.HasPrefix(p, tt.api+"/") {
					t.Errorf("openapi.json documents %s outside %s", p, tt.api)
				}
			}
		})
	}
}

// TestConventions checks the error envelope, 405 with Allow, trailing slashes and request
// ids.
func TestConventions(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{})

	resp := s.Get("/api/does/not/exist")
	if resp.Status != 404 || resp.ErrorCode() != "NOT_FOUND" {
		t.Errorf("unknown path = %s", resp)
	}
	resp = s.Do("DELETE", "/api/health", harness.WithOrigin(""))
	if resp.Status != 405 || resp.ErrorCode() != "METHOD_NOT_ALLOWED" || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("DELETE health = %s, Allow %q", resp, resp.Header.Get("Allow"))
	}
	if resp := s.Get("/api/health/"); resp.Status != 200 {
		t.Errorf("trailing slash = %s", resp)
	}
	if resp := s.Do("HEAD", "/api/health"); resp.Status != 200 || len(resp.Body) != 0 {
		t.Errorf("HEAD = %s", resp)
	}

	resp = s.Get("/api/health", harness.WithHeader("X-Request-Id", "trace-42"))
	if got := resp.Header.Get("X-Request-Id"); got != "trace-42" {
		t.Errorf("echoed X-Request-Id = %q", got)
	}
	ids := map[string]bool{}
	for _, p := range []string{"/.well-known/runtime", "/api/health", "/api/nope", "/api/docs", "/api/openapi.json"} {
		id := s.Get(p).Header.Get("X-Request-Id")
		if id == "" || ids[id] {
			t.Errorf("%s: generated X-Request-Id %q is empty or repeated", p, id)
		}
		ids[id] = true
	}
	if got := s.Get("/api/health", harness.WithHeader("X-Request-Id", "bad id <script>")).Header.Get("X-Request-Id"); got == "" || strings.ContainsAny(got, " <>") {
		t.Errorf("malformed X-Request-Id was echoed as %q", got)
	}

	if n := len(s.LogEntries("api request")); n != 0 {
		t.Errorf("the runtime wrote %d access log lines of its own; Caddy's access log is the one", n)
	}
}

// accessLog is the site's Caddy access log as the README shows it: JSON on stderr, without
// the X-API-Key header (Caddy redacts only Authorization and cookies by itself).
const accessLog = `log {
	output stderr
	format filter {
		wrap json
		fields {
			request>headers>X-Api-Key delete
		}
	}
}`

// TestCaddyAccessLog checks that Caddy's access log line of a request carries the request id
// that its response shows, the key it was authenticated with and the unit that served it, and
// no secret.
func TestCaddyAccessLog(t *testing.T) {
	s := harness.Start(t, harness.Config{Site: accessLog, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	if !strings.Contains(s.Logs(), "Caddy's access log records request headers, X-API-Key included") {
		t.Error("an access log that can record X-API-Key gave no warning at start")
	}
	k := s.CreateKey(rootKey, map[string]any{"name": "logged", "role": "viewer"})
	spa(t, s, "site", "1.0.0", "")
	plugin(t, s, "greet", "version: 0.1.0\nbase: /greet\n"+respond("hi"), nil)
	reload(t, s)
	line := func(id string) map[string]any {
		t.Helper()
		var found map[string]any
		harness.Eventually(t, "the access log line of request "+id, 5*time.Second, func() bool {
			for _, e := range s.LogEntries("handled request") {
				if e["request_id"] == id {
					found = e
					return true
				}
			}
			return false
		})
		return found
	}
	tests := []struct {
		name, path string
		opts       []harness.Option
		sentID     string         // X-Request-Id sent, kept when well-formed
		want       map[string]any // fields of the log line besides request_id
	}{
		{"key in X-API-Key", s.API + "/admin/session", []harness.Option{harness.WithKey(k.Secret)}, "",
			map[string]any{"key_id": float64(k.ID), "key_prefix": k.KeyPrefix, "status": float64(200)}},
		{"key as a bearer token", s.API + "/admin/session", []harness.Option{harness.WithBearer(k.Secret)}, "",
			map[string]any{"key_id": float64(k.ID), "key_prefix": k.KeyPrefix}},
		{"root key, incoming id", s.API + "/workers", []harness.Option{harness.WithKey(rootKey)}, "trace-42",
			map[string]any{"key_id": float64(0), "key_prefix": "root"}},
		{"refused key", s.API + "/admin/session", []harness.Option{harness.WithKey(k.Secret + "x")}, "",
			map[string]any{"key_id": nil, "key_prefix": nil, "status": float64(401)}},
		{"worker", "/site/", nil, "", map[string]any{"worker": "site", "worker_version": "1.0.0", "key_id": nil}},
		{"plugin", "/greet/", nil, "", map[string]any{"plugin": "greet", "worker": nil, "worker_version": nil}},
		{"malformed incoming id", "/api/health", nil, "bad id <x>", map[string]any{"status": float64(200)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			if tt.sentID != "" {
				opts = append(opts, harness.WithHeader("X-Request-Id", tt.sentID))
			}
			resp := s.Get(tt.path, opts...)
			id := resp.Header.Get("X-Request-Id")
			if id == "" || tt.sentID == "trace-42" && id != tt.sentID {
				t.Fatalf("X-Request-Id = %q, sent %q", id, tt.sentID)
			}
			e := line(id)
			for field, want := range tt.want {
				if e[field] != want {
					t.Errorf("%s = %v, want %v in %v", field, e[field], want, e)
				}
			}
			// A generated id is Caddy's own {http.request.uuid}, which Caddy logs as uuid.
			if id != tt.sentID && e["uuid"] != id {
				t.Errorf("generated request id %q is not Caddy's uuid %v", id, e["uuid"])
			}
		})
	}
	for _, secret := range []string{rootKey, k.Secret} {
		if strings.Contains(s.Logs(), secret) {
			t.Errorf("the logs contain a secret (%s…)", secret[:6])
		}
	}
}

// TestReloadUnderLoad reloads the config through Caddy's admin API 20 times while 8 clients
// send requests: no request may fail, readiness never drops, and the state is started once.
//
// The clients speak HTTP/2 (h2c here; h2 is Caddy's default over TLS). Over HTTP/1.1 a reload
// can drop a request on a connection opened at that very instant: Go's http.Server drops
// requests it reads after Shutdown began and Linux resets the old SO_REUSEPORT socket's
// queue. That happens for any Caddy handler, not only this one; HTTP/2's GOAWAY avoids it.
func TestReloadUnderLoad(t *testing.T) {
	t.Parallel()
	cfg := harness.Config{HTTP2: true}
	s := harness.Start(t, cfg)
	paths := []string{"/api/health", "/api/health/ready", "/.well-known/runtime", "/api/health/live"}
	load := harness.Hammer(t, 8, func(i, n int) error {
		resp, err := s.Send("GET", paths[(i+n)%len(paths)])
		switch {
		case err != nil:
			return err
		case resp.Status != 200:
			return fmt.Errorf("status %s", resp)
		case resp.Proto != "HTTP/2.0":
			return fmt.Errorf("answered over %s, want HTTP/2.0", resp.Proto)
		}
		return nil
	})
	for i := range 20 {
		if err := s.Reload(cfg); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		sent := load.Sent()
		harness.Eventually(t, "requests after the reload", 10*time.Second, func() bool { return load.Sent() > sent+8 })
	}
	if err := load.Stop(100); err != nil {
		t.Fatalf("during 20 reloads: %v", err)
	}
	if n := len(s.LogEntries("runtime state started")); n != 1 {
		t.Fatalf("runtime state started %d times, want once across 20 reloads", n)
	}
	if n := len(s.LogEntries("runtime state released")); n != 0 {
		t.Fatalf("runtime state released %d times during reloads", n)
	}
	t.Logf("%d requests, 0 failed, across 20 reloads", load.Sent())
}

// TestRequestRightAfterReload sends a POST, which a client does not retry, on a new connection
// the moment each of 100 reloads is answered: the harness's Reload waits for the old config's
// listener to close, so none meets the SO_REUSEPORT race above (failed 3 runs in 3 under a CPU
// hog before it did).
func TestRequestRightAfterReload(t *testing.T) {
	t.Parallel()
	cfg := harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}}
	s := harness.Start(t, cfg)
	for i := range 100 {
		// A changed config, as Caddy skips a load of the same one.
		cfg.Global = fmt.Sprintf("\tgrace_period %ds", 10+i)
		if err := s.Reload(cfg); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		resp, err := s.Send("POST", s.API+"/keys", harness.WithKey(rootKey), harness.WithJSON(map[string]any{}))
		if err != nil {
			t.Fatalf("POST right after reload %d: %v", i, err)
		}
		if resp.Status != 400 {
			t.Fatalf("POST of a key without a name after reload %d = %s, want 400", i, resp)
		}
	}
}

// TestReadinessDuringShutdown checks that readiness answers 503 while Caddy drains on exit,
// and liveness still answers.
func TestReadinessDuringShutdown(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Global: "\tshutdown_delay 3s"})
	if err := s.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var ready *harness.Response
	harness.EventuallyNil(t, 2*time.Second, func() error {
		resp, err := s.Send("GET", "/api/health/ready")
		if err != nil {
			t.Fatal(err)
		}
		if ready = resp; resp.Status != 503 {
			return fmt.Errorf("ready answers %s after SIGTERM", resp)
		}
		return nil
	})
	if ready.ErrorCode() != "NOT_READY" || !strings.Contains(string(ready.Body), "shutting down") {
		t.Fatalf("ready while shutting down = %s", ready)
	}
	if resp := s.Get("/api/health/live"); resp.Status != 200 {
		t.Errorf("live while shutting down = %s", resp)
	}
	select {
	case <-s.Exited():
	case <-time.After(15 * time.Second):
		t.Fatal("the runtime did not exit after SIGTERM")
	}
	if _, err := s.WaitLog("runtime state released", time.Second); err != nil {
		t.Error(err)
	}
}

// TestFirstStartCreatesFolders checks the default data layout under the working directory.
func TestFirstStartCreatesFolders(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{})
	for dir, mode := range map[string]os.FileMode{"apps": 0o755, "plugins": 0o755, "state": 0o700} {
		info, err := os.Stat(filepath.Join(s.DataDir, dir))
		if err != nil || !info.IsDir() || info.Mode().Perm() != mode {
			t.Errorf("data/%s: %v, mode %v, want a folder with mode %v", dir, err, info.Mode().Perm(), mode)
		}
	}
	for _, dir := range []string{".apps", ".plugins"} {
		if _, err := os.Stat(filepath.Join(s.DataDir, dir)); !os.IsNotExist(err) {
			t.Errorf("built-in folder data/%s was created", dir)
		}
	}
}

// TestValidate checks that caddy validate refuses each bad setting with a message naming it,
// whether it comes from the Caddyfile or the environment, and that a good config validates
// without touching the disk.
func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		runtime string
		env     map[string]string
		want    []string
		app     string // lines of the global runtime option
		more    string // more site blocks
	}{
		{"good", "", nil, nil, "", ""},
		{"example", "", nil, nil, "", ""},
		{"prefix in Caddyfile", "api_prefix /a//b", nil, []string{"api_prefix", "double slash"}, "", ""},
		{"prefix in env", "", map[string]string{"RUNTIME_API_PREFIX": "/cpanel"}, []string{"api_prefix", "RUNTIME_API_PREFIX", "reserved"}, "", ""},
		{"ttl bare number", "", nil, []string{"session_ttl", "bare number"}, "session_ttl 3600", ""},
		{"app settings", "serve workers", nil, nil, "state_dir ./data/state\n\t\tpool_size 4", ""},
		{"site setting in the app", "", nil, []string{"serve is a setting of a site block"}, "serve workers", ""},
		// The deprecated form: process-wide settings in the site blocks.
		{"equal copies", "pool_size 4", nil, nil, "", ":8081 {\n\truntime {\n\t\tpool_size 4\n\t}\n}\n"},
		{"copies differ", "pool_size 4", nil, []string{"pool_size", "global runtime option"}, "", ":8081 {\n\truntime {\n\t\tpool_size 5\n\t}\n}\n"},
		{"copy differs from the app", "pool_size 4", nil, []string{"pool_size", "global runtime option", "another value"}, "pool_size 5", ""},
		{"ttl in env", "", map[string]string{"RUNTIME_CPANEL_SESSION_TTL": "1y"}, []string{"session_ttl", "RUNTIME_CPANEL_SESSION_TTL"}, "", ""},
		{"ttl over 400 days", "", map[string]string{"RUNTIME_CPANEL_SESSION_TTL": "401d"}, []string{"session_ttl", "400d"}, "", ""},
		// validate contacts no primary: nothing listens on port 9
		{"sync key store", "", map[string]string{"RUNTIME_AUTH_DB_MODE": "sync", "RUNTIME_AUTH_DB_SYNC_URL": "http://127.0.0.1:9"}, nil, "", ""},
		{"sync key store without url", "", map[string]string{"RUNTIME_AUTH_DB_MODE": "sync"}, []string{"sync_url", "RUNTIME_AUTH_DB_SYNC_URL"}, "", ""},
		{"sync url with a token", "", map[string]string{"RUNTIME_AUTH_DB_MODE": "sync", "RUNTIME_AUTH_DB_SYNC_URL": "libsql://h?authToken=s3cret"},
			[]string{"sync_url", "RUNTIME_AUTH_DB_SYNC_URL", "credentials"}, "", ""},
		{"weak root key from env", "", map[string]string{"RUNTIME_ROOT_KEY": "tiny"}, []string{"root_key", "at least 16"}, "root_key {env.RUNTIME_ROOT_KEY}", ""},
		{"upload size", "", map[string]string{"RUNTIME_MAX_UPLOAD_SIZE": "-5"}, []string{"max_upload_size", "RUNTIME_MAX_UPLOAD_SIZE"}, "", ""},
		{"dirs in env", "", map[string]string{"RUNTIME_WORKER_DIRS": "./a:./a"}, []string{"worker_dirs", "twice"}, "", ""},
		{"unknown setting", "workers ./x", nil, []string{"unknown runtime setting", "worker_dirs"}, "", ""},
		{"network in env", "", map[string]string{"RUNTIME_WORKER_NETWORK": "bridge"}, []string{"worker_network", "RUNTIME_WORKER_NETWORK", "host or isolated"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			caddyfile := fmt.Sprintf(":%d {\n\truntime {\n\t\t%s\n\t}\n}\n%s", harness.FreePort(t), tt.runtime, tt.more)
			if tt.app != "" {
				caddyfile = fmt.Sprintf("{\n\truntime {\n\t\t%s\n\t}\n}\n%s", tt.app, caddyfile)
			}
			if tt.name == "example" {
				example, err := os.ReadFile("../Caddyfile.example")
				if err != nil {
					t.Fatal(err)
				}
				caddyfile = string(example)
			}
			if err := os.WriteFile(filepath.Join(dir, "Caddyfile"), []byte(caddyfile), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := harness.RunCommand(t, dir, tt.env, "validate", "--config", "Caddyfile", "--adapter", "caddyfile")
			if tt.want == nil {
				if err != nil {
					t.Fatalf("validate failed: %v\n%s", err, out)
				}
				if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
					t.Fatal("validate created the data folder")
				}
				return
			}
			if err == nil {
				t.Fatalf("validate succeeded, want a failure; output:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("validate output does not contain %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "tiny") || strings.Contains(out, "s3cret") {
				t.Errorf("validate output reveals a secret:\n%s", out)
			}
		})
	}
}

// TestStartRefusesBadSettings checks that a bad setting stops start-up with a message naming it.
func TestStartRefusesBadSettings(t *testing.T) {
	t.Parallel()
	s, err := harness.Launch(t, harness.Config{Env: map[string]string{"RUNTIME_CPANEL_SESSION_TTL": "90"}})
	if err != nil {
		t.Fatal(err)
	}
	if !s.WaitExit(30 * time.Second) {
		t.Fatal("the runtime started with session_ttl 90")
	}
	for _, want := range []string{"session_ttl", "RUNTIME_CPANEL_SESSION_TTL", "bare number"} {
		if !strings.Contains(s.Logs(), want) {
			t.Errorf("start-up output does not contain %q:\n%s", want, s.Logs())
		}
	}
	if _, err := os.Stat(s.DataDir); !os.IsNotExist(err) {
		t.Error("a refused start created the data folder")
	}
}

// TestDocsWorkOffline checks that the docs page references only assets the binary serves
// itself.
func TestDocsWorkOffline(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_API_PREFIX": "/_"}})
	page := s.Get("/_/api/docs")
	if page.Status != 200 || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("docs = %s", page)
	}
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("docs CSP = %q, want everything limited to 'self'", csp)
	}
	refs := regexp.MustCompile(`(?i)(?:src|href)\s*=\s*["']([^"']+)["']`).FindAllStringSubmatch(string(page.Body), -1)
	if len(refs) < 2 {
		t.Fatalf("docs page references %d assets, want the script and the stylesheet:\n%s", len(refs), page.Body)
	}
	for _, ref := range refs {
		url := ref[1]
		if strings.HasPrefix(url, "data:") || strings.HasPrefix(url, "#") || url == "/_/api/openapi.json" {
			continue
		}
		if !strings.HasPrefix(url, "/_/api/docs/") {
			t.Errorf("docs page references %q, which is not one of its own assets", url)
			continue
		}
		// What the assets then load is checked in a browser (TestDocsInBrowser).
		if asset := s.Get(url); asset.Status != 200 {
			t.Errorf("%s = %d", url, asset.Status)
		}
	}
	if regexp.MustCompile(`https?://`).Match(page.Body) {
		t.Error("the docs page mentions an absolute http(s) URL")
	}
	if !strings.Contains(string(page.Body), "/_/api/openapi.json") {
		t.Error("the docs page does not point at this runtime's openapi.json")
	}
	if resp := s.Get("/_/api/docs/../openapi.json"); resp.Status == 200 && strings.Contains(string(resp.Body), "<") {
		t.Error("dot segments reached a docs asset")
	}
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	// harness.Start loads the document with a real OpenAPI 3.1 validator and fails if it is
	// invalid; here we also check it declares 3.1 and documents the error envelope.
	s := harness.Start(t, harness.Config{})
	doc := s.Validator.Document()
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q", doc.OpenAPI)
	}
	if doc.Components.Schemas["Envelope"] == nil {
		t.Fatal("the error envelope is not in components")
	}
	if doc.Info.Version != s.Version {
		t.Errorf("document version %q differs from discovery %q", doc.Info.Version, s.Version)
	}
	if resp := s.Get("/api/openapi.json", harness.WithHeader("Accept", "application/json")); resp.Header.Get("ETag") == "" {
		t.Error("openapi.json has no ETag")
	}
}
