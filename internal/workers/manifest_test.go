package workers

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-runtime/runtime/internal/packages"
)

func TestManifest(t *testing.T) {
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	for manifest, want := range map[string]Kind{
		"name: a\n":                             Files,
		"name: a\nentrypoint: index.html\n":     SPA,
		"name: a\nentrypoint: server\n":         Process,
		"name: a\ncommand: [node, server.js]\n": Process,
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
	if err != nil || m.Timeout != Duration(5e9) || m.TTL != Duration(120e9) || m.MaxBodySize != 1<<20 || m.MaxRequests != 3 || m.StartTimeout != Duration(DefaultStartTimeout) || m.Listen != ListenPort {
		t.Fatalf("manifest = %+v, %v", m, err)
	}
	if got := m.Limits.sandbox().Scratch; got != 8<<20 {
		t.Errorf("limits.scratch = %d bytes, want 8MiB", got)
	}
	for _, bad := range []string{"timeout: soon\n", "ttl: -3\n", "maxBodySize: big\n", "maxRequests: -1\n", "limits:\n  scratch: lots\n", "listen: fd3\n", "listen: [socket]\n"} {
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
