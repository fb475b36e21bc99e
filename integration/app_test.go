package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// appSettings are process-wide settings as the global runtime option holds them, in folders
// of their own under the server's working directory.
const appSettings = "state_dir ./state\n\t\troot_key {env.RUNTIME_ROOT_KEY}\n\t\tworker_dirs ./units/.apps ./units/apps\n\t\tkey_store local\n\t\tpool_size 16"

// splitHosts are an admin host serving the API under /_ and the cpanel, and a host serving
// workers, with lines for both.
func splitHosts(both string) []harness.Host {
	return []harness.Host{
		{Name: "localhost", Runtime: both + "\nserve api cpanel\napi_prefix /_"},
		{Name: "apps.localhost", Runtime: both + "\nserve workers"},
	}
}

// deprecationWarnings are the start-up warnings about process-wide settings in site blocks.
func deprecationWarnings(s *harness.Server) []string {
	var out []string
	for _, line := range strings.Split(s.Logs(), "\n") {
		if strings.Contains(line, "in a site block's runtime handler: deprecated") {
			out = append(out, line)
		}
	}
	return out
}

// checkOneState checks that the server runs one state, on ./state, with the folders of
// appSettings, and serves the API on the admin host and a worker on the apps host.
func checkOneState(t *testing.T, s *harness.Server) {
	t.Helper()
	if s.API != "/_/api" {
		t.Fatalf("discovery api = %q, want /_/api", s.API)
	}
	started := s.LogEntries("runtime state started")
	if len(started) != 1 || started[0]["state_dir"] != filepath.Join(s.Dir, "state") {
		t.Fatalf("runtime state started %d times (%v), want once on ./state", len(started), started)
	}
	if info, err := os.Stat(filepath.Join(s.Dir, "state")); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("state_dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, "state")); !os.IsNotExist(err) {
		t.Errorf("the default state folder was created (err %v)", err)
	}
	writeFiles(t, filepath.Join(s.Dir, "units", "apps", "hello", "1.0.0"), map[string]string{
		"manifest.yaml": "name: hello\nversion: 1.0.0\nentrypoint: index.html\n",
		"index.html":    "<!doctype html><title>hello</title><p>hello from the app's folders</p>",
	})
	s.CreateKey(rootKey, map[string]any{"name": "by the root key", "role": "viewer"})
	apps := s.Host("apps.localhost")
	if resp := apps.Get("/hello/"); resp.Status != 200 || !strings.Contains(body(resp), "hello from the app's folders") {
		t.Errorf("the worker on the apps host = %s", resp)
	}
	if resp := apps.Get("/api/health"); resp.Status != 404 || !strings.Contains(body(resp), "the API is not served on this host") {
		t.Errorf("the API on the apps host = %s", resp)
	}
}

// TestGlobalRuntimeOption runs the configuration the README recommends: the process-wide
// settings in the global runtime option, the surfaces in two site blocks, which share its one
// state.
func TestGlobalRuntimeOption(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: appSettings, Hosts: splitHosts("")})
	checkOneState(t, s)
	if w := deprecationWarnings(s); len(w) != 0 {
		t.Errorf("deprecation warnings without deprecated settings: %v", w)
	}
}

// TestDeprecatedSiteSettings runs the same settings written in both site blocks, the
// deprecated form: they share the one state and a warning names the settings and their new
// place; moving them to the global option by a reload keeps the state.
func TestDeprecatedSiteSettings(t *testing.T) {
	t.Parallel()
	cfg := harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Hosts: splitHosts(strings.ReplaceAll(appSettings, "\t\t", ""))}
	s := harness.Start(t, cfg)
	checkOneState(t, s)
	warnings := deprecationWarnings(s)
	if len(warnings) != 1 {
		t.Fatalf("%d deprecation warnings, want one for the config:\n%s", len(warnings), strings.Join(warnings, "\n"))
	}
	for _, want := range []string{`"level":"warn"`, "worker_dirs, state_dir, root_key, pool_size, key_store", "global runtime option"} {
		if !strings.Contains(warnings[0], want) {
			t.Errorf("the warning lacks %q: %s", want, warnings[0])
		}
	}

	cfg.App, cfg.Hosts = appSettings, splitHosts("")
	if err := s.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if resp := s.Get(s.API + "/health/ready"); resp.Status != 200 {
		t.Fatalf("ready after the reload = %s", resp)
	}
	if n := len(s.LogEntries("runtime state started")); n != 1 {
		t.Errorf("runtime state started %d times, want once: the reload kept it", n)
	}
	if n := len(s.LogEntries("runtime state released")); n != 0 {
		t.Errorf("the reload released the state")
	}
	if n := len(deprecationWarnings(s)); n != 1 {
		t.Errorf("%d deprecation warnings after moving the settings, want still 1", n)
	}
}
