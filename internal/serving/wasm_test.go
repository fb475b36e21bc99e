package serving

import (
	"crypto/tls"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/packages"
)

// TestWasmEnv: the environment of a WebAssembly instance is the manifest's env and the
// request's CGI variables, which win, and nothing else: a manifest's or a secret's variable of
// a CGI name is left out even when no header line would set it.
func TestWasmEnv(t *testing.T) {
	r := httptest.NewRequest("POST", "https://apps.example.com:8443/app/a/b?x=1", strings.NewReader("body"))
	r.TLS = &tls.ConnectionState{}
	r.RemoteAddr = "192.0.2.1:5555"
	r.Header.Set("Content-Type", "text/plain")
	r.Header.Set("X-Two", "2")
	r.Header.Add("Accept", "a")
	r.Header.Add("Accept", "b")
	r.Header.Set("Proxy", "http://evil")
	t.Run("full", func(t *testing.T) {
		m := workers.Manifest{Env: map[string]string{"GREETING": "hi", "PATH_INFO": "/spoofed", "HTTP_X_TWO": "spoofed", "TOKEN": "from the manifest", "PATH": "/opt/bin"}}
		env := wasmEnv(r, Target{Base: "/app", Rest: "/a/b", Version: packages.Version{Version: "1.2.0"}}, m, "app", 4,
			map[string]string{"TOKEN": "secret", "QUERY_STRING": "spoofed", "HTTP_X_ABSENT": "a secret stored before the refusal"}, nil)
		want := []string{
			"CONTENT_LENGTH=4", "CONTENT_TYPE=text/plain", "GATEWAY_INTERFACE=CGI/1.1", "GREETING=hi", "HTTPS=on",
			"HTTP_ACCEPT=a, b", "HTTP_X_REQUEST_ID=", "HTTP_X_TWO=2", "PATH=/opt/bin", "PATH_INFO=/a/b", "QUERY_STRING=x=1",
			"REMOTE_ADDR=192.0.2.1", "REMOTE_PORT=5555", "REQUEST_METHOD=POST", "REQUEST_URI=/app/a/b?x=1",
			"SCRIPT_NAME=/app", "SERVER_NAME=apps.example.com", "SERVER_PORT=8443", "SERVER_PROTOCOL=HTTP/1.1",
			"SERVER_SOFTWARE=caddy-runtime", "TOKEN=secret", "WORKER_NAME=app", "WORKER_VERSION=1.2.0",
		}
		if !slices.Equal(env, want) {
			t.Errorf("env =\n%q\nwant\n%q", env, want)
		}
		// The one list of the runtime's names (which uploads and the secrets API refuse)
		// names every variable the runtime sets here.
		for _, kv := range env {
			if k, _, _ := strings.Cut(kv, "="); k != "GREETING" && k != "TOKEN" && !workers.RuntimeVariable(k) {
				t.Errorf("the instance gets %s, which workers.RuntimeVariable does not name: a secret of that name would be accepted", k)
			}
		}
	})
	t.Run("no body", func(t *testing.T) {
		g := httptest.NewRequest("GET", "http://example.com/app", nil)
		env := wasmEnv(g, Target{Base: "/app"}, workers.Manifest{}, "app", 0, nil, nil)
		for _, kv := range env {
			if strings.HasPrefix(kv, "CONTENT_") || strings.HasPrefix(kv, "HTTPS=") {
				t.Errorf("without a body or TLS: %s", kv)
			}
		}
		if !slices.Contains(env, "SERVER_PORT=80") || !slices.Contains(env, "PATH_INFO=") {
			t.Errorf("env = %q", env)
		}
	})
}

func TestParseModuleKey(t *testing.T) {
	for _, tt := range []struct{ name, version, dir, module string }{
		{"app", "1.0.0", "/data/apps/app/1.0.0", "app.wasm"},
		{"@team/app", "2.0.0-rc.1", "/data/apps/@team/app/2.0.0-rc.1", "bin/main.wasm"},
	} {
		name, version, dir, module, ok := ParseModuleKey(ModuleKey(tt.name, tt.version, tt.dir, tt.module))
		if !ok || name != tt.name || version != tt.version || dir != tt.dir || module != tt.module {
			t.Errorf("ParseModuleKey(ModuleKey(%q, %q, %q, %q)) = %q %q %q %q %v", tt.name, tt.version, tt.dir, tt.module, name, version, dir, module, ok)
		}
	}
	for _, key := range []string{"", "app", "app@1.0.0", "@1.0.0\x00d\x00m", "app@\x00d\x00m", "a@1\x00d\x00m\x00x"} {
		if _, _, _, _, ok := ParseModuleKey(key); ok {
			t.Errorf("ParseModuleKey(%q) accepted it", key)
		}
	}
}
