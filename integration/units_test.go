package integration

import (
	"archive/tar"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

type workerRecord struct {
	DisabledVersions []string          `json:"disabledVersions"`
	Name             string            `json:"name"`
	Path             string            `json:"path"`
	Removable        bool              `json:"removable"`
	Source           string            `json:"source"`
	Versions         []string          `json:"versions"`
	Sizes            map[string]int64  `json:"sizes"`
	Kinds            map[string]string `json:"kinds"`
	Served           string            `json:"served"`
	ActiveVersion    string            `json:"activeVersion"`
	FailedVersions   []failedVersion   `json:"failedVersions"`
	State            string            `json:"state"`
}

type pluginRecord struct {
	Enabled   bool   `json:"enabled"`
	Name      string `json:"name"`
	Path      string `json:"path"`
	Removable bool   `json:"removable"`
	Source    string `json:"source"`
	Version   string `json:"version"`
}

type installed struct {
	Name, Version, InstalledAt, SHA256 string
	Files                              int
	Bytes                              int64
	Change                             int64 // cluster mode
}

func pkg(manifest string, files ...harness.File) []harness.File {
	return append([]harness.File{{Name: "manifest.yaml", Body: manifest}}, files...)
}

func workers(t *testing.T, s *harness.Server, key string) map[string]workerRecord {
	t.Helper()
	var list []workerRecord
	resp := s.Get(s.API+"/workers", harness.WithKey(key))
	if resp.Status != 200 || resp.JSON(&list) != nil {
		t.Fatalf("GET workers = %s", resp)
	}
	out := map[string]workerRecord{}
	for _, w := range list {
		out[w.Name] = w
	}
	return out
}

func plugins(t *testing.T, s *harness.Server, key string) map[string]pluginRecord {
	t.Helper()
	var list []pluginRecord
	resp := s.Get(s.API+"/plugins", harness.WithKey(key))
	if resp.Status != 200 || resp.JSON(&list) != nil {
		t.Fatalf("GET plugins = %s", resp)
	}
	out := map[string]pluginRecord{}
	for _, p := range list {
		out[p.Name] = p
	}
	return out
}

func uploadOK(t *testing.T, s *harness.Server, surface, filename string, data []byte, key string) installed {
	t.Helper()
	resp := s.Upload(s.API+"/"+surface+"/upload", filename, data, harness.WithKey(key))
	var body struct {
		Success bool
		Data    struct{ Worker, Plugin installed }
	}
	if resp.Status != 200 || resp.JSON(&body) != nil || !body.Success {
		t.Fatalf("upload %s = %s", filename, resp)
	}
	if surface == "plugins" {
		return body.Data.Plugin
	}
	return body.Data.Worker
}

func writeFiles(t *testing.T, base string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(base, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshot lists every path under dir with its size and mode, to prove what changed.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil { // removed while walking, as a retired folder is
			return nil
		}
		out[p] = fmt.Sprintf("%v %d", info.Mode(), info.Size())
		return nil
	})
	return out
}

