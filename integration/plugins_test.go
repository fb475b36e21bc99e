package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

type loadedPlugin struct {
	Base                 string   `json:"base"`
	Dependencies         []string `json:"dependencies"`
	Menus                []struct{ Title, Icon, Path string }
	Name                 string   `json:"name"`
	OptionalDependencies []string `json:"optionalDependencies"`
	Version              string   `json:"version"`
}

type reloadBody struct {
	OK      bool
	Plugins []struct{ Name, Version string }
	Failed  []struct{ Name, Error string }
}

// plugin writes a plugin on disk: its manifest after the name line, and files.
func plugin(t *testing.T, s *harness.Server, name, manifest string, files map[string]string) {
	t.Helper()
	all := map[string]string{"manifest.yaml": fmt.Sprintf("name: '%s'\n%s", name, manifest)}
	for k, v := range files {
		all[k] = v
	}
	writeFiles(t, filepath.Join(s.DataDir, "plugins", filepath.FromSlash(name)), all)
}

// respond is a plugin route answering body at the plugin's root.
func respond(body string) string {
	return fmt.Sprintf("routes:\n  - match: [{path: [/]}]\n    handle:\n      - {handler: static_response, body: %q, status_code: 200}\n", body)
}

func reload(t *testing.T, s *harness.Server) reloadBody {
	t.Helper()
	var out reloadBody
	resp := s.Do("POST", s.API+"/plugins/reload", harness.WithKey(rootKey))
	if resp.Status != 200 || resp.JSON(&out) != nil || !out.OK {
		t.Fatalf("reload = %s", resp)
	}
	return out
}

func loaded(t *testing.T, s *harness.Server, key string) []loadedPlugin {
	t.Helper()
	var out []loadedPlugin
	if resp := s.Get(s.API+"/plugins/loaded", harness.WithKey(key)); resp.Status != 200 || resp.JSON(&out) != nil {
		t.Fatalf("loaded = %s", resp)
	}
	return out
}

func loadedNames(t *testing.T, s *harness.Server) string {
	var names []string
	for _, p := range loaded(t, s, rootKey) {
		names = append(names, p.Name)
	}
	return strings.Join(names, ",")
}

// TestPluginRoutesGoLive checks upload then reload, enable, disable and delete.
func TestPluginRoutesGoLive(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	archive := harness.TarGz(t, harness.File{Name: "manifest.yaml", Body: "name: hello\nversion: 0.1.0\nbase: /hello\n" +
		"menus:\n  - {title: Hello, icon: wave, path: /hello/}\n" + respond("hello from a plugin") +
		"  - match: [{path: [/files/*]}]\n    handle: [{handler: file_server}]\n"},
		harness.File{Name: "files/doc.txt", Body: "a plugin file"})
	resp := s.Upload(s.API+"/plugins/upload", "hello.tgz", archive, harness.WithKey(rootKey))
	if resp.Status != 200 || !strings.Contains(string(resp.Body), `"reloadRequired":true`) {
		t.Fatalf("upload = %s", resp)
	}
	// Installed, not loaded: nothing answers yet.
	if got := s.Get("/hello/"); got.Status != 404 {
		t.Fatalf("before reload = %s", got)
	}
	out := reload(t, s)
	if len(out.Plugins) != 1 || out.Plugins[0].Name != "hello" || out.Plugins[0].Version != "0.1.0" || len(out.Failed) != 0 {
		t.Fatalf("reload = %+v", out)
	}
	if got := s.Get("/hello/"); got.Status != 200 || body(got) != "hello from a plugin" || got.Header.Get("X-Request-Id") == "" {
		t.Fatalf("after reload = %s", got)
	}
	if got := s.Get("/hello/files/doc.txt"); got.Status != 200 || body(got) != "a plugin file" {
		t.Fatalf("file_server in the plugin's folder = %s", got)
	}
	// A file the plugin lacks: the status, and neither Caddy's source line nor a server path.
	if got := s.Get("/hello/files/missing.txt"); got.Status != 404 || got.ErrorCode() != "PLUGIN_ERROR" ||
		strings.Contains(body(got), ".go:") || strings.Contains(body(got), s.Dir) {
		t.Fatalf("a missing plugin file = %s", got)
	}
	l := loaded(t, s, rootKey)
	if len(l) != 1 || l[0].Base != "/hello" || len(l[0].Menus) != 1 || l[0].Menus[0].Title != "Hello" || l[0].Menus[0].Path != "/hello/" {
		t.Fatalf("loaded = %+v", l)
	}
	// Disable, enable and delete take effect at once.
	s.Do("POST", s.API+"/plugins/hello/disable", harness.WithKey(rootKey))
	if got := s.Get("/hello/"); got.Status != 404 || loadedNames(t, s) != "" {
		t.Fatalf("after disable = %s", got)
	}
	s.Do("POST", s.API+"/plugins/hello/enable", harness.WithKey(rootKey))
	if got := s.Get("/hello/"); body(got) != "hello from a plugin" {
		t.Fatalf("after enable = %s", got)
	}
	s.Do("DELETE", s.API+"/plugins/hello", harness.WithKey(rootKey))
	if got := s.Get("/hello/"); got.Status != 404 || loadedNames(t, s) != "" {
		t.Fatalf("after delete = %s", got)
	}
}

