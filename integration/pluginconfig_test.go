package integration

import (
	"path/filepath"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

type pluginConfig struct {
	Name, Version, Path, Source, ManifestError string
	Enabled                                    bool
	Manifest                                   *struct {
		Base     string
		Routes   []map[string]any
		Handlers []string
	}
	Load struct {
		State, Version, Reason, Error string
		Position                      int
	}
}

// TestPluginConfig reads plugins' resolved manifests and load records: loaded with their
// place in the order, failed with the reason, disabled, uploaded and not yet reloaded; and
// the permission and namespace checks of the route.
func TestPluginConfig(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	plugin(t, s, "base", "version: 1.0.0\nbase: /base\n"+respond("base"), nil)
	plugin(t, s, "@team/top", "version: 2.0.0\nbase: /top\ndependencies: [base]\n"+
		"routes:\n  - handle:\n      - {handler: file_server, root: public}\n", nil)
	plugin(t, s, "@team/orphan", "version: 1.0.0\ndependencies: [missing]\n", nil)
	plugin(t, s, "off", "version: 1.0.0\nenabled: false\n", nil)
	reload(t, s)
	plugin(t, s, "late", "version: 1.0.0\n", nil) // on disk after the reload
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "editor", "namespaces": []string{"@team"}}).Secret
	viewer := s.CreateKey(rootKey, map[string]any{"name": "viewer", "role": "viewer"}).Secret

	config := func(name, key string) pluginConfig {
		t.Helper()
		var out pluginConfig
		if resp := s.Get(s.API+"/plugins/"+name+"/config", harness.WithKey(key)); resp.Status != 200 || resp.JSON(&out) != nil {
			t.Fatalf("GET plugins/%s/config = %s", name, resp)
		}
		return out
	}
	top := config("%40team%2Ftop", team)
	dir := filepath.Join(s.DataDir, "plugins", "@team", "top")
	if top.Name != "@team/top" || top.Version != "2.0.0" || !top.Enabled || top.Source != "uploaded" || top.Manifest == nil ||
		top.Manifest.Base != "/top" || len(top.Manifest.Routes) != 1 || top.Load.State != "loaded" || top.Load.Position != 2 || top.Load.Version != "2.0.0" {
		t.Fatalf("top = %+v", top)
	}
	handle := top.Manifest.Routes[0]["handle"].([]any)[0].(map[string]any)
	if handle["root"] != filepath.Join(dir, "public") {
		t.Errorf("the file root is not resolved into the plugin's folder: %v", handle)
	}
	for _, tt := range []struct {
		name, state, reason string
		position            int
	}{
		{"base", "loaded", "", 1},
		{"%40team%2Forphan", "failed", "unmet_dependency", 0},
		{"off", "not_loaded", "disabled", 0},
		{"late", "not_loaded", "not_reloaded", 0},
	} {
		got := config(tt.name, rootKey)
		if got.Load.State != tt.state || got.Load.Reason != tt.reason || got.Load.Position != tt.position ||
			(tt.state == "failed") != (got.Load.Error != "") && tt.reason != "not_reloaded" {
			t.Errorf("%s: load = %+v", tt.name, got.Load)
		}
	}
	for _, tt := range []struct {
		name, key string
		status    int
		code      string
	}{
		{"base", viewer, 403, "PERMISSION_DENIED"},
		{"base", team, 403, "NAMESPACE_DENIED"},
		{"nope", rootKey, 404, "PLUGIN_NOT_FOUND"},
		{"Bad%20Name", rootKey, 400, "INVALID_PACKAGE_NAME"},
	} {
		if resp := s.Get(s.API+"/plugins/"+tt.name+"/config", harness.WithKey(tt.key)); resp.Status != tt.status || resp.ErrorCode() != tt.code {
			t.Errorf("GET plugins/%s/config = %s, want %d %s", tt.name, resp, tt.status, tt.code)
		}
	}
}
