package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// siteConfig returns a Caddy JSON config with one server on port whose routes are the given
// runtime handler configs, each in its own route matched by host, and the runtime app app
// (none when nil).
func siteConfig(t *testing.T, port int, app map[string]any, handlers ...map[string]any) []byte {
	t.Helper()
	var routes []any
	for i, h := range handlers {
		h["handler"] = "runtime"
		routes = append(routes, map[string]any{
			"match":  []any{map[string]any{"host": []string{fmt.Sprintf("site%d.test", i)}}},
			"handle": []any{h},
		})
	}
	apps := map[string]any{"http": map[string]any{"servers": map[string]any{"s": map[string]any{
		"listen":          []string{fmt.Sprintf("127.0.0.1:%d", port)},
		"automatic_https": map[string]any{"disable": true},
		"routes":          routes,
	}}}}
	if app != nil {
		apps["runtime"] = app
	}
	cfg := map[string]any{
		"admin":   map[string]any{"disabled": true},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}},
		"storage": map[string]any{"module": "file_system", "root": filepath.Join(t.TempDir(), "caddy")},
		"apps":    apps,
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dirsIn(root string) map[string]any {
	return map[string]any{
		"worker_dirs": []string{filepath.Join(root, ".apps"), filepath.Join(root, "apps")},
		"plugin_dirs": []string{filepath.Join(root, "plugins")},
		"state_dir":   filepath.Join(root, "state"),
	}
}

func with(base map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for key, val := range base {
		out[key] = val
	}
	out[k] = v
	return out
}

// heldStates returns the states the pool holds, by key.
func heldStates() map[string]*state {
	out := map[string]*state{}
	states.Range(func(k, v any) bool {
		out[k.(string)] = v.(*state)
		return true
	})
	return out
}

// keyOf is the state key of the process-wide settings in app.
func keyOf(t *testing.T, app map[string]any) string {
	t.Helper()
	var v config.AppValues
	b, _ := json.Marshal(app)
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	// Only PATH, where js_runtime finds the engines, as the module resolves them.
	s, err := config.ResolveApp(v, func(name string) string { return map[string]string{"PATH": os.Getenv("PATH")}[name] })
	if err != nil {
		t.Fatal(err)
	}
	return stateKey(s)
}

