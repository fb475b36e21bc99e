package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-runtime/runtime/handlers"
	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/internal/plugins"
	"github.com/caddy-runtime/runtime/internal/testkit"
	"github.com/caddy-runtime/runtime/internal/version"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// The commands run as a user runs them: this test binary, run again as Caddy's command line
// with the runtime command registered as the module registers it, so that each exit code is
// the one caddycmd.Main exits with.
func TestMain(m *testing.M) {
	if testkit.Reexeced() {
		caddycmd.RegisterCommand(Group(Commands()))
		caddycmd.Main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const rootKey = "cli-test-root-key"

// testRuntime is a runtime's management API on a test server: package handlers' API with a key
// store and the worker and plugin catalogs in a temporary folder, a process pool whose log book
// the test writes, and a plugin host that plans the loads without serving them.
type testRuntime struct {
	URL  string
	logs *workers.LogBook
}

func newRuntime(t *testing.T, ready func() error) *testRuntime {
	t.Helper()
	return newRuntimeWith(t, func(o *handlers.Options) { o.Ready = ready })
}

// newRuntimeWith is newRuntime with the API's options as set changes them.
func newRuntimeWith(t *testing.T, set func(*handlers.Options)) *testRuntime {
	t.Helper()
	dir := t.TempDir()
	store, err := keystore.Open(context.Background(), filepath.Join(dir, "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for _, sub := range []string{"apps", "plugins"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	workerCatalog := packages.NewCatalog(packages.WorkerLayout, []string{filepath.Join(dir, "apps")}, packages.DefaultLimits)
	pluginCatalog := packages.NewCatalog(packages.PluginLayout, []string{filepath.Join(dir, "plugins")}, packages.DefaultLimits)
	t.Cleanup(workerCatalog.Close)
	t.Cleanup(pluginCatalog.Close)
	book := workers.NewLogBook(0)
	pool, err := workers.NewPool(workers.PoolOptions{Logs: book, ScratchDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	policy := plugins.Policy{Handlers: plugins.DefaultHandlers, Reserved: packages.ReservedNames("/api")}
	host := &planHost{plugins: pluginCatalog, workers: workerCatalog, policy: policy}
	opts := handlers.Options{Prefix: "/api", Version: "v1.2.3", RootKey: rootKey,
		Keys: func() (*keystore.Store, error) { return store, nil }, Workers: workerCatalog, Plugins: pluginCatalog,
		Pool: func() *workers.Pool { return pool }, PluginHost: host, PluginPolicy: policy,
		WorkerPolicy: workers.Policy{ProcessWorkers: config.Namespaces{All: true}, Reserved: policy.Reserved}}
	set(&opts)
	api, err := handlers.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		api.Shutdown()
		srv.Close()
		pool.Close()
	})
	return &testRuntime{URL: srv.URL, logs: book}
}

// get answers the API's JSON for path with the root key, decoded.
func (rt *testRuntime) get(t *testing.T, path string) any {
	t.Helper()
	req, _ := http.NewRequest("GET", rt.URL+"/api"+path, nil)
	req.Header.Set(handlers.APIKeyHeader, rootKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return decode(t, body)
}

func decode(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	return v
}

// planHost is a plugin host that loads what plugins.MakePlan plans, without serving it.
type planHost struct {
	plugins, workers *packages.Catalog
	policy           plugins.Policy
	mu               sync.Mutex
	plan             plugins.Plan
}

func (h *planHost) Loaded() ([]plugins.Plugin, []plugins.Failure) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.plan.Load, h.plan.Failed
}

func (h *planHost) Reload() {
	h.plugins.Forget()
	units, _ := h.plugins.List()
	installed, _ := h.workers.List()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.plan = plugins.MakePlan(units, h.policy, packages.Names(installed))
}

// user runs the commands as a person or a CI job does: with a config folder of their own for
// the saved logins, and an environment.
type user struct {
	t    *testing.T
	home string // HOME and the config folder
	env  []string
}

func newUser(t *testing.T, env ...string) *user {
	home := t.TempDir()
	return &user{t: t, home: home, env: append([]string{"HOME=" + home, "XDG_CONFIG_HOME=" + home, "AppData=" + home}, env...)}
}

// ciUser talks to rt with the root key from the environment, as a CI job does.
func ciUser(t *testing.T, rt *testRuntime) *user {
	return newUser(t, "RUNTIME_URL="+rt.URL, "RUNTIME_API_KEY="+rootKey)
}

type result struct {
	out, errOut string
	code        int
}

// run runs caddy runtime with args.
func (u *user) run(args ...string) result {
	u.t.Helper()
	out, errOut, code := testkit.Reexec(u.t, u.env, append([]string{"runtime"}, args...)...)
	return result{out, errOut, code}
}

// ok runs caddy runtime with args and fails the test unless it exits 0.
func (u *user) ok(args ...string) string {
	u.t.Helper()
	r := u.run(args...)
	if r.code != 0 {
		u.t.Fatalf("%v exited %d:\n%s%s", args, r.code, r.out, r.errOut)
	}
	return r.out
}

// json runs caddy runtime with args and --json, and decodes what it prints.
func (u *user) json(args ...string) any {
	u.t.Helper()
	return decode(u.t, []byte(u.ok(append(args, "--json")...)))
}

// exits is a command line and the exit code and error text it must give.
type exits struct {
	name string
	args []string
	code int
	says string // in the error output
}

func (u *user) checkExits(tests []exits) {
	u.t.Helper()
	for _, tt := range tests {
		u.t.Run(tt.name, func(t *testing.T) {
			u := &user{t: t, home: u.home, env: u.env}
			r := u.run(tt.args...)
			if r.code != tt.code || !strings.Contains(r.errOut, tt.says) {
				t.Errorf("%v: exit %d, %q; want %d and %q", tt.args, r.code, r.errOut, tt.code, tt.says)
			}
			if tt.code != 0 && r.out != "" {
				t.Errorf("%v failed but printed %q", tt.args, r.out)
			}
		})
	}
}

// folder writes files into a new folder and returns it.
func folder(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func site(t *testing.T, name, version string) string {
	return folder(t, map[string]string{"manifest.yaml": "name: '" + name + "'\nversion: " + version + "\n", "index.html": "<p>" + version})
}

// newKey creates a key through the command line and returns its id and secret.
func newKey(t *testing.T, u *user, args ...string) (id, secret string) {
	t.Helper()
	var created struct {
		Data struct {
			ID  json.Number
			Key string
		}
	}
	if err := json.Unmarshal([]byte(u.ok(append([]string{"keys", "create"}, append(args, "--json")...)...)), &created); err != nil || created.Data.Key == "" {
		t.Fatalf("keys create --json: %v %+v", err, created)
	}
	return created.Data.ID.String(), created.Data.Key
}

func TestLoginAndLogout(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	u := newUser(t)
	u.checkExits([]exits{
		{"no URL", []string{"login", "--key", rootKey}, 1, "login needs --url"},
		{"no key on stdin", []string{"login", "--url", rt.URL}, 1, "login needs a key: pass --key, type it when asked, or pipe it on stdin"},
		{"argument", []string{"login", "x", "--url", rt.URL, "--key", rootKey}, 1, "login takes no arguments"},
		{"bad URL", []string{"login", "--url", "ftp://x", "--key", rootKey}, 1, "http(s)"},
		{"wrong key", []string{"login", "--url", rt.URL, "--key", "nope"}, 4, "AUTH_REQUIRED"},
		{"unreachable", []string{"login", "--url", "http://127.0.0.1:1", "--key", rootKey}, 3, "cannot reach"},
		{"no login yet", []string{"workers", "list"}, 1, "--url"},
		{"no such profile", []string{"workers", "list", "--profile", "nope"}, 1, `no profile named "nope"`},
		{"logout without a login", []string{"logout"}, 1, "no saved login"},
	})

	in := u.json("login", "--url", rt.URL+"/", "--key", rootKey, "--profile", "local")
	file := filepath.Join(u.home, "caddy-runtime", "profiles.json")
	// The principal is the API's, as GET admin/session answers it.
	want := map[string]any{"url": rt.URL, "profile": "local", "file": file,
		"principal": rt.get(t, "/admin/session").(map[string]any)["principal"]}
	if !reflect.DeepEqual(in, want) {
		t.Errorf("login --json = %v, want %v", in, want)
	}
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the profiles file: %v; want mode 0600", err)
	}
	// The profile gives URL and key; a second login by host name becomes the current one.
	if out := u.ok("login", "--url", rt.URL, "--key", rootKey); !strings.Contains(out, "as root (admin); saved as profile \""+strings.TrimPrefix(rt.URL, "http://")+"\"") {
		t.Errorf("login printed %q", out)
	}
	u.ok("health")
	u.ok("workers", "list", "--profile", "local")

	if got := u.json("logout", "--profile", "local"); !reflect.DeepEqual(got, map[string]any{"profile": "local"}) {
		t.Errorf("logout --json = %v", got)
	}
	if out := u.ok("logout"); !strings.Contains(out, `Removed the login "`+strings.TrimPrefix(rt.URL, "http://")+`"`) {
		t.Errorf("logout printed %q", out)
	}
	u.checkExits([]exits{{"after logout", []string{"workers", "list"}, 1, "--url"}})
}

func TestHealth(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	starting := newRuntime(t, func() error { return errors.New("the runtime is starting") })
	u := newUser(t)
	if out := u.ok("health", "--url", rt.URL); out != rt.URL+"  ready  version v1.2.3\n" {
		t.Errorf("health printed %q", out)
	}
	if got, want := u.json("health", "--url", rt.URL), rt.get(t, "/health/ready"); !reflect.DeepEqual(got, want) {
		t.Errorf("health --json = %v, the API %v", got, want)
	}
	u.checkExits([]exits{
		{"public", []string{"health", "--url", rt.URL, "--key", "nope"}, 0, ""},
		{"not ready", []string{"health", "--url", starting.URL}, 1, "NOT_READY"},
		{"unreachable", []string{"health", "--url", "http://127.0.0.1:1"}, 3, "cannot reach"},
		{"bad URL", []string{"health", "--url", "ftp://x"}, 1, "http(s)"},
		{"not a runtime", []string{"health", "--url", rt.URL + "/api"}, 1, "NOT_FOUND: no API route at /api/.well-known/runtime"},
	})
}

// TestDeployHostURL: with workers_domain, deploy prints the worker's own host for the unpinned
// URL, and the listing reports it, or why a name has none.
func TestDeployHostURL(t *testing.T) {
	t.Parallel()
	rt := newRuntimeWith(t, func(o *handlers.Options) {
		o.WorkersDomain = hosts.Domain{Name: "apps.localhost", Scheme: "http", Port: "8080"}
	})
	u := ciUser(t, rt)
	tests := []struct{ name, first string }{
		{"app", "http://app.apps.localhost:8080/"},
		{"@team/tool", "http://tool.team.apps.localhost:8080/"},
		{"my_app", rt.URL + "/my_app/"},
	}
	for _, tt := range tests {
		var deployed struct{ URLs []string }
		if err := json.Unmarshal([]byte(u.ok("deploy", site(t, tt.name, "1.0.0"), "--json")), &deployed); err != nil {
			t.Fatal(err)
		}
		if want := []string{tt.first, rt.URL + "/" + tt.name + "@1.0.0/"}; !reflect.DeepEqual(deployed.URLs, want) {
			t.Errorf("deploy %s: urls %v, want %v", tt.name, deployed.URLs, want)
		}
	}
	listed := map[string]map[string]any{}
	for _, w := range rt.get(t, "/workers").([]any) {
		rec := w.(map[string]any)
		listed[rec["name"].(string)] = rec
	}
	if got := listed["app"]["url"]; got != "http://app.apps.localhost:8080/" {
		t.Errorf("app's url = %v", got)
	}
	if got, _ := listed["my_app"]["noHost"].(string); listed["my_app"]["url"] != nil || !strings.Contains(got, "path only") {
		t.Errorf("my_app: url %v, noHost %q", listed["my_app"]["url"], got)
	}
	resp, err := http.Get(rt.URL + "/.well-known/runtime")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d struct{ WorkersDomain string }
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || d.WorkersDomain != "http://apps.localhost:8080" {
		t.Errorf("discovery: workersDomain %q, %v", d.WorkersDomain, err)
	}
}

func TestDeploy(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	u := ciUser(t, rt)
	out := u.ok("deploy", site(t, "app", "1.0.0"))
	for _, want := range []string{"Deployed app 1.0.0\n", "  " + rt.URL + "/app/\n", "  " + rt.URL + "/app@1.0.0/\n", "sha256 "} {
		if !strings.Contains(out, want) {
			t.Errorf("deploy printed %q, want %q in it", out, want)
		}
	}

	var deployed struct {
		Name, Version, SHA256 string
		Bytes                 int64
		DryRun                bool
		URLs                  []string
		Upload                struct {
			Success bool
			Data    struct {
				Worker struct{ Name, Version, SHA256 string }
			}
		}
	}
	if err := json.Unmarshal([]byte(u.ok("deploy", site(t, "app", "1.1.0"), "--json")), &deployed); err != nil {
		t.Fatal(err)
	}
	if w := deployed.Upload.Data.Worker; deployed.Name != "app" || deployed.Version != "1.1.0" || deployed.DryRun || deployed.Bytes == 0 ||
		!deployed.Upload.Success || w.Name != "app" || w.Version != "1.1.0" || w.SHA256 != deployed.SHA256 ||
		!reflect.DeepEqual(deployed.URLs, []string{rt.URL + "/app/", rt.URL + "/app@1.1.0/"}) {
		t.Errorf("deploy --json = %+v", deployed)
	}

	if out := u.ok("deploy", site(t, "app", "2.0.0"), "--dry-run"); !strings.Contains(out, "app 2.0.0 would install (dry run: nothing was installed)") {
		t.Errorf("deploy --dry-run printed %q", out)
	}
	dry := u.json("deploy", site(t, "app", "2.0.0"), "--dry-run").(map[string]any)
	if dry["dryRun"] != true || dry["urls"] != nil || dry["upload"] == nil {
		t.Errorf("deploy --dry-run --json = %v", dry)
	}
	if got := rt.get(t, "/workers").([]any)[0].(map[string]any)["versions"]; !reflect.DeepEqual(got, []any{"1.0.0", "1.1.0"}) {
		t.Errorf("after a dry run the versions are %v", got)
	}

	if out := u.ok("deploy", "--plugin", "../../examples/hello-plugin"); !strings.Contains(out, "Installed plugin hello-plugin 1.0.0 and reloaded the plugins") {
		t.Errorf("deploy --plugin printed %q", out)
	}
	plugin := u.json("deploy", "--plugin", "../../examples/hello-plugin").(map[string]any)
	if reload, ok := plugin["reload"].(map[string]any); !ok || reload["ok"] != true || len(reload["plugins"].([]any)) != 1 {
		t.Errorf("deploy --plugin --json = %v", plugin)
	}

	_, teamKey := newKey(t, u, "team", "--namespace", "@team")
	u.checkExits([]exits{
		{"no manifest", []string{"deploy", t.TempDir()}, 1, "no manifest.yaml"},
		{"no such folder", []string{"deploy", filepath.Join(t.TempDir(), "nope")}, 1, "error: "},
		{"two folders", []string{"deploy", ".", "."}, 1, "accepts at most 1 arg"},
		{"outside the key's namespace", []string{"deploy", site(t, "other", "1.0.0"), "--key", teamKey}, 1, "NAMESPACE_DENIED"},
		{"wrong key", []string{"deploy", site(t, "app", "3.0.0"), "--key", "nope"}, 4, "AUTH_REQUIRED"},
		{"unreachable", []string{"deploy", site(t, "app", "3.0.0"), "--url", "http://127.0.0.1:1"}, 3, "cannot reach"},
	})
}

func TestRollback(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	u := ciUser(t, rt)
	u.ok("deploy", site(t, "@team/shop", "1.0.0"))
	u.ok("deploy", site(t, "@team/shop", "1.1.0"))
	u.ok("deploy", site(t, "@team/shop", "1.2.0"))
	if out := u.ok("rollback", "@team/shop"); out != "Disabled @team/shop 1.2.0: 1.1.0 is served now\n" {
		t.Errorf("rollback printed %q", out)
	}
	got := u.json("rollback", "@team/shop@1.1.0").(map[string]any)
	if got["success"] != true {
		t.Errorf("rollback --json = %v", got)
	}
	shop := rt.get(t, "/workers").([]any)[0].(map[string]any)
	if !reflect.DeepEqual(shop["disabledVersions"], []any{"1.1.0", "1.2.0"}) {
		t.Errorf("after two rollbacks: %v", shop)
	}
	u.checkExits([]exits{
		{"nothing to roll back to", []string{"rollback", "@team/shop"}, 1, "no previous version"},
		{"no such worker", []string{"rollback", "nope"}, 1, "WORKER_NOT_FOUND"},
		{"no name", []string{"rollback"}, 1, "accepts 1 arg"},
		{"wrong key", []string{"rollback", "@team/shop", "--key", "nope"}, 4, "AUTH_REQUIRED"},
	})
}

func TestWorkers(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	u := ciUser(t, rt)
	process := func(version string) string { // runs sh, from the worker's PATH: nothing of its own
		return folder(t, map[string]string{"manifest.yaml": "name: app\nversion: " + version + "\ncommand: [sh, -c, 'exit 0']\n"})
	}
	u.ok("deploy", process("1.0.0"))
	u.ok("deploy", process("1.1.0"))
	u.ok("deploy", site(t, "site", "1.0.0"))

	if got, want := u.json("workers", "list"), rt.get(t, "/workers"); !reflect.DeepEqual(got, want) {
		t.Errorf("workers list --json = %v, the API %v", got, want)
	}
	changes := []struct {
		args  []string
		table string
	}{
		{[]string{"disable", "app@1.1.0"}, "disabled app 1.1.0\n"},
		{[]string{"enable", "app@1.1.0"}, "enabled app 1.1.0\n"},
		{[]string{"restart", "app"}, "restarted app\n"},
	}
	for _, c := range changes {
		if out := u.ok(append([]string{"workers"}, c.args...)...); out != c.table {
			t.Errorf("workers %v printed %q, want %q", c.args, out, c.table)
		}
		if got := u.json(append([]string{"workers"}, c.args...)...).(map[string]any); got["success"] != true {
			t.Errorf("workers %v --json = %v", c.args, got)
		}
	}
	u.ok("workers", "disable", "app@1.1.0")
	listed := rt.get(t, "/workers").([]any)
	app, static := listed[0].(map[string]any), listed[1].(map[string]any)
	if kinds := app["kinds"]; !reflect.DeepEqual(kinds, map[string]any{"1.0.0": "process", "1.1.0": "process"}) {
		t.Errorf("GET workers lists app's kinds as %v", kinds)
	}
	sizes, siteSize := app["sizes"].(map[string]any), static["sizes"].(map[string]any)["1.0.0"].(float64)
	// The served version's STATE is the worker's: app's process has not started yet (nothing
	// checked it here), the static site serves.
	if out, want := u.ok("workers", "list"), fmt.Sprintf("NAME  VERSION  STATE        KIND     SIZE  SOURCE\n"+
		"app   1.0.0    not-started  process  %d B  %s\napp   1.1.0    disabled     process  %d B  %[2]s\nsite  1.0.0    serving      static   %[4]d B  %[2]s\n",
		int(sizes["1.0.0"].(float64)), app["source"], int(sizes["1.1.0"].(float64)), int(siteSize)); out != want {
		t.Errorf("workers list printed %q, want %q", out, want)
	}
	// A static worker has no logs, and says so, followed or not; a process worker that wrote
	// nothing says that.
	for _, args := range [][]string{{"workers", "logs", "site"}, {"workers", "logs", "site", "-f"}} {
		if out := u.ok(args...); out != "site is a static worker: static workers have no logs (only process workers, which run a program of their own, write them)\n" {
			t.Errorf("%v printed %q", args, out)
		}
	}
	if out := u.ok("workers", "logs", "app"); out != "app has written no log lines yet (its process starts on its first request)\n" {
		t.Errorf("workers logs of a silent process worker printed %q", out)
	}
	if out := u.ok("workers", "logs", "site", "--json"); out != "" {
		t.Errorf("workers logs --json of a static worker printed %q, want no line", out)
	}

	// Logs: the recent lines, then followed until the runtime ends the stream.
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	rt.logs.Append("app", workers.LogLine{Time: at, Version: "1.0.0", PID: 42, Stream: "stdout", Text: "listening"})
	if out := u.ok("workers", "logs", "app"); out != "2026-01-02T15:04:05Z 1.0.0 [42] stdout: listening\n" {
		t.Errorf("workers logs printed %q", out)
	}
	lines := strings.Split(strings.TrimSpace(u.ok("workers", "logs", "app", "--json")), "\n")
	want := rt.get(t, "/workers/_/app/logs").(map[string]any)["lines"].([]any)
	if len(lines) != 1 || !reflect.DeepEqual(decode(t, []byte(lines[0])), want[0]) {
		t.Errorf("workers logs --json printed %q, the API %v", lines, want)
	}
	u.follow(rt, "app", "2026-01-02T15:04:05Z 1.0.0 [42] stdout: listening", "2026-01-02T15:04:06Z 1.0.0 [42] stderr: next")

	u.ok("workers", "delete", "app@1.1.0")
	if out := u.ok("workers", "delete", "app"); out != "deleted app\n" {
		t.Errorf("workers delete printed %q", out)
	}
	u.ok("workers", "delete", "site")
	if got := rt.get(t, "/workers"); !reflect.DeepEqual(got, []any{}) {
		t.Errorf("after the deletes the workers are %v", got)
	}
	u.checkExits([]exits{
		{"no version", []string{"workers", "enable", "app"}, 1, "name the version: app@VERSION"},
		{"no such worker", []string{"workers", "delete", "missing"}, 1, "WORKER_NOT_FOUND"},
		{"logs of no worker", []string{"workers", "logs", "missing"}, 1, "WORKER_NOT_FOUND"},
		{"no such command", []string{"workers", "lst"}, 1, `caddy runtime workers has no command "lst"`},
		{"an argument too many", []string{"workers", "list", "x"}, 1, `unknown command "x"`},
		{"wrong key", []string{"workers", "list", "--key", "nope"}, 4, "AUTH_REQUIRED"},
		{"unreachable", []string{"workers", "list", "--url", "http://127.0.0.1:1"}, 3, "cannot reach"},
	})
}

// follow runs workers logs -f: it must print first, the kept line; then the runtime writes a
// line (second) and ends the stream, and the command must print it and exit 0.
func (u *user) follow(rt *testRuntime, worker, first, second string) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net
	defer cancel()
	cmd := testkit.ReexecCommand(ctx, u.env, "runtime", "workers", "logs", worker, "-f")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		u.t.Fatal(err)
	}
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		u.t.Fatal(err)
	}
	lines := bufio.NewReader(stdout)
	readLine := func() string {
		line, _ := lines.ReadString('\n')
		return strings.TrimSuffix(line, "\n")
	}
	if line := readLine(); line != first {
		u.t.Errorf("workers logs -f printed first %q, want %q", line, first)
	}
	rt.logs.Append(worker, workers.LogLine{Time: time.Date(2026, 1, 2, 15, 4, 6, 0, time.UTC), Version: "1.0.0", PID: 42, Stream: "stderr", Text: "next"})
	if line := readLine(); line != second {
		u.t.Errorf("workers logs -f printed then %q, want %q", line, second)
	}
	rt.logs.CloseFollowers()
	if err := cmd.Wait(); err != nil {
		u.t.Errorf("workers logs -f ended with %v when the runtime ended the stream: %s", err, errOut.String())
	}
}

func TestPlugins(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	u := ciUser(t, rt)
	u.ok("deploy", "--plugin", "../../examples/hello-plugin")

	if got, want := u.json("plugins", "list"), rt.get(t, "/plugins"); !reflect.DeepEqual(got, want) {
		t.Errorf("plugins list --json = %v, the API %v", got, want)
	}
	if out := u.ok("plugins", "list"); !strings.HasPrefix(out, "NAME          VERSION  ENABLED  SOURCE\nhello-plugin  1.0.0    true     ") {
		t.Errorf("plugins list printed %q", out)
	}
	if got, want := u.json("plugins", "loaded"), rt.get(t, "/plugins/loaded"); !reflect.DeepEqual(got, want) {
		t.Errorf("plugins loaded --json = %v, the API %v", got, want)
	}
	if out := u.ok("plugins", "loaded"); out != "NAME          VERSION  BASE\nhello-plugin  1.0.0    /hello-plugin\n" {
		t.Errorf("plugins loaded printed %q", out)
	}
	for _, c := range []struct{ args, table string }{
		{"reload", "reloaded the plugins\n"},
		{"disable hello-plugin", "disabled hello-plugin\n"},
		{"enable hello-plugin", "enabled hello-plugin\n"},
	} {
		args := append([]string{"plugins"}, strings.Fields(c.args)...)
		if out := u.ok(args...); out != c.table {
			t.Errorf("%v printed %q, want %q", args, out, c.table)
		}
		if got, ok := u.json(args...).(map[string]any); !ok || (got["ok"] != true && got["success"] != true) {
			t.Errorf("%v --json = %v", args, got)
		}
	}
	if out := u.ok("plugins", "delete", "hello-plugin"); out != "deleted hello-plugin\n" {
		t.Errorf("plugins delete printed %q", out)
	}
	u.checkExits([]exits{
		{"no such plugin", []string{"plugins", "disable", "missing"}, 1, "PLUGIN_NOT_FOUND"},
		{"no name", []string{"plugins", "delete"}, 1, "accepts 1 arg"},
		{"no such command", []string{"plugins", "install", "x"}, 1, `has no command "install"`},
		{"wrong key", []string{"plugins", "list", "--key", "nope"}, 4, "AUTH_REQUIRED"},
		{"unreachable", []string{"plugins", "reload", "--url", "http://127.0.0.1:1"}, 3, "cannot reach"},
	})
}

func TestKeys(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	u := ciUser(t, rt)
	out := u.ok("keys", "create", "ci", "--role", "viewer", "--expires", "30d")
	if !strings.HasPrefix(out, "Created key ci (id ") || !strings.Contains(out, "Its secret, shown this once:\n") {
		t.Errorf("keys create printed %q", out)
	}
	id, secret := newKey(t, u, "team", "--namespace", "@team", "--role", "editor")
	if got, want := u.json("keys", "list"), rt.get(t, "/keys"); !reflect.DeepEqual(got, want) {
		t.Errorf("keys list --json = %v, the API %v", got, want)
	}
	if out := u.ok("keys", "list"); !strings.HasPrefix(out, "ID  NAME  PREFIX") || !strings.Contains(out, " team ") || !strings.Contains(out, "@team") {
		t.Errorf("keys list printed %q", out)
	}
	// The team key works within its namespace only.
	team := newUser(t, "RUNTIME_URL="+rt.URL, "RUNTIME_API_KEY="+secret)
	team.ok("deploy", site(t, "@team/app", "1.0.0"))

	if got := u.json("keys", "revoke", id).(map[string]any); got["success"] != true {
		t.Errorf("keys revoke --json = %v", got)
	}
	team.checkExits([]exits{{"revoked key", []string{"workers", "list"}, 4, "AUTH_REQUIRED"}})
	u.checkExits([]exits{
		{"no name", []string{"keys", "create"}, 1, "accepts 1 arg"},
		{"unknown role", []string{"keys", "create", "x", "--role", "boss"}, 1, "role"},
		{"bad lifetime", []string{"keys", "create", "x", "--expires", "soon"}, 1, "expiresIn"},
		{"no such key", []string{"keys", "revoke", "999"}, 1, "KEY_NOT_FOUND"},
		{"wrong key", []string{"keys", "list", "--key", "nope"}, 4, "AUTH_REQUIRED"},
		{"unreachable", []string{"keys", "list", "--url", "http://127.0.0.1:1"}, 3, "cannot reach"},
	})
}

func TestAudit(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	u := ciUser(t, rt)
	u.ok("deploy", site(t, "app", "1.0.0"))
	u.ok("workers", "disable", "app@1.0.0")
	if got, want := u.json("audit"), rt.get(t, "/audit?limit=50"); !reflect.DeepEqual(got, want) {
		t.Errorf("audit --json = %v, the API %v", got, want)
	}
	var page struct {
		Entries []struct{ Action, Target string }
	}
	if err := json.Unmarshal([]byte(u.ok("audit", "--action", "worker.disable", "--json")), &page); err != nil ||
		len(page.Entries) != 1 || page.Entries[0].Action != "worker.disable" {
		t.Errorf("audit --action worker.disable --json: %v %+v", err, page)
	}
	out := u.ok("audit", "--limit", "1")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "TIME ACTOR ACTION TARGET OUTCOME" ||
		strings.Join(strings.Fields(lines[1])[1:], " ") != "root worker.disable app@1.0.0 success" {
		t.Errorf("audit --limit 1 printed %q", out)
	}
	u.checkExits([]exits{
		{"bad limit", []string{"audit", "--limit", "x"}, 1, "invalid argument"},
		{"wrong key", []string{"audit", "--key", "nope"}, 4, "AUTH_REQUIRED"},
		{"unreachable", []string{"audit", "--url", "http://127.0.0.1:1"}, 3, "cannot reach"},
	})
}

func TestVersionAndBuildInfo(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	if out := u.ok("version"); out != "runtime "+version.String()+" (commit "+version.Commit()+")\n" {
		t.Errorf("version printed %q", out)
	}
	if got := u.json("version"); !reflect.DeepEqual(got, map[string]any{"version": version.String(), "commit": version.Commit()}) {
		t.Errorf("version --json = %v", got)
	}
	info := u.json("build-info").(map[string]any)
	if info["version"] != version.String() || info["module"] != version.Module || info["main"] == "" {
		t.Errorf("build-info --json = %v", info)
	}
	if out := u.ok("build-info"); !strings.Contains(out, "version  "+version.String()+"\ncommit   "+version.Commit()+"\nmodule   "+version.Module+"\n") {
		t.Errorf("build-info printed %q", out)
	}
	u.checkExits([]exits{
		{"version takes no argument", []string{"version", "x"}, 1, `unknown command "x"`},
		{"no such command", []string{"deplyo"}, 1, `caddy runtime has no command "deplyo"`},
	})
	if out := u.ok(); !strings.Contains(out, "Available Commands:") {
		t.Errorf("caddy runtime printed %q, want its help", out)
	}
}

// TestCommandsReturnTheirFailure runs a failing command in this process: it prints the error
// and returns it for Caddy's command line to exit with, exiting nothing itself.
func TestCommandsReturnTheirFailure(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	root := &cobra.Command{Use: "caddy", SilenceUsage: true}
	root.AddCommand(cobraCommand(Group(Commands())))
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"runtime", "health", "--url", "http://127.0.0.1:1"})
	if err := root.Execute(); err == nil || out.Len() != 0 || !strings.HasPrefix(errOut.String(), "error: cannot reach the runtime at http://127.0.0.1:1/") {
		t.Errorf("health of no server returned %v, printed %q and %q", err, out.String(), errOut.String())
	}
}