// TestWorkerLifecycle walks the worker rows of the spec's state table.
func TestWorkerLifecycle(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	in := uploadOK(t, s, "workers", "app.tgz", harness.TarGz(t, pkg("# my app\nname: app\nversion: 1.0.0 # first\nentrypoint: index.html\n", harness.File{Name: "index.html", Body: "<p>v1"})...), rootKey)
	want := installed{Name: "app", Version: "1.0.0", InstalledAt: filepath.Join(s.DataDir, "apps", "app", "1.0.0"), Files: 2, Bytes: int64(len("# my app\nname: app\nversion: 1.0.0 # first\nentrypoint: index.html\n") + 5)}
	in.SHA256 = ""
	if in != want {
		t.Fatalf("installed = %+v, want %+v", in, want)
	}
	uploadOK(t, s, "workers", "app.zip", harness.Zip(t, harness.File{Name: "package/package.json", Body: `{"name":"app","version":"1.10.0"}`}), rootKey)
	uploadOK(t, s, "workers", "tool.tar.gz", harness.TarGz(t, pkg("name: '@team/tool'\n")...), rootKey)

	got := workers(t, s, rootKey)
	if w := got["app"]; !reflect.DeepEqual(w, workerRecord{DisabledVersions: []string{}, Name: "app", Path: filepath.Join(s.DataDir, "apps", "app"),
		Removable: true, Source: "uploaded", Versions: []string{"1.0.0", "1.10.0"},
		Sizes: map[string]int64{"1.0.0": want.Bytes, "1.10.0": int64(len(`{"name":"app","version":"1.10.0"}`))},
		Kinds: map[string]string{"1.0.0": "spa", "1.10.0": "static"}, Served: "1.10.0", ActiveVersion: "1.10.0", FailedVersions: []failedVersion{}, State: "serving"}) {
		t.Fatalf("app = %+v", w)
	}
	if w := got["@team/tool"]; w.Path != filepath.Join(s.DataDir, "apps", "@team", "tool") || !reflect.DeepEqual(w.Versions, []string{"latest"}) {
		t.Fatalf("@team/tool = %+v", w)
	}

	// Upsert: the same version again replaces the install.
	uploadOK(t, s, "workers", "app.tgz", harness.TarGz(t, pkg("# my app\nname: app\nversion: 1.0.0 # first\n", harness.File{Name: "index2.html", Body: "<p>v2"})...), rootKey)
	if _, err := os.Stat(filepath.Join(s.DataDir, "apps", "app", "1.0.0", "index.html")); !os.IsNotExist(err) {
		t.Fatal("the replaced install kept a file of the old one")
	}

	// Disable writes enabled: false and keeps the manifest's comments.
	resp := s.Do("POST", s.API+"/workers/_/app/1.0.0/disable", harness.WithKey(rootKey))
	if resp.Status != 200 || strings.TrimSpace(string(resp.Body)) != `{"success":true,"data":{"name":"app","version":"1.0.0","enabled":false}}` {
		t.Fatalf("disable = %s", resp)
	}
	manifest, _ := os.ReadFile(filepath.Join(s.DataDir, "apps", "app", "1.0.0", "manifest.yaml"))
	if string(manifest) != "# my app\nname: app\nversion: 1.0.0 # first\nenabled: false\n" {
		t.Fatalf("manifest after disable:\n%s", manifest)
	}
	// A package.json-only version gets a manifest.yaml.
	s.Do("POST", s.API+"/workers/_/app/1.10.0/disable", harness.WithKey(rootKey))
	if b, err := os.ReadFile(filepath.Join(s.DataDir, "apps", "app", "1.10.0", "manifest.yaml")); err != nil || !strings.Contains(string(b), "enabled: false") {
		t.Fatalf("manifest.yaml not created: %v %q", err, b)
	}
	if w := workers(t, s, rootKey)["app"]; !reflect.DeepEqual(w.DisabledVersions, []string{"1.0.0", "1.10.0"}) || len(w.Versions) != 2 {
		t.Fatalf("after disable: %+v", w)
	}
	resp = s.Do("POST", s.API+"/workers/_/app/1.0.0/enable", harness.WithKey(rootKey))
	if resp.Status != 200 || !strings.Contains(string(resp.Body), `"enabled":true`) {
		t.Fatalf("enable = %s", resp)
	}
	if w := workers(t, s, rootKey)["app"]; !reflect.DeepEqual(w.DisabledVersions, []string{"1.10.0"}) {
		t.Fatalf("after enable: %+v", w)
	}
	if resp := s.Do("POST", s.API+"/workers/@team/tool/latest/disable", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("disable scoped = %s", resp)
	}

	// Delete one version, then the whole worker.
	if resp := s.Do("DELETE", s.API+"/workers/_/app/1.0.0", harness.WithKey(rootKey)); resp.Status != 200 || strings.TrimSpace(string(resp.Body)) != `{"success":true}` {
		t.Fatalf("delete version = %s", resp)
	}
	if w := workers(t, s, rootKey)["app"]; !reflect.DeepEqual(w.Versions, []string{"1.10.0"}) {
		t.Fatalf("after version delete: %+v", w)
	}
	if resp := s.Do("DELETE", s.API+"/workers/@team/tool", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("delete worker = %s", resp)
	}
	if _, ok := workers(t, s, rootKey)["@team/tool"]; ok {
		t.Fatal("deleted worker still listed")
	}
	for path, want := range map[string]string{
		"/workers/_/app/1.0.0":       "404 WORKER_VERSION_NOT_FOUND",
		"/workers/_/nope":            "404 WORKER_NOT_FOUND",
		"/workers/@team/tool":        "404 WORKER_NOT_FOUND",
		"/workers/team/app":          "400 INVALID_PACKAGE_NAME",
		"/workers/_/App":             "400 INVALID_PACKAGE_NAME",
		"/workers/_/app/v1":          "400 INVALID_PACKAGE_VERSION",
		"/workers/_/app/..%2F..%2Fx": "404 NOT_FOUND", // dot segments never reach a route
	} {
		resp := s.Do("DELETE", s.API+path, harness.WithKey(rootKey))
		if got := fmt.Sprintf("%d %s", resp.Status, resp.ErrorCode()); got != want {
			t.Errorf("DELETE %s = %s, want %s", path, resp, want)
		}
	}
	if resp := s.Do("POST", s.API+"/workers/_/app/9.9.9/enable", harness.WithKey(rootKey)); resp.ErrorCode() != "WORKER_VERSION_NOT_FOUND" {
		t.Errorf("enable unknown version = %s", resp)
	}
}

