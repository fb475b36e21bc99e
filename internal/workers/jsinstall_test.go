package workers

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRegistryEndpoint: the install's proxy forwards to js_registry's host and port, and
// refuses every other host with 403, in plain requests and CONNECT tunnels alike.
func TestRegistryEndpoint(t *testing.T) {
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "package "+r.URL.Path) }))
	defer registry.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "elsewhere") }))
	defer other.Close()
	if (&JSHost{}).registryEndpoint() != nil {
		t.Fatal("an endpoint without js_registry")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	env := (&JSHost{Registry: registry.URL + "/"}).registryEndpoint()(ln)
	proxy, _ := url.Parse(strings.TrimPrefix(env[0], "HTTP_PROXY="))
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	for _, tt := range []struct {
		url    string
		status int
		body   string
	}{
		{registry.URL + "/left-greet", 200, "package /left-greet"},
		{other.URL + "/left-greet", 403, "reaches the registry " + registry.URL + "/ alone (setting js_registry)"},
		{"https://" + strings.TrimPrefix(other.URL, "http://") + "/x.tgz", 0, ""}, // CONNECT refused: the tunnel fails
	} {
		resp, err := client.Get(tt.url)
		if tt.status == 0 {
			if err == nil || !strings.Contains(err.Error(), "Forbidden") {
				t.Errorf("GET %s through the proxy: %v; want the CONNECT refused", tt.url, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("GET %s: %v", tt.url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.body) {
			t.Errorf("GET %s through the proxy = %d %q; want %d %q", tt.url, resp.StatusCode, body, tt.status, tt.body)
		}
	}
}

// TestMoveTree: node_modules moves into the version with its files and the links that stay
// inside it; a link out of it (absolute, or up and out) is dropped.
func TestMoveTree(t *testing.T) {
	src, dst := filepath.Join(t.TempDir(), "node_modules"), filepath.Join(t.TempDir(), "node_modules")
	os.MkdirAll(filepath.Join(src, "left-greet"), 0o755)
	os.MkdirAll(filepath.Join(src, ".bin"), 0o755)
	os.WriteFile(filepath.Join(src, "left-greet", "index.js"), []byte("export {}"), 0o644)
	links := map[string]string{".bin/greet": "../left-greet/index.js", ".bin/passwd": "/etc/passwd", "escape": "../../..", "left-greet/up": "../../outside"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := moveTree(src, dst); err != nil {
		t.Fatal(err)
	}
	if body, err := os.ReadFile(filepath.Join(dst, ".bin", "greet")); err != nil || string(body) != "export {}" {
		t.Errorf("the link inside node_modules: %q, %v", body, err)
	}
	for _, name := range []string{".bin/passwd", "escape", "left-greet/up"} {
		if _, err := os.Lstat(filepath.Join(dst, name)); err == nil {
			t.Errorf("the link %s (to %s) was kept", name, links[name])
		}
	}
	if err := moveTree(filepath.Join(t.TempDir(), "none"), filepath.Join(t.TempDir(), "node_modules")); err != nil {
		t.Errorf("nothing installed: %v", err)
	}
}