func TestRolloutCommands(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	u := ciUser(t, rt)
	split := func() string {
		t.Helper()
		t2 := rt.get(t, "/workers/_/shop/traffic").(map[string]any)
		return fmt.Sprint(t2["split"])
	}
	u.ok("deploy", site(t, "shop", "1.0.0"))
	out := u.ok("deploy", site(t, "shop", "1.1.0"), "--canary", "10")
	if !strings.Contains(out, "Canary: shop: 1.0.0 90%, 1.1.0 10%") {
		t.Errorf("deploy --canary printed %q", out)
	}
	if got := split(); got != "[map[percent:10 version:1.1.0] map[percent:90 version:1.0.0]]" {
		t.Errorf("after deploy --canary 10: %s", got)
	}
	if out := u.ok("rollout", "set", "shop", "1.1.0=30"); out != "shop: 1.1.0 30%, 1.0.0 70%\n" {
		t.Errorf("rollout set one share printed %q", out)
	}
	if out := u.ok("rollout", "show", "shop"); out != "shop: 1.1.0 30%, 1.0.0 70%\n" {
		t.Errorf("rollout show printed %q", out)
	}
	got := u.json("rollout", "set", "shop", "1.0.0=50", "1.1.0=50").(map[string]any)
	if fmt.Sprint(got["split"]) != "[map[percent:50 version:1.1.0] map[percent:50 version:1.0.0]]" {
		t.Errorf("rollout set --json = %v", got)
	}
	if out := u.ok("rollout", "promote", "shop"); !strings.Contains(out, "Promoted shop 1.1.0") || !strings.Contains(out, "no split") {
		t.Errorf("rollout promote of the newest printed %q", out)
	}
	if got := split(); got != "[]" {
		t.Errorf("promoting the newest left the split %s", got)
	}
	u.ok("rollout", "promote", "shop", "1.0.0")
	if got := split(); got != "[map[percent:100 version:1.0.0]]" {
		t.Errorf("promoting 1.0.0: %s", got)
	}
	u.ok("rollout", "set", "shop", "1.0.0=80", "1.1.0=20")
	if out := u.ok("rollout", "abort", "shop"); !strings.Contains(out, "Aborted shop 1.1.0") {
		t.Errorf("rollout abort printed %q", out)
	}
	shop := rt.get(t, "/workers").([]any)[0].(map[string]any)
	if split() != "[]" || !reflect.DeepEqual(shop["disabledVersions"], []any{"1.1.0"}) || shop["served"] != "1.0.0" {
		t.Errorf("after abort: split %s, worker %v", split(), shop)
	}
	u.checkExits([]exits{
		{"canary out of range", []string{"deploy", site(t, "shop", "1.2.0"), "--canary", "100"}, 1, "--canary is a percentage from 1 to 99"},
		{"canary of a new worker", []string{"deploy", site(t, "fresh", "1.0.0"), "--canary", "10"}, 1, "NO_SERVED_VERSION"},
		{"not VERSION=PERCENT", []string{"rollout", "set", "shop", "1.0.0"}, 1, "is not VERSION=PERCENT"},
		{"one share, no split", []string{"rollout", "set", "shop", "1.0.0=50"}, 1, "name every version"},
		{"not summing to 100", []string{"rollout", "set", "shop", "1.0.0=50", "1.1.0=10"}, 1, "INVALID_SPLIT"},
		{"disabled version", []string{"rollout", "set", "shop", "1.0.0=50", "1.1.0=50"}, 1, "WORKER_VERSION_DISABLED"},
		{"nothing to abort", []string{"rollout", "abort", "shop"}, 1, "no canary to abort"},
		{"nothing to promote", []string{"rollout", "promote", "shop"}, 1, "no split to promote"},
		{"no such worker", []string{"rollout", "show", "nope"}, 1, "WORKER_NOT_FOUND"},
	})
}