// TestBuiltInUnits checks the built-in/uploaded rules for workers and plugins.
func TestBuiltInUnits(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	writeFiles(t, s.DataDir, map[string]string{
		".apps/core/1.0.0/manifest.yaml":      "name: core\nversion: 1.0.0\n",
		".apps/core/2.0.0/package.json":       `{"name":"core","version":"2.0.0"}`,
		".plugins/auth/manifest.yaml":         "name: auth\nversion: 0.1.0\n",
		".plugins/@sys/metrics/manifest.yaml": "name: '@sys/metrics'\n",
		"apps/mine/0.1.0/manifest.yaml":       "name: mine\nversion: 0.1.0\n",
		"plugins/ext/manifest.yaml":           "name: ext\nversion: 1.0.0\n",
	})
	w := workers(t, s, rootKey)
	if c := w["core"]; c.Source != "built-in" || c.Removable || !reflect.DeepEqual(c.Versions, []string{"1.0.0", "2.0.0"}) {
		t.Fatalf("core = %+v", c)
	}
	if m := w["mine"]; m.Source != "uploaded" || !m.Removable {
		t.Fatalf("mine = %+v", m)
	}
	p := plugins(t, s, rootKey)
	if a := p["auth"]; a.Source != "built-in" || a.Removable || a.Version != "0.1.0" || !a.Enabled {
		t.Fatalf("auth = %+v", a)
	}
	if m := p["@sys/metrics"]; m.Version != "latest" || m.Source != "built-in" {
		t.Fatalf("@sys/metrics = %+v", m)
	}
	if e := p["ext"]; e.Source != "uploaded" || !e.Removable {
		t.Fatalf("ext = %+v", e)
	}
	for _, tt := range []struct{ method, path, code string }{
		{"DELETE", "/workers/_/core", "BUILT_IN_WORKER_REMOVE_FORBIDDEN"},
		{"DELETE", "/workers/_/core/1.0.0", "BUILT_IN_WORKER_VERSION_REMOVE_FORBIDDEN"},
		{"DELETE", "/plugins/auth", "BUILT_IN_PLUGIN_REMOVE_FORBIDDEN"},
		{"DELETE", "/plugins/%40sys%2Fmetrics", "BUILT_IN_PLUGIN_REMOVE_FORBIDDEN"},
	} {
		resp := s.Do(tt.method, s.API+tt.path, harness.WithKey(rootKey))
		if resp.Status != 403 || resp.ErrorCode() != tt.code {
			t.Errorf("%s %s = %s, want 403 %s", tt.method, tt.path, resp, tt.code)
		}
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, ".apps", "core", "1.0.0")); err != nil {
		t.Fatal("a refused delete removed a built-in version")
	}
	// An upload cannot shadow a built-in unit.
	resp := s.Upload(s.API+"/workers/upload", "core.tgz", harness.TarGz(t, pkg("name: core\nversion: 3.0.0\n")...), harness.WithKey(rootKey))
	if resp.Status != 409 || resp.ErrorCode() != "WORKER_CONFLICT" {
		t.Fatalf("upload over a built-in worker = %s", resp)
	}
	resp = s.Upload(s.API+"/plugins/upload", "auth.tgz", harness.TarGz(t, pkg("name: auth\n")...), harness.WithKey(rootKey))
	if resp.Status != 409 || resp.ErrorCode() != "PLUGIN_CONFLICT" {
		t.Fatalf("upload over a built-in plugin = %s", resp)
	}
}

