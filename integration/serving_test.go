package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// spa writes a static single-page worker version on disk.
func spa(t *testing.T, s *harness.Server, name, version, extra string) string {
	t.Helper()
	dir := filepath.Join(s.DataDir, "apps", filepath.FromSlash(name), version)
	writeFiles(t, dir, map[string]string{
		"manifest.yaml":   fmt.Sprintf("name: '%s'\nversion: %s\nentrypoint: index.html\n%s", name, version, extra),
		"index.html":      fmt.Sprintf("<!doctype html><html><head><title>%s</title></head><body>%s %s</body></html>", name, name, version),
		"assets/app.js":   "console.log('" + version + "')",
		"assets/site.css": "body{}",
	})
	return dir
}

func body(resp *harness.Response) string { return string(resp.Body) }

// TestServingRules covers the spec's serving rules for static workers.
func TestServingRules(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	spa(t, s, "app", "1.0.0", "")
	spa(t, s, "app", "1.1.0", "")
	spa(t, s, "@team/app", "2.0.0", "")

	// 308 to the trailing slash, query kept.
	resp := s.Get("/app?x=1&y=2")
	if resp.Status != 308 || resp.Header.Get("Location") != "/app/?x=1&y=2" {
		t.Fatalf("GET /app = %d %q", resp.Status, resp.Header.Get("Location"))
	}
	if resp := s.Do("HEAD", "/@team/app"); resp.Status != 308 || resp.Header.Get("Location") != "/@team/app/" {
		t.Fatalf("HEAD /@team/app = %d %q", resp.Status, resp.Header.Get("Location"))
	}
	// The highest enabled version; scoped names keep the @.
	if resp := s.Get("/app/"); resp.Status != 200 || !strings.Contains(body(resp), "app 1.1.0") {
		t.Fatalf("GET /app/ = %s", resp)
	}
	if resp := s.Get("/@team/app/"); resp.Status != 200 || !strings.Contains(body(resp), "@team/app 2.0.0") {
		t.Fatalf("GET /@team/app/ = %s", resp)
	}
	if resp := s.Get("/app/assets/app.js"); resp.Status != 200 || body(resp) != "console.log('1.1.0')" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("asset = %s %q", resp, resp.Header.Get("Content-Type"))
	}
	// Disabling the newest rolls back to the previous one at once; re-enabling restores it.
	s.Do("POST", s.API+"/workers/_/app/1.1.0/disable", harness.WithKey(rootKey))
	if resp := s.Get("/app/"); !strings.Contains(body(resp), "app 1.0.0") {
		t.Fatalf("after disabling 1.1.0: %s", resp)
	}
	if resp := s.Get("/app@1.1.0/"); resp.Status != 404 || resp.ErrorCode() != "WORKER_VERSION_NOT_FOUND" {
		t.Fatalf("pinned disabled version = %s", resp)
	}
	s.Do("POST", s.API+"/workers/_/app/1.0.0/disable", harness.WithKey(rootKey))
	if resp := s.Get("/app/"); resp.Status != 404 || resp.ErrorCode() != "WORKER_NOT_FOUND" {
		t.Fatalf("all versions disabled = %s", resp)
	}
	s.Do("POST", s.API+"/workers/_/app/1.1.0/enable", harness.WithKey(rootKey))
	if resp := s.Get("/app/"); !strings.Contains(body(resp), "app 1.1.0") {
		t.Fatalf("after enabling 1.1.0: %s", resp)
	}
	// Pinning: exact versions and semver ranges.
	s.Do("POST", s.API+"/workers/_/app/1.0.0/enable", harness.WithKey(rootKey))
	for path, want := range map[string]string{
		"/app@1.0.0/":                "app 1.0.0",
		"/app@~1.0/":                 "app 1.0.0",
		"/app@%5E1.0.0/":             "app 1.1.0",
		"/app@%3E=1.0.0%20%3C1.1.0/": "app 1.0.0",
		"/@team/app@2/":              "@team/app 2.0.0",
	} {
		if resp := s.Get(path); resp.Status != 200 || !strings.Contains(body(resp), want) {
			t.Errorf("GET %s = %s, want %q", path, resp, want)
		}
	}
	if resp := s.Get("/app@1.0.0"); resp.Status != 308 || resp.Header.Get("Location") != "/app@1.0.0/" {
		t.Errorf("pinned 308 = %d %q", resp.Status, resp.Header.Get("Location"))
	}
	if resp := s.Get("/app@3/"); resp.ErrorCode() != "WORKER_VERSION_NOT_FOUND" {
		t.Errorf("unmatched range = %s", resp)
	}
	// Upload and delete take effect on the next request.
	uploadOK(t, s, "workers", "new.tgz", harness.TarGz(t, pkg("name: fresh\nversion: 1.0.0\nentrypoint: index.html\n", harness.File{Name: "index.html", Body: "<p>fresh"})...), rootKey)
	if resp := s.Get("/fresh/"); resp.Status != 200 || body(resp) != "<p>fresh" {
		t.Fatalf("freshly uploaded worker = %s", resp)
	}
	s.Do("DELETE", s.API+"/workers/_/fresh", harness.WithKey(rootKey))
	if resp := s.Get("/fresh/"); resp.Status != 404 || resp.ErrorCode() != "WORKER_NOT_FOUND" {
		t.Fatalf("deleted worker = %s", resp)
	}
	// Unknown names, reserved segments and bare paths answer with the envelope; / of this host,
	// which serves everything and where no worker answers it, says where the cpanel and the API are.
	if resp := s.Get("/"); resp.Status != 200 || !strings.Contains(string(resp.Body), "This is a runtime") {
		t.Errorf("GET / = %s, want 200 saying where the cpanel and the API are", resp)
	}
	for path, code := range map[string]string{
		"/ghost/": "WORKER_NOT_FOUND", "/cpanel/assets/none.js": "NOT_FOUND", "/.well-known/other": "NOT_FOUND",
	} {
		if resp := s.Get(path); resp.Status != 404 || resp.ErrorCode() != code || resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("GET %s = %s, want 404 %s", path, resp, code)
		}
	}
	if resp := s.Do("POST", "/app/", harness.WithBody("text/plain", []byte("x"))); resp.Status != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST to a static worker = %s", resp)
	}
}