// TestPluginDependencies checks load order, missing and disabled dependencies, cycles and a
// plugin that fails to provision while the others load.
func TestPluginDependencies(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	plugin(t, s, "app", "dependencies: [auth]\noptionalDependencies: [metrics, absent]\n", nil)
	plugin(t, s, "auth", "dependencies: [store]\n", nil)
	plugin(t, s, "store", "", nil)
	plugin(t, s, "metrics", "", nil)
	plugin(t, s, "orphan", "dependencies: [ghost]\n", nil)
	plugin(t, s, "off", "enabled: false\n", nil)
	plugin(t, s, "needs-off", "dependencies: [off]\n", nil)
	plugin(t, s, "ping", "dependencies: [pong]\n", nil)
	plugin(t, s, "pong", "dependencies: [ping]\n", nil)
	// Allowed modules, but an invalid regular expression: it fails to provision.
	plugin(t, s, "broken", "base: /broken\nroutes:\n  - handle: [{handler: rewrite, path_regexp: [{find: '(', replace: x}]}]\n", nil)
	plugin(t, s, "needs-broken", "dependencies: [broken]\n", nil)
	plugin(t, s, "bad-yaml", "base: [not, a, base]\n", nil)
	plugin(t, s, "@team/ok", "base: /team-ok\n"+respond("team ok"), nil)

	out := reload(t, s)
	failed := map[string]string{}
	for _, f := range out.Failed {
		failed[f.Name] = f.Error
	}
	if got := loadedNames(t, s); got != "@team/ok,metrics,store,auth,app" {
		t.Fatalf("load order %s (failed %v)", got, failed)
	}
	for name, want := range map[string]string{
		"orphan": "requires ghost, which is missing", "needs-off": "requires off, which is disabled",
		"ping": "dependency cycle", "pong": "dependency cycle", "broken": "provisioning",
		"needs-broken": "requires broken", "bad-yaml": "invalid manifest",
	} {
		if !strings.Contains(failed[name], want) {
			t.Errorf("%s: %q, want %q", name, failed[name], want)
		}
	}
	if got := s.Get("/team-ok/"); body(got) != "team ok" {
		t.Errorf("the loaded plugins are not live: %s", got)
	}
	if s.LogCount("plugin not loaded", 7) < 7 {
		t.Error("failed plugins were not logged")
	}
	// A namespace-restricted key sees only its own plugins in both lists.
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "admin", "namespaces": []string{"@team"}})
	if l := loaded(t, s, team.Secret); len(l) != 1 || l[0].Name != "@team/ok" {
		t.Errorf("restricted loaded list = %+v", l)
	}
	var restricted reloadBody
	s.Do("POST", s.API+"/plugins/reload", harness.WithKey(team.Secret), harness.WithOrigin("")).JSON(&restricted)
	if len(restricted.Plugins) != 1 || len(restricted.Failed) != 0 {
		t.Errorf("restricted reload = %+v", restricted)
	}
}