// TestPluginLifecycle walks the plugin rows of the spec's state table.
func TestPluginLifecycle(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	in := uploadOK(t, s, "plugins", "hello.tgz", harness.TarGz(t, pkg("# Hello plugin\nname: '@team/hello'\nversion: 0.2.0 # semver\nbase: /hello\n")...), rootKey)
	if in.Version != "0.2.0" || in.InstalledAt != filepath.Join(s.DataDir, "plugins", "@team", "hello") {
		t.Fatalf("plugin upload = %+v", in)
	}
	uploadOK(t, s, "plugins", "hello.tgz", harness.TarGz(t, pkg("# Hello plugin\nname: '@team/hello'\nversion: 0.3.0 # semver\nbase: /hello\n")...), rootKey)
	if p := plugins(t, s, rootKey)["@team/hello"]; p.Version != "0.3.0" || !p.Enabled || !p.Removable || p.Source != "uploaded" {
		t.Fatalf("after re-upload: %+v", p)
	}
	resp := s.Do("POST", s.API+"/plugins/%40team%2Fhello/disable", harness.WithKey(rootKey))
	if resp.Status != 200 || strings.TrimSpace(string(resp.Body)) != `{"success":true,"data":{"name":"@team/hello","enabled":false}}` {
		t.Fatalf("disable = %s", resp)
	}
	manifest, _ := os.ReadFile(filepath.Join(s.DataDir, "plugins", "@team", "hello", "manifest.yaml"))
	if string(manifest) != "# Hello plugin\nname: '@team/hello'\nversion: 0.3.0 # semver\nbase: /hello\nenabled: false\n" {
		t.Fatalf("manifest after disable:\n%s", manifest)
	}
	if p := plugins(t, s, rootKey)["@team/hello"]; p.Enabled {
		t.Fatal("still enabled")
	}
	resp = s.Do("POST", s.API+"/plugins/%40team%2Fhello/enable", harness.WithKey(rootKey))
	if resp.Status != 200 || !strings.Contains(string(resp.Body), `"enabled":true`) {
		t.Fatalf("enable = %s", resp)
	}
	uploadOK(t, s, "plugins", "json.zip", harness.Zip(t, harness.File{Name: "package.json", Body: `{"name":"jsonly","version":"1.0.0"}`}), rootKey)
	for path, want := range map[string]string{
		"/plugins/jsonly/disable": "404 PLUGIN_MANIFEST_NOT_FOUND",
		"/plugins/ghost/enable":   "404 PLUGIN_NOT_FOUND",
		"/plugins/Bad/enable":     "400 INVALID_PACKAGE_NAME",
	} {
		resp := s.Do("POST", s.API+path, harness.WithKey(rootKey))
		if got := fmt.Sprintf("%d %s", resp.Status, resp.ErrorCode()); got != want {
			t.Errorf("POST %s = %s, want %s", path, resp, want)
		}
	}
	if resp := s.Do("DELETE", s.API+"/plugins/%40team%2Fhello", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("delete = %s", resp)
	}
	if _, ok := plugins(t, s, rootKey)["@team/hello"]; ok {
		t.Fatal("deleted plugin still listed")
	}
	if resp := s.Do("DELETE", s.API+"/plugins/ghost", harness.WithKey(rootKey)); resp.ErrorCode() != "PLUGIN_NOT_FOUND" {
		t.Errorf("delete unknown plugin = %s", resp)
	}
}

