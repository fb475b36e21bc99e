package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
)

// pluginArchive is a plugin package holding only its manifest.
func pluginArchive(t *testing.T, manifest string) []byte {
	return harness.TarGz(t, harness.File{Name: "manifest.yaml", Body: manifest})
}

// refused checks that resp is the refusal status and code with a message naming why.
func refused(t *testing.T, what string, resp *harness.Response, status int, code, why string) {
	t.Helper()
	var env struct {
		Error struct{ Code, Message string }
	}
	if resp.Status != status || resp.JSON(&env) != nil || env.Error.Code != code || !strings.Contains(env.Error.Message, why) {
		t.Errorf("%s = %s, want %d %s naming %q", what, resp, status, code, why)
	}
}

// failedReasons reloads and returns why each plugin was left out.
func failedReasons(t *testing.T, s *harness.Server) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range reload(t, s).Failed {
		out[f.Name] = f.Error
	}
	return out
}

// TestPluginPlaceholdersRefused is the attack of a plain route plugin answering the root key
// or the key database through {env.*} and {file.*}: refused at upload and, placed on disk
// by hand, left out at reload.
func TestPluginPlaceholdersRefused(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	stateFile := filepath.Join(s.DataDir, "state", "api-keys.db")
	if _, err := os.Stat(stateFile); err != nil {
		t.Fatalf("no key database to steal: %v", err)
	}
	leaks := map[string]string{
		"env-leak":  "{env.RUNTIME_ROOT_KEY}",
		"file-leak": "{file." + stateFile + "}",
		"escaped":   `\{env.RUNTIME_ROOT_KEY}`,
		"host-leak": "{system.wd}",
	}
	for name, body := range leaks {
		manifest := "name: " + name + "\nversion: 1.0.0\nbase: /" + name + "\n" + respond(body)
		refused(t, name+" upload", s.Upload(s.API+"/plugins/upload", name+".tgz", pluginArchive(t, manifest), harness.WithKey(rootKey)),
			403, "PLUGIN_NOT_ALLOWED", "placeholder")
		plugin(t, s, name, "base: /"+name+"\n"+respond(body), nil)
	}
	failed := failedReasons(t, s)
	for name := range leaks {
		if !strings.Contains(failed[name], "placeholder") {
			t.Errorf("%s at reload: %q, want it left out for its placeholder", name, failed[name])
		}
		if resp := s.Get("/" + name + "/"); resp.Status == 200 || strings.Contains(body(resp), rootKey) {
			t.Errorf("GET /%s/ = %s", name, resp)
		}
	}
}

// TestPluginConfinementRefused checks the plugins that reach outside their box: a file root
// outside the plugin's folder, a handler off the allow-list, a base hiding a worker or another
// plugin; each refused at upload naming the cause and left out at reload.
func TestPluginConfinementRefused(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	spa(t, s, "site", "1.0.0", "")
	plugin(t, s, "owner", "base: /owned\n"+respond("owned"), nil)
	reload(t, s)
	for _, tt := range []struct {
		name, manifest string
		status         int
		code, why      string
	}{
		{"state-browser", "base: /files\nroutes:\n  - handle: [{handler: file_server, root: /, browse: {}}]\n", 403, "PLUGIN_NOT_ALLOWED", `root "/" is outside the plugin's folder`},
		{"up-browser", "base: /up\nroutes:\n  - handle: [{handler: file_server, root: ../../state}]\n", 403, "PLUGIN_NOT_ALLOWED", "leads outside the plugin's folder"},
		{"admin-proxy", "base: /admin\nroutes:\n  - handle: [{handler: reverse_proxy, upstreams: [{dial: 'localhost:2019'}]}]\n", 403, "PLUGIN_NOT_ALLOWED", `handler "reverse_proxy"`},
		{"cel", "base: /cel\nroutes:\n  - match: [{expression: 'true'}]\n    handle: [{handler: static_response}]\n", 403, "PLUGIN_NOT_ALLOWED", `matcher "expression"`},
		{"squatter", "base: /site\n" + respond("not the site"), 409, "PLUGIN_CONFLICT", "would hide worker site"},
		{"thief", "base: /owned\n" + respond("stolen"), 409, "PLUGIN_CONFLICT", "already served by plugin owner"},
		{"cpanel-base", "base: /cpanel\n" + respond("x"), 400, "INVALID_MANIFEST", "reserved"},
	} {
		manifest := "name: " + tt.name + "\nversion: 1.0.0\n" + tt.manifest
		refused(t, tt.name, s.Upload(s.API+"/plugins/upload", tt.name+".tgz", pluginArchive(t, manifest), harness.WithKey(rootKey)), tt.status, tt.code, tt.why)
		plugin(t, s, tt.name, tt.manifest, nil)
	}
	failed := failedReasons(t, s)
	for name, why := range map[string]string{"state-browser": "outside the plugin's folder", "admin-proxy": "reverse_proxy",
		"squatter": "would hide worker site", "thief": "already served by plugin owner"} {
		if !strings.Contains(failed[name], why) {
			t.Errorf("%s at reload: %q, want %q", name, failed[name], why)
		}
	}
	if resp := s.Get("/files" + filepath.ToSlash(filepath.Join(s.DataDir, "state")) + "/"); resp.Status == 200 {
		t.Errorf("the state folder is browsable: %s", resp)
	}
	if resp := s.Get("/site/"); !strings.Contains(body(resp), "site 1.0.0") {
		t.Errorf("the worker lost its path: %s", resp)
	}

	// A worker upload that the loaded plugin's base would hide is refused.
	refused(t, "worker under a plugin's base",
		s.Upload(s.API+"/workers/upload", "owned.tgz", harness.TarGz(t, pkg("name: owned\nversion: 1.0.0\n")...), harness.WithKey(rootKey)),
		409, "WORKER_CONFLICT", "plugin owner")
}

