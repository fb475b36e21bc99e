package serving

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/packages"
)

// TestServeByHost: a request on a worker's own host is that worker's, its whole path included,
// with the version an unpinned path gets; other hosts route by path as before.
func TestServeByHost(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, manifest, index string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(p, "manifest.yaml"), []byte(manifest), 0o644)
		os.WriteFile(filepath.Join(p, "index.html"), []byte(index), 0o644)
		os.MkdirAll(filepath.Join(p, "api"), 0o755)
		os.WriteFile(filepath.Join(p, "api", "x.txt"), []byte(index+" x"), 0o644)
	}
	write("app/1.0.0", "name: app\n", "app 1")
	write("app/2.0.0", "name: app\n", "app 2")
	write("app/3.0.0", "name: app\nenabled: false\n", "app 3")
	write("@team/tool/1.0.0", "name: '@team/tool'\n", "tool")
	write("off/1.0.0", "name: off\nenabled: false\n", "off")
	write("shop/1.0.0", "name: shop\n", "shop")
	c := packages.NewCatalog(packages.WorkerLayout, []string{dir}, packages.DefaultLimits)
	t.Cleanup(c.Close)
	var router hosts.Router
	router.SetDomain(hosts.Domain{Name: "apps.example.com", Scheme: "https"})
	router.SetCustom(map[string]string{"shop.example.org": "shop", "gone.example.org": "gone"}, map[string]string{"new.example.org": "app"})
	s := New(Options{Workers: c, Hosts: &router, Reserved: packages.ReservedNames("/api")})
	tests := []struct {
		host, path string
		status     int
		body       string
	}{
		{"app.apps.example.com", "/", 200, "app 2"},
		{"app.apps.example.com:8443", "/index.html", 200, "app 2"},
		{"APP.apps.example.com", "/api/x.txt", 200, "app 2 x"}, // the worker's own /api
		{"tool.team.apps.example.com", "/", 200, "tool"},
		{"shop.example.org", "/", 200, "shop"},
		{"off.apps.example.com", "/", 404, CodeWorkerNotFound},
		{"ghost.apps.example.com", "/", 404, CodeWorkerNotFound},
		{"app.apps.example.com", "/app@1.0.0/", 404, "NOT_FOUND"}, // no pins on a host
		{"api.apps.example.com", "/", 404, "NOT_FOUND"},           // reserved
		{"apps.example.com", "/app/", 200, "app 2"},               // the domain itself routes by path
		{"example.com", "/app@1.0.0/", 200, "app 1"},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", tt.path, nil)
		req.Host = tt.host
		status, body := rec.Code, ""
		if answer := s.Serve(rec, req); answer != nil {
			status, body = answer.Status, answer.Code
		} else {
			status, body = rec.Code, rec.Body.String()
		}
		if status != tt.status || body != tt.body {
			t.Errorf("GET %s%s = %d %q, want %d %q", tt.host, tt.path, status, body, tt.status, tt.body)
		}
	}

	for _, tt := range []struct{ host, why string }{
		{"app.apps.example.com", ""},
		{"tool.team.apps.example.com", ""},
		{"shop.example.org", ""},
		{"off.apps.example.com", "worker off has no enabled version"},
		{"ghost.apps.example.com", "no worker named ghost"},
		{"gone.example.org", "a custom domain of worker gone, which is not installed"},
		{"new.example.org", "a custom domain of worker app that is not verified yet"},
		{"a.b.c.apps.example.com", "not a worker's host"},
		{"apps.example.com", "not a worker's host"},
		{"example.net", "neither a worker's host nor a verified custom domain"},
	} {
		if why := HostServed(&router, c, tt.host); tt.why == "" && why != "" || !strings.Contains(why, tt.why) {
			t.Errorf("HostServed(%s) = %q, want %q", tt.host, why, tt.why)
		}
	}
}