// TestUploadErrors covers the upload error codes and limits.
func TestUploadErrors(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{
		"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_MAX_UPLOAD_SIZE": "64KiB",
		"RUNTIME_MAX_UNPACKED_SIZE": "256KiB", "RUNTIME_MAX_ARCHIVE_ENTRIES": "50",
	}})
	noise := strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 9000) // 324 KB; compresses to a few KB
	manyFiles := pkg("name: many\n")
	for i := range 60 {
		manyFiles = append(manyFiles, harness.File{Name: fmt.Sprintf("f%d", i), Body: "x"})
	}
	random := make([]byte, 100<<10)
	for i := range random {
		random[i] = byte(i*7919 + i/13)
	}
	tests := []struct {
		name, file string
		data       []byte
		status     int
		code, says string
	}{
		{"wrong type", "app.rar", harness.TarGz(t, pkg("name: a\n")...), 400, "INVALID_FILE_TYPE", ""},
		{"missing name", "a.tgz", harness.TarGz(t, pkg("version: 1.0.0\n")...), 400, "MISSING_PACKAGE_NAME", ""},
		{"no metadata", "a.tgz", harness.TarGz(t, harness.File{Name: "index.html", Body: "x"}), 400, "MISSING_PACKAGE_NAME", ""},
		{"invalid name", "a.tgz", harness.TarGz(t, pkg("name: My App\n")...), 400, "INVALID_PACKAGE_NAME", ""},
		{"reserved name", "a.tgz", harness.TarGz(t, pkg("name: api\n")...), 400, "INVALID_PACKAGE_NAME", "reserved"},
		{"reserved cpanel", "a.tgz", harness.TarGz(t, pkg("name: cpanel\n")...), 400, "INVALID_PACKAGE_NAME", "reserved"},
		{"invalid version", "a.tgz", harness.TarGz(t, pkg("name: a\nversion: '1'\n")...), 400, "INVALID_PACKAGE_VERSION", ""},
		{"corrupt", "a.tgz", []byte("\x1f\x8bnot really gzip"), 400, "INVALID_ARCHIVE", ""},
		{"bad manifest", "a.tgz", harness.TarGz(t, pkg("name: [\n")...), 400, "INVALID_MANIFEST", ""},
		{"upload too large", "a.zip", random, 413, "PAYLOAD_TOO_LARGE", "max_upload_size"},
		{"unpacks too large", "a.tgz", harness.TarGz(t, pkg("name: big\n", harness.File{Name: "noise", Body: noise})...), 413, "PAYLOAD_TOO_LARGE", "max_unpacked_size"},
		{"too many entries", "a.tgz", harness.TarGz(t, manyFiles...), 413, "PAYLOAD_TOO_LARGE", "max_archive_entries"},
	}
	apps := filepath.Join(s.DataDir, "apps")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A dry run gives the real upload's verdict; neither leaves anything behind.
			for _, path := range []string{"/workers/upload?dryRun=1", "/workers/upload"} {
				resp := s.Upload(s.API+path, tt.file, tt.data, harness.WithKey(rootKey))
				if resp.Status != tt.status || resp.ErrorCode() != tt.code || !strings.Contains(string(resp.Body), tt.says) {
					t.Fatalf("%s = %s, want %d %s mentioning %q", path, resp, tt.status, tt.code, tt.says)
				}
				if entries, _ := os.ReadDir(apps); len(entries) != 0 {
					t.Fatalf("%s refused, and apps holds %v", path, entries)
				}
			}
		})
	}
	// No file at all, or not multipart.
	for _, opt := range []harness.Option{
		harness.WithMultipart(map[string]string{"note": "no file"}),
		harness.WithMultipart(nil, harness.FormFile{Field: "archive", Filename: "a.tgz", Data: []byte("x")}),
		harness.WithJSON(map[string]string{"file": "a.tgz"}),
	} {
		resp := s.Do("POST", s.API+"/workers/upload", harness.WithKey(rootKey), harness.WithOrigin(""), opt)
		if resp.Status != 400 || resp.ErrorCode() != "NO_FILE_PROVIDED" {
			t.Errorf("upload without a file = %s", resp)
		}
	}
	if w := workers(t, s, rootKey); len(w) != 0 {
		t.Fatalf("refused uploads left workers: %v", w)
	}
	// A refused upload removes its temporary folder before answering.
	if entries, _ := os.ReadDir(apps); len(entries) != 0 {
		t.Fatalf("refused uploads left %v in apps", entries)
	}
}

func TestNoWorkerDirs(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{
		"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_WORKER_DIRS": "./data/.apps", "RUNTIME_PLUGIN_DIRS": "./data/.plugins",
	}})
	for surface, code := range map[string]string{"workers": "NO_WORKER_DIRS", "plugins": "NO_PLUGIN_DIRS"} {
		resp := s.Upload(s.API+"/"+surface+"/upload", "a.tgz", harness.TarGz(t, pkg("name: a\n")...), harness.WithKey(rootKey))
		if resp.Status != 400 || resp.ErrorCode() != code {
			t.Errorf("%s upload = %s, want 400 %s", surface, resp, code)
		}
	}
}