// TestNamespacedPlugins is the attack of an editor key restricted to @team: its plugin with
// hooks, or with a base outside its scope's name, is refused; its plain route plugin under
// /team-… is accepted and served; and it cannot enable a plugin with hooks either.
func TestNamespacedPlugins(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "editor", "namespaces": []string{"@team"}})
	upload := func(key, manifest string) *harness.Response {
		return s.Upload(s.API+"/plugins/upload", "p.tgz", pluginArchive(t, manifest), harness.WithKey(key))
	}
	hooks := "name: '@team/spy'\nversion: 1.0.0\nonRequest:\n  - {handler: headers, response: {set: {X-Seen: ['{http.request.header.Cookie}']}}}\n"
	refused(t, "hooks", upload(team.Secret, hooks), 403, "NAMESPACE_DENIED", "onRequest hooks")
	refused(t, "base outside the scope", upload(team.Secret, "name: '@team/pub'\nversion: 1.0.0\nbase: /pub\n"+respond("squat")), 403, "NAMESPACE_DENIED", "outside namespace @team")
	refused(t, "another namespace", upload(team.Secret, "name: '@other/x'\nversion: 1.0.0\n"), 403, "NAMESPACE_DENIED", "@other/x")
	if resp := upload(team.Secret, "name: '@team/x'\nversion: 1.0.0\nbase: /team-x\n"+respond("team x")); resp.Status != 200 {
		t.Fatalf("plain route plugin = %s", resp)
	}
	var out reloadBody
	if resp := s.Do("POST", s.API+"/plugins/reload", harness.WithKey(team.Secret), harness.WithOrigin("")); resp.Status != 200 || resp.JSON(&out) != nil || len(out.Failed) != 0 {
		t.Fatalf("reload by the team = %s", resp)
	}
	if resp := s.Get("/team-x/"); resp.Status != 200 || body(resp) != "team x" {
		t.Errorf("the team's plugin is not served: %s", resp)
	}

	// The root key may install the hooks; the team key may neither enable them nor upload them
	// again, and disabling stays its right within its namespace.
	if resp := upload(rootKey, strings.Replace(hooks, "version: 1.0.0", "version: 1.0.0\nenabled: false", 1)); resp.Status != 200 {
		t.Fatalf("root's upload of hooks = %s", resp)
	}
	refused(t, "enable by the team", s.Do("POST", s.API+"/plugins/"+harness.PathEscape("@team/spy")+"/enable", harness.WithKey(team.Secret), harness.WithOrigin("")),
		403, "NAMESPACE_DENIED", "onRequest hooks")
	if resp := s.Do("POST", s.API+"/plugins/"+harness.PathEscape("@team/spy")+"/enable", harness.WithKey(rootKey), harness.WithOrigin("")); resp.Status != 200 {
		t.Errorf("enable by root = %s", resp)
	}
	// The hook sees the visitors' cookies, but not the runtime's session.
	if resp := s.Get("/team-x/", harness.WithHeader("Cookie", "theme=dark; runtime_api_key=visitor")); resp.Header.Get("X-Seen") != "theme=dark" {
		t.Errorf("root's hook saw Cookie %q: %s", resp.Header.Get("X-Seen"), resp)
	}
}

