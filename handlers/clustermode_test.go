package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/cluster"
	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/internal/plugins"
	"github.com/caddy-runtime/runtime/internal/testkit"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// TestClusterMode drives the API of an instance in cluster mode, against a real libSQL
// primary and S3 server: an upload is published with its change number (a dry run writes
// nothing), a disable and a removal are rows applied here before the answer, a unit installed
// on this instance only is changed on disk without a change number, file manager writes to
// uploaded units are refused while reads work, and with the store stopped an upload answers
// 503 PACKAGE_STORE_UNAVAILABLE and records nothing.
func TestClusterMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary, s3 := testkit.StartSqld(t), testkit.StartS3(t)
	bucket := s3.Bucket(t, "runtime")
	store, err := packagestore.New(ctx, packagestore.Options{Endpoint: s3.Endpoint, Bucket: bucket, Region: s3.Region,
		AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for rel, content := range map[string]string{
		".apps/core/1.0.0/manifest.yaml": "name: core\nversion: 1.0.0\n",
		"apps/solo/1.0.0/manifest.yaml":  "name: solo\nversion: 1.0.0\n",
		"plugins/.keep":                  "",
	} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := keystore.OpenSync(ctx, filepath.Join(dir, "keys.db"), keystore.SyncOptions{URL: primary.URL, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	workers := packages.NewCatalog(packages.WorkerLayout, []string{filepath.Join(dir, ".apps"), filepath.Join(dir, "apps")}, packages.DefaultLimits)
	plugins := packages.NewCatalog(packages.PluginLayout, []string{filepath.Join(dir, "plugins")}, packages.DefaultLimits)
	for _, c := range []*packages.Catalog{workers, plugins} {
		c.SetRetireDelay(0)
		t.Cleanup(c.Close)
	}
	var reloads atomic.Int32
	cl, err := cluster.New(cluster.Options{Keys: keys, Store: store, Workers: workers, Plugins: plugins, ID: "a",
		Reload: func() { reloads.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	host := &localHost{}
	a, v := testAPI(t, Options{RootKey: fileTestRoot, Workers: workers, Plugins: plugins, Cluster: cl, PluginHost: host,
		Keys: func() (*keystore.Store, error) { return keys, nil }})
	do := func(req *http.Request) *http.Response {
		t.Helper()
		req.Header.Set(APIKeyHeader, fileTestRoot)
		return serve(t, a, v, req)
	}
	upload := func(target string, archive []byte) *http.Response {
		body, ct := multipartBody(t, [3]string{"file", "app.tgz", string(archive)})
		req := httptest.NewRequest("POST", target, body)
		req.Header.Set("Content-Type", ct)
		return do(req)
	}
	rows := func() []keystore.UnitVersion {
		t.Helper()
		rows, err := keys.Units.Versions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	enabled := func(name string) bool {
		t.Helper()
		u, err := workers.Lookup(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return u.Versions[0].Enabled
	}
	archive := testkit.TarGz(t, testkit.File{Name: "manifest.yaml", Body: "name: app\nversion: 1.0.0\n"},
		testkit.File{Name: "index.html", Body: "app"})

	if resp := upload("/api/workers/upload?dryRun=1", archive); resp.StatusCode != 200 || len(rows()) != 0 {
		t.Fatalf("dry run = %d, rows %+v", resp.StatusCode, rows())
	}
	resp := upload("/api/workers/upload", archive)
	var up api.WorkerUploaded
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&up) != nil || up.Data.Worker.Change == 0 {
		t.Fatalf("upload = %d %+v", resp.StatusCode, up)
	}
	if r := rows(); len(r) != 1 || r[0].Name != "app" || r[0].SHA256 != up.Data.Worker.SHA256 || r[0].Change != up.Data.Worker.Change {
		t.Fatalf("rows after the upload: %+v", r)
	}
	if !enabled("app") {
		t.Fatal("the upload is not installed here")
	}

	resp = do(httptest.NewRequest("POST", "/api/workers/_/app/1.0.0/disable", nil))
	var toggled api.WorkerToggled
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&toggled) != nil || toggled.Data.Change <= up.Data.Worker.Change {
		t.Fatalf("disable = %d %+v", resp.StatusCode, toggled)
	}
	if r := rows(); r[0].Enabled || r[0].Change != toggled.Data.Change || enabled("app") {
		t.Fatalf("after the disable: rows %+v, enabled here %v", r, enabled("app"))
	}

	toggled = api.WorkerToggled{}
	resp = do(httptest.NewRequest("POST", "/api/workers/_/solo/1.0.0/disable", nil))
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&toggled) != nil || toggled.Data.Change != 0 || enabled("solo") {
		t.Fatalf("disable of a unit of this instance only = %d %+v", resp.StatusCode, toggled)
	}

	for _, tt := range []struct {
		req    *http.Request
		status int
		code   string
	}{
		{jsonRequest("POST", "/api/workers/files/mkdir", api.FilePathRequest{Path: "apps/app/1.0.0/x"}), 409, CodeClusterReadOnly},
		{jsonRequest("DELETE", "/api/workers/files/delete", api.FilePathRequest{Path: "apps/app/1.0.0/index.html"}), 409, CodeClusterReadOnly},
		{jsonRequest("POST", "/api/workers/files/mkdir", api.FilePathRequest{Path: ".apps/core/1.0.0/x"}), 403, "READ_ONLY"},
		{httptest.NewRequest("GET", "/api/workers/files/download?path=apps/app/1.0.0/index.html", nil), 200, ""},
	} {
		resp := do(tt.req)
		if code := errorCode(t, resp); resp.StatusCode != tt.status || code != tt.code {
			t.Errorf("%s %s = %d %s, want %d %s", tt.req.Method, tt.req.URL, resp.StatusCode, code, tt.status, tt.code)
		}
	}

	if resp := do(httptest.NewRequest("DELETE", "/api/workers/_/app", nil)); resp.StatusCode != 200 {
		t.Fatalf("delete = %d", resp.StatusCode)
	}
	if r := rows(); r[0].Live() {
		t.Fatalf("after the delete: %+v", r)
	}
	if _, err := workers.Lookup("app"); err == nil {
		t.Fatal("the deleted worker is still here")
	}
	if resp := do(httptest.NewRequest("DELETE", "/api/workers/_/core", nil)); resp.StatusCode != 403 {
		t.Errorf("delete of a built-in worker = %d", resp.StatusCode)
	}

	resp = upload("/api/plugins/upload", testkit.TarGz(t, testkit.File{Name: "manifest.yaml", Body: "name: hello\nversion: 1.0.0\nbase: /hello\n"}))
	var plugin api.PluginUploaded
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&plugin) != nil || plugin.Data.Plugin.Change == 0 ||
		plugin.Data.ReloadRequired || reloads.Load() != 1 {
		t.Fatalf("plugin upload = %d %+v, reloads %d", resp.StatusCode, plugin, reloads.Load())
	}
	resp = do(httptest.NewRequest("POST", "/api/plugins/reload", nil))
	var reload api.PluginReload
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&reload) != nil || reloads.Load() != 2 || host.reloads != 0 {
		t.Fatalf("reload = %d %+v; cluster reloads %d, local-only reloads %d", resp.StatusCode, reload, reloads.Load(), host.reloads)
	}
	if n, err := keys.Units.ReloadRequested(ctx, keystore.UnitPlugin); err != nil || n <= plugin.Data.Plugin.Change || reload.Change != n {
		t.Fatalf("the reload request: %d, %v; the reload answered change %d", n, err, reload.Change)
	}

	s3.Stop()
	other := testkit.TarGz(t, testkit.File{Name: "manifest.yaml", Body: "name: other\nversion: 1.0.0\n"})
	resp = upload("/api/workers/upload", other)
	if code := errorCode(t, resp); resp.StatusCode != 503 || code != CodePackageStoreUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("upload with the store down = %d %s", resp.StatusCode, code)
	}
	if r := rows(); len(r) != 2 {
		t.Fatalf("rows after the refused upload: %+v", r)
	}
	if _, err := workers.Lookup("other"); err == nil {
		t.Fatal("the refused upload is installed")
	}
}

// localHost is a plugin table with nothing loaded that counts the reloads asked of this
// instance alone.
type localHost struct{ reloads int }

func (h *localHost) Loaded() ([]plugins.Plugin, []plugins.Failure) { return nil, nil }
func (h *localHost) Reload()                                       { h.reloads++ }
