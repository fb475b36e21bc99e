package workers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/packages"
)

func TestManifest(t *testing.T) {
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	for manifest, want := range map[string]Kind{
		"name: a\n":                                  Files,
		"name: a\nentrypoint: index.html\n":          SPA,
		"name: a\nentrypoint: server\n":              Process,
		"name: a\ncommand: [node, server.js]\n":      Process,
		"name: a\nruntime: wasm\nmodule: app.wasm\n": Wasm,
	} {
		os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644)
		md, err := packages.ReadMetadata(root, ".")
		if err != nil {
			t.Fatal(err)
		}
		m, err := ReadManifest(md)
		if err != nil || m.Kind() != want {
			t.Errorf("%q: kind %v, %v; want %v", manifest, m.Kind(), err, want)
		}
	}
	os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("name: a\ntimeout: 5\nttl: 2m\nmaxBodySize: 1MiB\nmaxRequests: 3\nlimits:\n  scratch: 8MiB\n"), 0o644)
	md, _ := packages.ReadMetadata(root, ".")
	m, err := ReadManifest(md)
	if err != nil || m.Timeout != Duration(5e9) || m.TTL != (TTL{Duration: Duration(120e9)}) || m.MaxBodySize != 1<<20 || m.MaxRequests != 3 || m.StartTimeout != Duration(DefaultStartTimeout) || m.Listen != ListenPort {
		t.Fatalf("manifest = %+v, %v", m, err)
	}
	if got := m.Limits.sandbox().Scratch; got != 8<<20 {
		t.Errorf("limits.scratch = %d bytes, want 8MiB", got)
	}
	for _, bad := range []string{"timeout: soon\n", "ttl: -3\n", "maxBodySize: big\n", "maxRequests: -1\n", "limits:\n  scratch: lots\n",
		"runtime: wasm\n", "module: app.wasm\n", "runtime: python\nmodule: app.py\n", "runtime: wasm\nmodule: app.wasm\ncommand: [x]\n",
		"runtime: wasm\nmodule: app.wasm\nentrypoint: index.html\n", "runtime: wasm\nmodule: app.wasm\nhealthcheck: {path: /healthz}\n", "listen: fd3\n", "listen: [socket]\n"} {
		os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("name: a\n"+bad), 0o644)
		md, _ := packages.ReadMetadata(root, ".")
		if _, err := ReadManifest(md); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestManifestListen(t *testing.T) {
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	for _, want := range []string{ListenPort, ListenSocket} {
		os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("name: a\nentrypoint: server\nlisten: "+want+"\n"), 0o644)
		md, _ := packages.ReadMetadata(root, ".")
		if m, err := ReadManifest(md); err != nil || m.Listen != want {
			t.Errorf("listen: %s read as %q, %v", want, m.Listen, err)
		}
	}
}

// TestManifestEnv: Admit refuses an env naming a variable the runtime sets for some kind of
// worker (a process worker's, CGI's), whatever kind the version is; PATH and HOME, defaults a
// process worker's manifest may change, and names merely like the runtime's pass.
func TestManifestEnv(t *testing.T) {
	all := Policy{ProcessWorkers: config.Namespaces{All: true}, WasmWorkers: config.Namespaces{All: true}}
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"GREETING", true}, {"PATH", true}, {"HOME", true}, {"http_proxy", true}, {"HTTPS_PROXY", true}, {"REMOTE", true}, {"PORTS", true},
		{"PORT", false}, {"HOST", false}, {"TMPDIR", false}, {"LISTEN_FDS", false}, {"LISTEN_PID", false},
		{"HTTP_AUTHORIZATION", false}, {"HTTP_X_TOKEN", false}, {"HTTP_PROXY", false}, {"REMOTE_ADDR", false}, {"REMOTE_HOST", false},
		{"REMOTE_USER", false}, {"AUTH_TYPE", false}, {"REQUEST_METHOD", false}, {"SCRIPT_NAME", false}, {"PATH_INFO", false},
		{"PATH_TRANSLATED", false}, {"QUERY_STRING", false}, {"SERVER_NAME", false}, {"SERVER_PROTOCOL", false}, {"SERVER_SOFTWARE", false}, {"SERVER_URL", true},
		{"CONTENT_TYPE", false}, {"CONTENT_LENGTH", false}, {"GATEWAY_INTERFACE", false}, {"HTTPS", false}, {"WORKER_NAME", false},
	} {
		for _, kind := range []string{"entrypoint: server\n", "runtime: wasm\nmodule: app.wasm\n", "entrypoint: index.html\n"} {
			err := Admit(manifestOnly(t, "name: a\n"+kind+"env: {"+tt.name+": x}\n"), all, nil)
			if (err == nil) != tt.ok {
				t.Errorf("env %s with %q: %v, want ok %v", tt.name, kind, err, tt.ok)
			}
			if err != nil && (!packages.IsCode(err, packages.CodeInvalidManifest) || !strings.Contains(err.Error(), "env "+tt.name+" is set by the runtime")) {
				t.Errorf("env %s: %v, want INVALID_MANIFEST naming it", tt.name, err)
			}
		}
	}
}