// TestStaticWorkers covers SPA fallback, base injection, caching headers and plain files.
func TestStaticWorkers(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	spa(t, s, "shop", "1.0.0", "injectBase: true\n")
	files := filepath.Join(s.DataDir, "apps", "docs", "1.0.0")
	writeFiles(t, files, map[string]string{
		"package.json":     `{"name":"docs","version":"1.0.0"}`,
		"index.html":       "<p>docs home",
		"guide/index.html": "<p>guide",
		"guide/page.txt":   strings.Repeat("0123456789", 100),
	})

	// SPA fallback with the base injected, for the root and for unknown paths.
	for _, p := range []string{"/shop/", "/shop/cart/42", "/shop/assets/missing.js"} {
		resp := s.Get(p)
		if resp.Status != 200 || !strings.Contains(body(resp), `<head><base href="/shop/"><title>`) ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s = %s", p, resp)
		}
	}
	if resp := s.Get("/shop@1.0.0/deep/link"); !strings.Contains(body(resp), `<base href="/shop@1.0.0/">`) {
		t.Errorf("pinned base = %s", resp)
	}
	// Files are served as they are, with validators and ranges.
	resp := s.Get("/shop/assets/site.css")
	if resp.Status != 200 || body(resp) != "body{}" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/css") {
		t.Fatalf("css = %s", resp)
	}
	etag, modified := resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	if etag == "" || modified == "" {
		t.Fatalf("no validators: ETag %q Last-Modified %q", etag, modified)
	}
	if resp := s.Get("/shop/assets/site.css", harness.WithHeader("If-None-Match", etag)); resp.Status != 304 {
		t.Errorf("If-None-Match = %d", resp.Status)
	}
	if resp := s.Get("/shop/", harness.WithHeader("If-None-Match", s.Get("/shop/").Header.Get("ETag"))); resp.Status != 304 {
		t.Errorf("If-None-Match on the injected entrypoint = %d", resp.Status)
	}
	if resp := s.Get("/docs/guide/page.txt", harness.WithHeader("Range", "bytes=10-19")); resp.Status != 206 || body(resp) != "0123456789" {
		t.Errorf("range = %s", resp)
	}
	// A worker without entrypoint serves its files; folders get their index.html; no fallback.
	if resp := s.Get("/docs"); resp.Status != 200 || body(resp) != "<p>docs home" {
		t.Errorf("GET /docs = %s", resp)
	}
	if resp := s.Get("/docs/guide/"); resp.Status != 200 || body(resp) != "<p>guide" {
		t.Errorf("GET /docs/guide/ = %s", resp)
	}
	if resp := s.Get("/docs/nope.html"); resp.Status != 404 || resp.ErrorCode() != "NOT_FOUND" {
		t.Errorf("missing file = %s", resp)
	}
}

// TestStaticTraversal tries to read outside the version folder.
func TestStaticTraversal(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	dir := spa(t, s, "app", "1.0.0", "")
	spa(t, s, "app", "0.9.0", "")
	secret := filepath.Join(s.Dir, "secret.txt")
	os.WriteFile(secret, []byte("TOP SECRET"), 0o644)
	os.Symlink(secret, filepath.Join(dir, "leak.txt"))
	os.Symlink("../0.9.0", filepath.Join(dir, "older"))
	os.Symlink("assets", filepath.Join(dir, "inside"))
	for _, p := range []string{
		"/app/../../secret.txt", "/app/%2e%2e/%2e%2e/secret.txt", "/app/..%2f..%2fsecret.txt",
		"/app/leak.txt", "/app/older/index.html", "/app/assets/../../0.9.0/index.html",
		"/app/%2e%2e%2f0.9.0%2findex.html", "/app//etc/passwd", "/app/\\..\\secret.txt",
	} {
		req, _ := http.NewRequest("GET", s.URL+p, nil)
		req.URL.Opaque = p // send the path exactly as written
		resp, err := s.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 4096)
		n, _ := resp.Body.Read(b)
		resp.Body.Close()
		got := string(b[:n])
		if strings.Contains(got, "TOP SECRET") || strings.Contains(got, "app 0.9.0") || strings.Contains(got, "root:") {
			t.Errorf("GET %s leaked: %d %q", p, resp.StatusCode, got)
		}
	}
	if resp := s.Get("/app/inside/app.js"); resp.Status != 200 || body(resp) != "console.log('1.0.0')" {
		t.Errorf("a link inside the version = %s", resp)
	}
}