func get(t *testing.T, port int, host, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d%s", port, path), nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestValidateHasNoSideEffects checks that provisioning (what caddy validate runs) creates no
// folder and leaves no state behind.
func TestValidateHasNoSideEffects(t *testing.T) {
	root := t.TempDir()
	var cfg caddy.Config
	if err := json.Unmarshal(siteConfig(t, testkit.FreePort(t), dirsIn(root), map[string]any{}), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := caddy.Validate(&cfg); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("validate created %v", entries)
	}
	if held := heldStates(); len(held) != 0 {
		t.Fatalf("validate left %d states held", len(held))
	}
}

// TestFailedConfigReleasesState checks that a config whose second handler fails to provision
// releases the state the App acquired for the first: a bad setting of the handler's own, or
// process-wide settings that the handlers carry themselves (the deprecated form) and set
// differently, or otherwise than the runtime app.
func TestFailedConfigReleasesState(t *testing.T) {
	root := t.TempDir()
	tests := []struct {
		name      string
		app       map[string]any
		good, bad map[string]any
		want      []string
	}{
		{"bad site setting", dirsIn(root), map[string]any{}, map[string]any{"api_prefix": "/a//b"}, []string{"api_prefix", "double slash"}},
		{"copies differ", nil, dirsIn(root), with(dirsIn(root), "session_ttl", "7d"), []string{"session_ttl", "differently", "global runtime option"}},
		{"copy and none", nil, map[string]any{}, with(map[string]any{}, "pool_size", 3), []string{"pool_size", "differently", "global runtime option"}},
		{"copy differs from the app", dirsIn(root), with(map[string]any{}, "state_dir", filepath.Join(root, "other")),
			with(map[string]any{}, "state_dir", filepath.Join(root, "other")), []string{"state_dir", "global runtime option", "another value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg caddy.Config
			if err := json.Unmarshal(siteConfig(t, testkit.FreePort(t), tt.app, tt.good, tt.bad), &cfg); err != nil {
				t.Fatal(err)
			}
			err := caddy.Validate(&cfg)
			if err == nil {
				t.Fatal("validate succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("validate error = %v, want one containing %q", err, w)
				}
			}
			if held := heldStates(); len(held) != 0 {
				t.Fatalf("failed config left %d states held", len(held))
			}
		})
	}
}

// TestStateSurvivesReload runs real configs: a reload with the same process-wide settings keeps
// the state (even with another API prefix); one with another state folder replaces it;
// stopping releases everything exactly once.
func TestStateSurvivesReload(t *testing.T) {
	port := testkit.FreePort(t)
	root := t.TempDir()
	a := dirsIn(root)
	if err := caddy.Load(siteConfig(t, port, a, map[string]any{}, map[string]any{"api_prefix": "/_"}), true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })

	held := heldStates()
	first := held[keyOf(t, a)]
	if len(held) != 1 || first == nil {
		t.Fatalf("held states = %v, want one shared by both sites", held)
	}
	if refs, _ := states.References(keyOf(t, a)); refs != 1 {
		t.Fatalf("references = %d, want 1 (the App's)", refs)
	}
	if err := first.ready(); err != nil {
		t.Fatalf("ready after start = %v", err)
	}
	for _, dir := range []string{"apps", "plugins", "state"} {
		if _, err := os.Stat(filepath.Join(root, dir)); err != nil {
			t.Errorf("start did not create %s: %v", dir, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, ".apps")); !os.IsNotExist(err) {
		t.Errorf("start created the built-in folder .apps (err %v)", err)
	}
	if code, body := get(t, port, "site1.test", "/_/api/health/ready"); code != 200 {
		t.Fatalf("ready = %d %s", code, body)
	}

	// Same state settings, another prefix: the state is kept.
	if err := caddy.Load(siteConfig(t, port, a, map[string]any{"api_prefix": "/x"}), true); err != nil {
		t.Fatal(err)
	}
	if held := heldStates(); len(held) != 1 || held[keyOf(t, a)] != first {
		t.Fatalf("reload replaced the state: %v", held)
	}
	if refs, _ := states.References(keyOf(t, a)); refs != 1 {
		t.Fatalf("references after reload = %d, want 1", refs)
	}
	if first.phase.Load() != phaseReady {
		t.Fatal("reload stopped the kept state")
	}
	if code, body := get(t, port, "site0.test", "/x/api/health/ready"); code != 200 {
		t.Fatalf("ready after reload = %d %s", code, body)
	}

	// Another state folder: a new state, the old one released.
	b := with(a, "state_dir", filepath.Join(root, "state2"))
	if err := caddy.Load(siteConfig(t, port, b, map[string]any{}), true); err != nil {
		t.Fatal(err)
	}
	if held := heldStates(); len(held) != 1 || held[keyOf(t, b)] == nil || held[keyOf(t, b)] == first {
		t.Fatalf("held states after settings change = %v", held)
	}
	if first.phase.Load() != phaseStopped {
		t.Fatal("the replaced state was not released")
	}
	second := heldStates()[keyOf(t, b)]

	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	if held := heldStates(); len(held) != 0 || second.phase.Load() != phaseStopped {
		t.Fatalf("stop left states held: %v", held)
	}
}

// TestSplitSurfaces runs the API and cpanel on one site and workers on another: both share the
// App's one state, and each answers a surface it does not serve with a 404 saying where that
// surface is.
func TestSplitSurfaces(t *testing.T) {
	port := testkit.FreePort(t)
	root := t.TempDir()
	admin := map[string]any{"serve": []string{"api", "cpanel"}, "workers_url": "http://apps.test:8080"}
	apps := map[string]any{"serve": []string{"workers"}}
	if err := caddy.Load(siteConfig(t, port, dirsIn(root), admin, apps), true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	if held := heldStates(); len(held) != 1 {
		t.Fatalf("held states = %d, want one shared by both sites", len(held))
	}
	tests := []struct {
		host, path string
		status     int
		body       string // a part of the body
	}{
		{"site0.test", "/.well-known/runtime", 200, `"workers":"http://apps.test:8080"`},
		{"site0.test", "/api/health/ready", 200, `"ready"`},
		{"site0.test", "/cpanel/", 200, `<base href="/cpanel/" />`},
		{"site0.test", "/hello/", 404, "workers are not served on this host; they are served at http://apps.test:8080"},
		{"site0.test", "/", 200, "  workers: http://apps.test:8080/<name>/\n"},
		{"site1.test", "/.well-known/runtime", 404, "the API is not served on this host"},
		{"site1.test", "/api/health", 404, "the API is not served on this host"},
		{"site1.test", "/api/keys", 404, "the API is not served on this host"},
		{"site1.test", "/cpanel/", 404, "the cpanel is not served on this host"},
		{"site1.test", "/hello/", 404, "WORKER_NOT_FOUND"},
	}
	for _, tt := range tests {
		if code, body := get(t, port, tt.host, tt.path); code != tt.status || !strings.Contains(body, tt.body) {
			t.Errorf("%s%s = %d %s, want %d with %s", tt.host, tt.path, code, body, tt.status, tt.body)
		}
	}
}

// TestDeprecatedHandlerSettings runs handlers that carry the process-wide settings themselves,
// the deprecated form, with no runtime app in the config: equal copies share the one state,
// the same one the app form gets, and a reload into the app form keeps it.
func TestDeprecatedHandlerSettings(t *testing.T) {
	port := testkit.FreePort(t)
	root := t.TempDir()
	a := dirsIn(root)
	if err := caddy.Load(siteConfig(t, port, nil, with(a, "serve", []string{"api"}), with(a, "serve", []string{"workers"})), true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	held := heldStates()
	first := held[keyOf(t, a)]
	if len(held) != 1 || first == nil {
		t.Fatalf("held states = %v, want one shared by both sites, keyed by their copy", held)
	}
	if code, body := get(t, port, "site0.test", "/api/health/ready"); code != 200 {
		t.Fatalf("ready = %d %s", code, body)
	}
	if err := caddy.Load(siteConfig(t, port, a, map[string]any{}), true); err != nil {
		t.Fatal(err)
	}
	if held := heldStates(); len(held) != 1 || held[keyOf(t, a)] != first || first.phase.Load() != phaseReady {
		t.Fatalf("moving the settings to the app replaced the state: %v", held)
	}
}

// TestAppMergesHandlerCopy checks that a handler's copy of process-wide settings adds to the
// app's where the app leaves them unset, and that handlers agree when the app's settings and
// their copies come to the same.
func TestAppMergesHandlerCopy(t *testing.T) {
	root := t.TempDir()
	var app App
	app.StateDir = filepath.Join(root, "state")
	app.logger = caddy.Log()
	own := config.AppValues{PoolSize: 3, WorkerDirs: []string{filepath.Join(root, "apps")}}
	st, settings, err := app.join(own)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Cleanup() })
	if settings.PoolSize != 3 || settings.StateDir != app.StateDir || st.settings.WorkerDirs[0] != own.WorkerDirs[0] {
		t.Fatalf("settings = %+v, want the app's state_dir with the copy's pool_size and worker_dirs", settings)
	}
	if again, _, err := app.join(own); err != nil || again != st {
		t.Fatalf("a second equal copy: %v, state %p, want %p", err, again, st)
	}
	// Equal to the app's own: the same settings as a handler without a copy.
	var other App
	other.StateDir, other.PoolSize, other.logger = app.StateDir, 3, caddy.Log()
	if _, _, err := other.join(config.AppValues{PoolSize: 3}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Cleanup() })
	if _, _, err := other.join(config.AppValues{}); err != nil {
		t.Fatalf("a handler without the copy that the app agrees with: %v", err)
	}
}