// TestTraversalTricks sends each trick and checks that nothing was written outside the
// install root.
func TestTraversalTricks(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	writeFiles(t, s.DataDir, map[string]string{"apps/victim/1.0.0/manifest.yaml": "name: victim\nversion: 1.0.0\n"})
	before := snapshot(t, s.Dir)
	tricks := []struct {
		name string
		file string
		data []byte
		code string
	}{
		{"dot-dot entry", "a.tgz", harness.TarGz(t, pkg("name: a\n", harness.File{Name: "../../../escape.txt", Body: "x"})...), "PATH_TRAVERSAL"},
		{"absolute entry", "a.tgz", harness.TarGz(t, pkg("name: a\n", harness.File{Name: "/tmp/escape.txt", Body: "x"})...), "PATH_TRAVERSAL"},
		{"zip dot-dot", "a.zip", harness.Zip(t, pkg("name: a\n", harness.File{Name: "../escape.txt", Body: "x"})...), "PATH_TRAVERSAL"},
		{"link out", "a.tgz", harness.TarGz(t, pkg("name: a\n", harness.File{Name: "l", Type: tar.TypeSymlink, Linkname: "../../../../etc"})...), "PATH_TRAVERSAL"},
		{"absolute link", "a.zip", harness.Zip(t, pkg("name: a\n", harness.File{Name: "l", Type: tar.TypeSymlink, Linkname: "/etc/passwd"})...), "PATH_TRAVERSAL"},
		{"write through link", "a.tgz", harness.TarGz(t, pkg("name: a\n",
			harness.File{Name: "d", Type: tar.TypeSymlink, Linkname: "."},
			harness.File{Name: "d/e", Type: tar.TypeSymlink, Linkname: "../../victim"},
			harness.File{Name: "d/e/1.0.0/evil.txt", Body: "x"})...), "PATH_TRAVERSAL"},
		{"hard link", "a.tgz", harness.TarGz(t, pkg("name: a\n", harness.File{Name: "h", Type: tar.TypeLink, Linkname: "/etc/passwd"})...), "PATH_TRAVERSAL"},
		{"device", "a.tgz", harness.TarGz(t, pkg("name: a\n", harness.File{Name: "null", Type: tar.TypeChar})...), "PATH_TRAVERSAL"},
		{"crafted version", "a.tgz", harness.TarGz(t, pkg("name: victim\nversion: ../other/1.0.0\n")...), "INVALID_PACKAGE_VERSION"},
		{"crafted version 2", "a.tgz", harness.TarGz(t, pkg("name: a\nversion: 1.0.0/../../../victim/1.0.0\n")...), "INVALID_PACKAGE_VERSION"},
		{"crafted name", "a.tgz", harness.TarGz(t, pkg("name: ../victim\n")...), "INVALID_PACKAGE_NAME"},
		{"crafted scope", "a.tgz", harness.TarGz(t, pkg("name: '@../../x'\n")...), "INVALID_PACKAGE_NAME"},
		{"package.json name", "a.zip", harness.Zip(t, harness.File{Name: "package.json", Body: `{"name":"../../etc","version":"1.0.0"}`}), "INVALID_PACKAGE_NAME"},
	}
	for _, tt := range tricks {
		t.Run(tt.name, func(t *testing.T) {
			resp := s.Upload(s.API+"/workers/upload", tt.file, tt.data, harness.WithKey(rootKey))
			if resp.Status != 400 || resp.ErrorCode() != tt.code {
				t.Fatalf("upload = %s, want 400 %s", resp, tt.code)
			}
		})
	}
	// Retired temporary folders go after the runtime's retire delay; then nothing but Caddy's
	// and the runtime's own state differs.
	harness.EventuallyNil(t, 10*time.Second, func() error {
		var changed []string
		for p, v := range snapshot(t, s.Dir) {
			if before[p] != v && !strings.HasPrefix(p, filepath.Join(s.Dir, "caddy")) && !strings.HasPrefix(p, filepath.Join(s.DataDir, "state")) {
				changed = append(changed, fmt.Sprintf("%s (%q → %q)", p, before[p], v))
			}
		}
		if len(changed) > 0 {
			return fmt.Errorf("changed outside the install root: %s", strings.Join(changed, ", "))
		}
		return nil
	})
}

