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

	"github.com/caddy-runtime/runtime/config"
	"github.com/caddy-runtime/runtime/testkit"
)

// siteConfig returns a Caddy JSON config with one server on port whose routes are the given
// runtime handler configs, each in its own route matched by host.
func siteConfig(t *testing.T, port int, handlers ...map[string]any) []byte {
	t.Helper()
	var routes []any
	for i, h := range handlers {
		h["handler"] = "runtime"
		routes = append(routes, map[string]any{
			"match":  []any{map[string]any{"host": []string{fmt.Sprintf("site%d.test", i)}}},
			"handle": []any{h},
		})
	}
	cfg := map[string]any{
		"admin":   map[string]any{"disabled": true},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}},
		"storage": map[string]any{"module": "file_system", "root": filepath.Join(t.TempDir(), "caddy")},
		"apps": map[string]any{"http": map[string]any{"servers": map[string]any{"s": map[string]any{
			"listen":          []string{fmt.Sprintf("127.0.0.1:%d", port)},
			"automatic_https": map[string]any{"disable": true},
			"routes":          routes,
		}}}},
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

func keyOf(t *testing.T, h map[string]any) string {
	t.Helper()
	var v config.Values
	b, _ := json.Marshal(h)
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	s, err := config.Resolve(v, func(string) string { return "" })
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
	if err := json.Unmarshal(siteConfig(t, testkit.FreePort(t), dirsIn(root)), &cfg); err != nil {
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
// releases the state the first one acquired.
func TestFailedConfigReleasesState(t *testing.T) {
	root := t.TempDir()
	good := dirsIn(root)
	bad := with(dirsIn(root), "session_ttl", "99")
	var cfg caddy.Config
	if err := json.Unmarshal(siteConfig(t, testkit.FreePort(t), good, bad), &cfg); err != nil {
		t.Fatal(err)
	}
	err := caddy.Validate(&cfg)
	if err == nil || !strings.Contains(err.Error(), "session_ttl") {
		t.Fatalf("validate error = %v, want one naming session_ttl", err)
	}
	if held := heldStates(); len(held) != 0 {
		t.Fatalf("failed config left %d states held", len(held))
	}
}

// TestStateSurvivesReload runs real configs: a reload with the same state settings keeps the
// state (even with another API prefix); one with another state folder replaces it; stopping
// releases everything exactly once.
func TestStateSurvivesReload(t *testing.T) {
	port := testkit.FreePort(t)
	root := t.TempDir()
	a := dirsIn(root)
	if err := caddy.Load(siteConfig(t, port, a, with(a, "api_prefix", "/_")), true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })

	held := heldStates()
	first := held[keyOf(t, a)]
	if len(held) != 1 || first == nil {
		t.Fatalf("held states = %v, want one shared by both sites", held)
	}
	if refs, _ := states.References(keyOf(t, a)); refs != 2 {
		t.Fatalf("references = %d, want 2 (one per handler)", refs)
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
	if err := caddy.Load(siteConfig(t, port, with(a, "api_prefix", "/x")), true); err != nil {
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
	if err := caddy.Load(siteConfig(t, port, b), true); err != nil {
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

// TestSplitSurfaces runs the API and cpanel on one site and workers on another: both share one
// state (serve and workers_url are not part of its key), and each answers a surface it does not
// serve with a 404 saying where that surface is.
func TestSplitSurfaces(t *testing.T) {
	port := testkit.FreePort(t)
	root := t.TempDir()
	admin := with(with(dirsIn(root), "serve", []string{"api", "cpanel"}), "workers_url", "http://apps.test:8080")
	apps := with(dirsIn(root), "serve", []string{"workers"})
	if keyOf(t, admin) != keyOf(t, apps) {
		t.Fatal("serve or workers_url changes the state key")
	}
	if err := caddy.Load(siteConfig(t, port, admin, apps), true); err != nil {
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
		{"site0.test", "/", 404, "served at http://apps.test:8080"},
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

func TestCleanupReleasesOnce(t *testing.T) {
	key := "cleanup-test"
	s := newState(config.Settings{}, caddy.Log())
	for range 2 { // two handlers share the state
		if _, _, err := states.LoadOrNew(key, func() (caddy.Destructor, error) { return s, nil }); err != nil {
			t.Fatal(err)
		}
	}
	h := &Handler{stateKey: key}
	for range 3 {
		if err := h.Cleanup(); err != nil {
			t.Fatal(err)
		}
	}
	if refs, ok := states.References(key); refs != 1 || !ok {
		t.Fatalf("after one handler's repeated Cleanup: references = %d, want 1", refs)
	}
	if s.phase.Load() == phaseStopped {
		t.Fatal("state released while another handler holds it")
	}
	if err := (&Handler{stateKey: key}).Cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, ok := states.References(key); ok || s.phase.Load() != phaseStopped {
		t.Fatal("state not released by its last handler")
	}
	if err := new(Handler).Cleanup(); err != nil { // a handler whose Provision failed early
		t.Fatal(err)
	}
}

func TestReadyPhases(t *testing.T) {
	dir := t.TempDir()
	s := newState(config.Settings{StateDir: filepath.Join(dir, "s"), ScratchDir: filepath.Join(dir, "scratch")}, caddy.Log())
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
	s := newState(config.Settings{StateDir: filepath.Join(file, "state")}, caddy.Log())
	err := s.start()
	if err == nil || !strings.Contains(err.Error(), "state_dir") {
		t.Fatalf("start = %v, want an error naming state_dir", err)
	}
	if s.ready() == nil {
		t.Fatal("a state that failed to start reports ready")
	}
}