func TestCleanupReleasesOnce(t *testing.T) {
	root := t.TempDir()
	apps := [2]*App{}
	for i := range apps { // two configs (a reload) share the state
		apps[i] = &App{AppValues: config.AppValues{StateDir: filepath.Join(root, "state")}, logger: caddy.Log()}
		var err error
		if apps[i].settings, err = resolveApp(apps[i].AppValues); err != nil {
			t.Fatal(err)
		}
		if _, _, err := apps[i].join(config.AppValues{}); err != nil {
			t.Fatal(err)
		}
	}
	key, s := apps[0].stateKey, apps[0].state
	for range 3 {
		if err := apps[0].Cleanup(); err != nil {
			t.Fatal(err)
		}
	}
	if refs, ok := states.References(key); refs != 1 || !ok {
		t.Fatalf("after one App's repeated Cleanup: references = %d, want 1", refs)
	}
	if s.phase.Load() == phaseStopped {
		t.Fatal("state released while another App holds it")
	}
	if err := apps[1].Cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, ok := states.References(key); ok || s.phase.Load() != phaseStopped {
		t.Fatal("state not released by its last App")
	}
	if err := new(App).Cleanup(); err != nil { // an App no handler joined
		t.Fatal(err)
	}
}

func TestReadyPhases(t *testing.T) {
	dir := t.TempDir()
	s := newState(config.Settings{StateDir: filepath.Join(dir, "s"), ScratchDir: filepath.Join(dir, "scratch")}, nil, caddy.Log())
	if err := s.ready(); err != errStarting {
		t.Fatalf("ready before start = %v, want %v", err, errStarting)
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	if err := s.ready(); err != nil {
		t.Fatalf("ready after start = %v", err)
	}
	if err := s.Destruct(); err != nil {
		t.Fatal(err)
	}
	if err := s.ready(); err != errShuttingDown {
		t.Fatalf("ready after release = %v, want %v", err, errShuttingDown)
	}
}

func TestStartFailureIsReported(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := newState(config.Settings{StateDir: filepath.Join(file, "state")}, nil, caddy.Log())
	err := s.start()
	if err == nil || !strings.Contains(err.Error(), "state_dir") {
		t.Fatalf("start = %v, want an error naming state_dir", err)
	}
	if s.ready() == nil {
		t.Fatal("a state that failed to start reports ready")
	}
}