// TestNamespaceRestrictedUnits runs a @team key against every worker and plugin route.
func TestNamespaceRestrictedUnits(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "admin", "namespaces": []string{"@team"}})
	writeFiles(t, s.DataDir, map[string]string{
		"apps/@team/app/1.0.0/manifest.yaml":  "name: '@team/app'\nversion: 1.0.0\n",
		"apps/@other/app/1.0.0/manifest.yaml": "name: '@other/app'\nversion: 1.0.0\n",
		"apps/plain/1.0.0/manifest.yaml":      "name: plain\nversion: 1.0.0\n",
		"plugins/@team/p/manifest.yaml":       "name: '@team/p'\n",
		"plugins/@other/p/manifest.yaml":      "name: '@other/p'\n",
		"plugins/plain/manifest.yaml":         "name: plain\n",
	})
	// Files put on disk by hand are picked up by the catalogs' watchers, shortly.
	harness.EventuallyNil(t, 10*time.Second, func() error {
		if n, m := len(workers(t, s, rootKey)), len(plugins(t, s, rootKey)); n != 3 || m != 3 {
			return fmt.Errorf("%d workers and %d plugins listed, want 3 and 3", n, m)
		}
		return nil
	})
	w := workers(t, s, team.Secret)
	if len(w) != 1 || w["@team/app"].Name == "" {
		t.Fatalf("restricted worker listing = %v", w)
	}
	p := plugins(t, s, team.Secret)
	if len(p) != 1 || p["@team/p"].Name == "" {
		t.Fatalf("restricted plugin listing = %v", p)
	}
	if len(workers(t, s, rootKey)) != 3 || len(plugins(t, s, rootKey)) != 3 {
		t.Fatal("unrestricted listings are incomplete")
	}
	denied := []struct{ method, path string }{
		{"POST", "/workers/@other/app/1.0.0/disable"}, {"POST", "/workers/_/plain/1.0.0/enable"},
		{"DELETE", "/workers/@other/app"}, {"DELETE", "/workers/_/plain/1.0.0"},
		{"POST", "/plugins/%40other%2Fp/disable"}, {"POST", "/plugins/plain/enable"},
		{"DELETE", "/plugins/%40other%2Fp"}, {"DELETE", "/plugins/plain"},
		{"DELETE", "/workers/@other/ghost"}, // existence is not revealed across namespaces
	}
	for _, d := range denied {
		resp := s.Do(d.method, s.API+d.path, harness.WithKey(team.Secret), harness.WithOrigin(""))
		if resp.Status != 403 || resp.ErrorCode() != "NAMESPACE_DENIED" {
			t.Errorf("%s %s as @team = %s", d.method, d.path, resp)
		}
	}
	for surface, name := range map[string]string{"workers": "'@other/x'", "plugins": "unscoped"} {
		resp := s.Upload(s.API+"/"+surface+"/upload", "a.tgz", harness.TarGz(t, pkg("name: "+name+"\n")...), harness.WithKey(team.Secret))
		if resp.Status != 403 || resp.ErrorCode() != "NAMESPACE_DENIED" {
			t.Errorf("%s upload of %s as @team = %s", surface, name, resp)
		}
	}
	// Inside its namespace everything works.
	uploadOK(t, s, "workers", "a.tgz", harness.TarGz(t, pkg("name: '@team/new'\nversion: 2.0.0\n")...), team.Secret)
	uploadOK(t, s, "plugins", "a.tgz", harness.TarGz(t, pkg("name: '@team/q'\n")...), team.Secret)
	for _, ok := range []struct{ method, path string }{
		{"POST", "/workers/@team/new/2.0.0/disable"}, {"DELETE", "/workers/@team/new/2.0.0"},
		{"POST", "/plugins/%40team%2Fq/disable"}, {"DELETE", "/plugins/%40team%2Fq"},
	} {
		if resp := s.Do(ok.method, s.API+ok.path, harness.WithKey(team.Secret), harness.WithOrigin("")); resp.Status != 200 {
			t.Errorf("%s %s as @team = %s", ok.method, ok.path, resp)
		}
	}
}