// TestManifestEditsThroughFiles is the attack of the file manager used to get around
// admission: a team editor adding command to its worker where process_workers does not allow
// @team, or onRequest to its plugin, is refused as an upload would be; the root key may add
// the hooks, and command where the namespace allows process workers.
func TestManifestEditsThroughFiles(t *testing.T) {
	t.Parallel()
	s := startFiles(t, map[string]string{"RUNTIME_PROCESS_WORKERS": "@ops"})
	writeFiles(t, s.DataDir, map[string]string{"apps/@ops/svc/1.0.0/manifest.yaml": "name: '@ops/svc'\nversion: 1.0.0\n"})
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "editor", "namespaces": []string{"@team"}})
	edit := func(surface, key, dir, manifest string) *harness.Response {
		return s.call("POST", surface, "upload", key, uploadForm(t, dir, [3]string{"manifest.yaml", "", manifest}))
	}
	const web, p = "apps/@team/web/1.0.0", "plugins/@team/p"
	process := "name: '@team/web'\nversion: 1.0.0\ncommand: [sh, -c, 'cat /proc/1/environ']\n"
	hooks := "name: '@team/p'\nversion: 1.0.0\nonRequest:\n  - {handler: headers, response: {set: {X-Spy: ['1']}}}\n"
	before := s.tree("data")

	refused(t, "command by the team", edit("workers", team.Secret, web, process), 403, "PROCESS_WORKERS_DISABLED", "process_workers")
	refused(t, "command by root in @team", edit("workers", rootKey, web, process), 403, "PROCESS_WORKERS_DISABLED", "process_workers")
	refused(t, "hooks by the team", edit("plugins", team.Secret, p, hooks), 403, "NAMESPACE_DENIED", "onRequest hooks")
	// The same edit by other ways: a zip holding the manifest, or a draft renamed onto it.
	refused(t, "zip by the team", s.call("POST", "plugins", "upload", team.Secret,
		uploadForm(t, p, [3]string{"p.zip", "", string(harness.Zip(t, harness.File{Name: "manifest.yaml", Body: hooks}))})),
		403, "NAMESPACE_DENIED", "onRequest hooks")
	writeFiles(t, s.DataDir, map[string]string{p + "/draft.yaml": hooks})
	if resp := s.call("DELETE", "plugins", "delete", team.Secret, harness.WithJSON(map[string]string{"path": p + "/manifest.yaml"})); resp.Status != 200 {
		t.Fatalf("delete = %s", resp)
	}
	refused(t, "rename by the team", s.call("POST", "plugins", "rename", team.Secret, harness.WithJSON(map[string]string{"path": p + "/draft.yaml", "newName": "manifest.yaml"})),
		403, "NAMESPACE_DENIED", "onRequest hooks")
	if s.read(web+"/manifest.yaml") != "name: '@team/web'\nversion: 1.0.0\n" || s.exists(p+"/manifest.yaml") {
		t.Fatalf("a refused edit changed a manifest: %q, %q", s.read(web+"/manifest.yaml"), s.read(p+"/manifest.yaml"))
	}
	os.Remove(filepath.Join(s.DataDir, p, "draft.yaml"))
	writeFiles(t, s.DataDir, map[string]string{p + "/manifest.yaml": "name: '@team/p'\nversion: 1.0.0\n"})
	if after := s.tree("data"); !reflect.DeepEqual(before, after) {
		t.Errorf("refused edits changed files")
	}

	if resp := edit("plugins", rootKey, p, hooks); resp.Status != 200 {
		t.Errorf("hooks by root = %s", resp)
	}
	if resp := edit("workers", rootKey, "apps/@ops/svc/1.0.0", "name: '@ops/svc'\nversion: 1.0.0\ncommand: [./svc]\n"); resp.Status != 200 {
		t.Errorf("command by root in @ops = %s", resp)
	}
	// Uploading and enabling a process worker follow the same setting.
	refused(t, "process worker upload", s.Upload(s.API+"/workers/upload", "w.tgz", harness.TarGz(t, pkg(strings.Replace(process, "web", "new", 1))...), harness.WithKey(rootKey)),
		403, "PROCESS_WORKERS_DISABLED", "process_workers")
	writeFiles(t, s.DataDir, map[string]string{"apps/@team/off/1.0.0/manifest.yaml": "name: '@team/off'\nversion: 1.0.0\nenabled: false\ncommand: [./run]\n"})
	refused(t, "process worker enable", s.Do("POST", s.API+"/workers/@team/off/1.0.0/enable", harness.WithKey(rootKey), harness.WithOrigin("")), 403, "PROCESS_WORKERS_DISABLED", "process_workers")
}