// TestPluginHooks checks which requests go through onRequest hooks and how failures end.
func TestPluginHooks(t *testing.T) {
	t.Parallel()
	// The error handler, for a failing hook, is not among the default plugin handlers.
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey},
		App: "plugin_handlers file_server static_response headers rewrite vars encode error"})
	spa(t, s, "site", "1.0.0", "")
	key := s.CreateKey(rootKey, map[string]any{"name": "client", "role": "viewer"})
	plugin(t, s, "stamp", "onRequest:\n  - {handler: headers, response: {set: {X-Stamp: [\"1\"]}}}\n", nil)
	plugin(t, s, "order", "dependencies: [stamp]\nonRequest:\n  - {handler: headers, response: {add: {X-Order: [second]}}}\n", nil)
	plugin(t, s, "first", "onRequest:\n  - {handler: headers, response: {add: {X-Order: [first]}}}\n", nil)
	reload(t, s)

	for _, tt := range []struct {
		name  string
		opts  []harness.Option
		hooks bool
	}{
		{"no credential", nil, true},
		{"cookie session", []harness.Option{harness.WithCookie("runtime_api_key", key.Secret)}, true},
		{"invalid header key", []harness.Option{harness.WithKey("rtk_invalid")}, true},
		{"header key", []harness.Option{harness.WithKey(key.Secret)}, false},
		{"bearer key", []harness.Option{harness.WithBearer(key.Secret)}, false},
		{"root key", []harness.Option{harness.WithKey(rootKey)}, false},
	} {
		resp := s.Get("/site/", tt.opts...)
		if resp.Status != 200 || (resp.Header.Get("X-Stamp") == "1") != tt.hooks {
			t.Errorf("%s: status %d, X-Stamp %q, want hooks %v", tt.name, resp.Status, resp.Header.Get("X-Stamp"), tt.hooks)
		}
	}
	// Hooks run in load order: first, stamp, then order (after its dependency).
	if got := strings.Join(s.Get("/site/").Header.Values("X-Order"), ","); got != "first,second" {
		t.Errorf("hook order = %q", got)
	}
	// A hook that answers ends the request; one that fails answers 503 unless it fails open.
	plugin(t, s, "gate", "onRequest:\n  - {handler: static_response, status_code: 401, body: gated}\n", nil)
	reload(t, s)
	if resp := s.Get("/site/"); resp.Status != 401 || body(resp) != "gated" {
		t.Errorf("gate = %s", resp)
	}
	if resp := s.Get("/site/", harness.WithKey(key.Secret)); resp.Status != 200 {
		t.Errorf("gate with a header key = %s", resp)
	}
	os.RemoveAll(filepath.Join(s.DataDir, "plugins", "gate"))
	plugin(t, s, "flaky", "onRequest:\n  - {handler: error, status_code: 500, error: boom}\n", nil)
	reload(t, s)
	if resp := s.Get("/site/"); resp.Status != 503 || resp.ErrorCode() != "PLUGIN_ONREQUEST_FAILED" || resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("failing hook = %s", resp)
	}
	if _, err := s.WaitLog("onRequest hook failed", 5*time.Second); err != nil {
		t.Error(err)
	}
	plugin(t, s, "flaky", "onRequestFailOpen: true\nonRequest:\n  - {handler: error, status_code: 500, error: boom}\n", nil)
	reload(t, s)
	if resp := s.Get("/site/"); resp.Status != 200 || !strings.Contains(body(resp), "site 1.0.0") {
		t.Errorf("fail-open hook = %s", resp)
	}
	// The management API never goes through hooks.
	plugin(t, s, "gate", "onRequest:\n  - {handler: static_response, status_code: 401, body: gated}\n", nil)
	reload(t, s)
	if resp := s.Get(s.API + "/health"); resp.Status != 200 {
		t.Errorf("the API went through a hook: %s", resp)
	}
}

// TestPluginReloadUnderLoad reloads 50 times while 8 clients request a plugin route and a
// worker: no request fails and every plugin answer comes from the old or the new table.
func TestPluginReloadUnderLoad(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	spa(t, s, "site", "1.0.0", "")
	plugin(t, s, "gen", "base: /gen\n"+respond("generation 0"), nil)
	reload(t, s)
	var generation atomic.Int64
	load := harness.Hammer(t, 8, func(i, n int) error {
		path := "/gen/"
		if (i+n)%2 == 1 {
			path = "/site/"
		}
		before := generation.Load()
		resp, err := s.Send("GET", path)
		after := generation.Load()
		switch {
		case err != nil:
			return err
		case resp.Status != 200:
			return fmt.Errorf("%s: %s", path, resp)
		case path == "/gen/":
			var g int64
			if _, serr := fmt.Sscanf(body(resp), "generation %d", &g); serr != nil || g < before-1 || g > after {
				return fmt.Errorf("answer %q outside generations %d..%d", body(resp), before-1, after)
			}
		case !strings.Contains(body(resp), "site 1.0.0"):
			return fmt.Errorf("worker answered %s", resp)
		}
		return nil
	})
	for gen := int64(1); gen <= 50; gen++ {
		plugin(t, s, "gen", "base: /gen\n"+respond(fmt.Sprintf("generation %d", gen)), nil)
		generation.Store(gen)
		reload(t, s)
		sent := load.Sent()
		harness.Eventually(t, "requests after the reload", 10*time.Second, func() bool { return load.Sent() > sent+8 })
	}
	if err := load.Stop(200); err != nil {
		t.Fatalf("during 50 reloads: %v", err)
	}
	t.Logf("%d requests, 0 failed, across 50 plugin reloads", load.Sent())
}