// TestUnitPermissions checks the permission each route needs.
func TestUnitPermissions(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	viewer := s.CreateKey(rootKey, map[string]any{"name": "v", "role": "viewer"})
	installer := s.CreateKey(rootKey, map[string]any{"name": "i", "role": "custom", "permissions": []string{"workers:install", "plugins:install"}})
	writeFiles(t, s.DataDir, map[string]string{"apps/app/1.0.0/manifest.yaml": "name: app\nversion: 1.0.0\n", "plugins/p/manifest.yaml": "name: p\n"})
	for _, tt := range []struct {
		key, method, path, perm string
	}{
		{installer.Secret, "GET", "/workers", "workers:read"},
		{installer.Secret, "GET", "/plugins", "plugins:read"},
		{viewer.Secret, "POST", "/workers/_/app/1.0.0/disable", "workers:install"},
		{viewer.Secret, "POST", "/plugins/p/disable", "plugins:install"},
		{installer.Secret, "DELETE", "/workers/_/app", "workers:remove"},
		{installer.Secret, "DELETE", "/plugins/p", "plugins:remove"},
	} {
		resp := s.Do(tt.method, s.API+tt.path, harness.WithKey(tt.key), harness.WithOrigin(""))
		if resp.Status != 403 || resp.ErrorCode() != "PERMISSION_DENIED" || !strings.Contains(string(resp.Body), tt.perm) {
			t.Errorf("%s %s = %s, want 403 naming %s", tt.method, tt.path, resp, tt.perm)
		}
	}
	resp := s.Upload(s.API+"/workers/upload", "a.tgz", harness.TarGz(t, pkg("name: a\n")...), harness.WithKey(viewer.Secret))
	if resp.ErrorCode() != "PERMISSION_DENIED" {
		t.Errorf("viewer upload = %s", resp)
	}
	if resp := s.Do("POST", s.API+"/workers/_/app/1.0.0/disable", harness.WithKey(installer.Secret), harness.WithOrigin("")); resp.Status != 200 {
		t.Errorf("installer disable = %s", resp)
	}
}

// TestConcurrentUploads sends 20 uploads of one name and version at once: each answers 200
// or a clean error, and the final tree is exactly one of the archives.
func TestConcurrentUploads(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	const n = 20
	trees := make([]map[string]string, n)
	archives := make([][]byte, n)
	for i := range n {
		files := pkg(fmt.Sprintf("name: race\nversion: 1.0.0\nbuild: %d\n", i))
		trees[i] = map[string]string{"manifest.yaml": files[0].Body}
		for j := 0; j <= i%7; j++ {
			name := fmt.Sprintf("dir%d/file%d.txt", j%2, j)
			body := fmt.Sprintf("%d/%d", i, j)
			files = append(files, harness.File{Name: name, Body: body})
			trees[i][name] = body
		}
		archives[i] = harness.TarGz(t, files...)
	}
	var wg sync.WaitGroup
	results := make([]*harness.Response, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.Send("POST", s.API+"/workers/upload", harness.WithKey(rootKey),
				harness.WithMultipart(nil, harness.FormFile{Field: "file", Filename: "race.tgz", Data: archives[i]}))
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("upload %d: %v", i, errs[i])
		}
		if results[i].Status != 200 && results[i].ErrorCode() == "" {
			t.Fatalf("upload %d = %s", i, results[i])
		}
	}
	final := map[string]string{}
	root := filepath.Join(s.DataDir, "apps", "race", "1.0.0")
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			b, _ := os.ReadFile(p)
			final[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	for _, tree := range trees {
		if reflect.DeepEqual(tree, final) {
			return
		}
	}
	t.Fatalf("the final tree matches none of the uploads: %v", sortedKeys(final))
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestSystemTarArchive uploads an archive made by the system's tar, with its ./ root entry.
func TestSystemTarArchive(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("no tar on this machine")
	}
	s := startWithRoot(t)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"manifest.yaml": "name: gnu\nversion: 1.0.0\n", "www/index.html": "<p>"})
	archive := filepath.Join(t.TempDir(), "gnu.tgz")
	if out, err := exec.Command("tar", "-czf", archive, "-C", src, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	data, _ := os.ReadFile(archive)
	in := uploadOK(t, s, "workers", "gnu.tgz", data, rootKey)
	if in.Files != 2 {
		t.Fatalf("installed %+v", in)
	}
	if b, err := os.ReadFile(filepath.Join(s.DataDir, "apps", "gnu", "1.0.0", "www", "index.html")); err != nil || string(b) != "<p>" {
		t.Fatalf("www/index.html: %v %q", err, b)
	}
}