// TestReservedWorkerNames is the attack of a worker named api under api_prefix /_, where
// clients that assume the default path send their keys: api and cpanel are refused whatever
// the prefix, for workers and plugins.
func TestReservedWorkerNames(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Runtime: "api_prefix /_", Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	for _, name := range []string{"api", "cpanel"} {
		for _, surface := range []string{"workers", "plugins"} {
			refused(t, surface+" "+name, s.Upload(s.API+"/"+surface+"/upload", name+".tgz", harness.TarGz(t, pkg("name: "+name+"\nversion: 1.0.0\n")...), harness.WithKey(rootKey)),
				400, "INVALID_PACKAGE_NAME", "reserved")
		}
	}
	refused(t, "plugin base /api", s.Upload(s.API+"/plugins/upload", "p.tgz", pluginArchive(t, "name: p\nversion: 1.0.0\nbase: /api\n"+respond("keys?")), harness.WithKey(rootKey)),
		400, "INVALID_MANIFEST", "reserved")
	// One put on disk by hand is not served either.
	spa(t, s, "api", "1.0.0", "")
	if resp := s.Get("/api/keys"); resp.Status != 404 || strings.Contains(body(resp), "api 1.0.0") {
		t.Errorf("/api/keys under /_ = %s", resp)
	}
}

// TestPluginMenusStayUnderBase is the attack of a namespaced plugin putting a link to another
// site (or another tenant's path) in every admin's cpanel navigation: a menu path must lie
// under the plugin's own base, written /<base>/… or relative to it. Anything else is refused
// at upload, through the file manager and at reload, naming the entry; a relative path is
// served as a path under the base.
func TestPluginMenusStayUnderBase(t *testing.T) {
	t.Parallel()
	s := startFiles(t, nil)
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "editor", "namespaces": []string{"@team"}})
	manifest := func(name, base string, paths ...string) string {
		m := "name: '" + name + "'\nversion: 1.0.0\nbase: " + base + "\nmenus:\n"
		for _, p := range paths {
			m += fmt.Sprintf("  - {title: Link, path: %q}\n", p)
		}
		return m + respond("menu")
	}
	bad := []string{
		"https://evil.example/x", "HTTPS://evil.example/", "//evil.example/x", "///evil.example",
		`/\evil.example/`, `\\evil.example`, "javascript:alert(1)", "data:text/html,hi", "mailto:x@evil.example",
		" https://evil.example", "/team-m/\tx", "/other/", "/team-m-other/", "/", "..", "/team-m/../api/",
		"/team-m/%2e%2e/api/", "/team-m/%2F..%2F..%2Fapi", "x/../../api", "./x", "https:/evil.example",
	}
	for i, p := range bad {
		// The bad entry comes second, after a good one, so the message must name the right one.
		resp := s.Upload(s.API+"/plugins/upload", "m.tgz", pluginArchive(t, manifest("@team/m", "/team-m", "/team-m/", p)), harness.WithKey(team.Secret))
		refused(t, fmt.Sprintf("upload with menu path %q", p), resp, 400, "INVALID_MANIFEST", fmt.Sprintf("menus[1] path %q", p))
		name := fmt.Sprintf("hand%d", i)
		plugin(t, s.Server, name, strings.SplitN(manifest(name, "/"+name, p), "\n", 2)[1], nil)
	}
	failed := failedReasons(t, s.Server)
	for i, p := range bad {
		if name := fmt.Sprintf("hand%d", i); !strings.Contains(failed[name], fmt.Sprintf("menus[0] path %q", p)) {
			t.Errorf("%s (menu path %q) at reload: %q, want it left out naming the entry", name, p, failed[name])
		}
	}
	for _, l := range loaded(t, s.Server, rootKey) {
		if strings.HasPrefix(l.Name, "hand") {
			t.Errorf("plugin %s with a bad menu was loaded: %+v", l.Name, l.Menus)
		}
	}
	refused(t, "a menu through the file manager", s.call("POST", "plugins", "upload", team.Secret,
		uploadForm(t, "plugins/@team/p", [3]string{"manifest.yaml", "", manifest("@team/p", "/team-p", "https://evil.example/")})),
		400, "INVALID_MANIFEST", `menus[0] path "https://evil.example/"`)
	refused(t, "a relative menu without a base", s.Upload(s.API+"/plugins/upload", "m.tgz",
		pluginArchive(t, "name: '@team/nb'\nversion: 1.0.0\nmenus:\n  - {title: Link, path: team-nb/}\n"), harness.WithKey(team.Secret)),
		400, "INVALID_MANIFEST", `menus[0] path "team-nb/" is relative`)

	good := manifest("@team/m", "/team-m", "/team-m", "/team-m/", "/team-m/page?tab=1#top", "docs/", "docs/a%20b")
	if resp := s.Upload(s.API+"/plugins/upload", "m.tgz", pluginArchive(t, good), harness.WithKey(team.Secret)); resp.Status != 200 {
		t.Fatalf("menus under the base = %s", resp)
	}
	for name := range failedReasons(t, s.Server) {
		os.RemoveAll(filepath.Join(s.DataDir, "plugins", name))
	}
	reload(t, s.Server)
	var paths []string
	for _, l := range loaded(t, s.Server, rootKey) {
		for _, m := range l.Menus {
			paths = append(paths, l.Name+" "+m.Path)
		}
	}
	if want := []string{"@team/m /team-m", "@team/m /team-m/", "@team/m /team-m/page?tab=1#top", "@team/m /team-m/docs/", "@team/m /team-m/docs/a%20b"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("menu paths = %q, want %q", paths, want)
	}
}

// TestPluginMenuWithoutBase is point 11 of issue 35: the spec's upload contract installs any
// valid plugin, and a menu entry is {title, icon, path}, but a plugin with a menu and no base
// was refused. A path of the workers' site written from its root (which the cpanel renders
// after the workers' origin, a same-origin link) installs and is listed with its menu; the
// dangerous shapes stay refused, naming the entry.
func TestPluginMenuWithoutBase(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	manifest := func(name string, paths ...string) []byte {
		m := "name: '" + name + "'\nversion: 1.0.0\nmenus:\n"
		for _, p := range paths {
			m += fmt.Sprintf("  - {title: Shop admin, icon: cart, path: %q}\n", p)
		}
		return pluginArchive(t, m)
	}
	for _, p := range []string{"https://evil.example/", "//evil.example/", "javascript:alert(1)", `/\evil.example`, "/docs/\tx", "/docs/../api", "docs/"} {
		refused(t, fmt.Sprintf("menu path %q without a base", p), s.Upload(s.API+"/plugins/upload", "m.tgz", manifest("bad", "/ok/", p), harness.WithKey(rootKey)),
			400, "INVALID_MANIFEST", fmt.Sprintf("menus[1] path %q", p))
	}
	resp := s.Upload(s.API+"/plugins/upload", "m.tgz", manifest("links", "/shop/admin/", "/?from=panel"), harness.WithKey(rootKey))
	if resp.Status != 200 {
		t.Fatalf("upload of a plugin with same-origin menus and no base = %s", resp)
	}
	if p, ok := plugins(t, s, rootKey)["links"]; !ok || !p.Enabled || p.Version != "1.0.0" {
		t.Errorf("GET plugins: links = %+v, %v", p, ok)
	}
	reload(t, s)
	var menus []string
	for _, l := range loaded(t, s, rootKey) {
		for _, m := range l.Menus {
			menus = append(menus, l.Name+" "+m.Title+" "+m.Icon+" "+m.Path)
		}
	}
	if want := []string{"links Shop admin cart /shop/admin/", "links Shop admin cart /?from=panel"}; !reflect.DeepEqual(menus, want) {
		t.Errorf("GET plugins/loaded menus = %q, want %q", menus, want)
	}
	var config api.PluginConfig
	if resp := s.Get(s.API+"/plugins/links/config", harness.WithKey(rootKey)); resp.Status != 200 || resp.JSON(&config) != nil ||
		config.Manifest == nil || len(config.Manifest.Menus) != 2 || config.Manifest.Menus[0].Path != "/shop/admin/" {
		t.Errorf("GET plugins/links/config = %s", resp)
	}
}
