package workers

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/testkit"
	"github.com/caddy-runtime/runtime/packages"
)

func TestCheckProgram(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"server": 0o755, "bin/app": 0o755, "data.txt": 0o644, "index.html": 0o644} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	for name, body := range map[string][]byte{
		"app.wasm": testkit.TinyWasm("Content-Type: text/plain\n\nhi", "wasi_snapshot_preview1", "fd_write"),
		"net.wasm": testkit.TinyWasm("x", "env", "connect"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	notExecutable := CodeInvalidEntrypoint
	if runtime.GOOS == "windows" {
		notExecutable = "" // no mode bit: existence is all there is to check
	}
	tests := []struct {
		name, manifest string
		code           string // "" when it passes
		mentions       string // what the message must name
	}{
		{"static files", "name: site\n", "", ""},
		{"SPA entrypoint missing", "name: site\nentrypoint: app.html\n", "", ""},
		{"entrypoint present", "name: x\nentrypoint: server\n", "", ""},
		{"entrypoint as ./path", "name: x\nentrypoint: ./bin/app\n", "", ""},
		{"entrypoint missing", "name: x\nentrypoint: hello\n", CodeInvalidEntrypoint, "entrypoint hello is not in the archive"},
		{"entrypoint not executable", "name: x\nentrypoint: data.txt\n", notExecutable, "chmod +x data.txt"},
		{"entrypoint a folder", "name: x\nentrypoint: bin\n", CodeInvalidEntrypoint, "entrypoint bin is not a file in the archive but a folder"},
		{"entrypoint outside", "name: x\nentrypoint: ../other/server\n", CodeInvalidEntrypoint, "outside the worker's folder"},
		{"command ./server present", "name: x\ncommand: [./server, --flag]\n", "", ""},
		{"autoInstall on a process worker", "name: x\ncommand: [./server]\nautoInstall: true\n", packages.CodeInvalidManifest, "a process worker has none to install"},
		{"command bin/app present", "name: x\ncommand: [bin/app]\n", "", ""},
		{"command ./missing", "name: x\ncommand: [./missing]\n", CodeInvalidEntrypoint, "command ./missing is not in the archive"},
		{"command bin/missing", "name: x\ncommand: [bin/missing, a]\n", CodeInvalidEntrypoint, "command bin/missing is not in the archive"},
		{"command not executable", "name: x\ncommand: [./data.txt]\n", notExecutable, "data.txt is not executable"},
		{"command on PATH", "name: x\ncommand: [node, server.js]\n", "", ""},
		{"command absolute", "name: x\ncommand: [/usr/bin/python3, app.py]\n", "", ""},
		{"command escaping", "name: x\ncommand: [../../bin/sh]\n", CodeInvalidEntrypoint, "outside the worker's folder"},
		{"command empty word", "name: x\ncommand: ['']\n", CodeInvalidEntrypoint, "empty word"},
		{"invalid manifest", "name: x\nmaxRequests: -1\n", packages.CodeInvalidManifest, "maxRequests"},
		{"wasm module", "name: x\nruntime: wasm\nmodule: app.wasm\n", "", ""},
		{"wasm module missing", "name: x\nruntime: wasm\nmodule: gone.wasm\n", CodeInvalidModule, "module gone.wasm is not in the archive"},
		{"wasm module not wasm", "name: x\nruntime: wasm\nmodule: data.txt\n", CodeInvalidModule, "module data.txt is not a WebAssembly module"},
		{"wasm module a folder", "name: x\nruntime: wasm\nmodule: bin\n", CodeInvalidModule, "not a file in the archive but a folder"},
		{"wasm module outside", "name: x\nruntime: wasm\nmodule: ../app.wasm\n", CodeInvalidModule, "outside the worker's folder"},
		{"wasm module importing", "name: x\nruntime: wasm\nmodule: net.wasm\n", CodeInvalidModule, "imports env.connect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckProgram(manifestOnly(t, tt.manifest), tree, 0)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("CheckProgram = %v, want it to pass", err)
				}
				return
			}
			if !packages.IsCode(err, tt.code) || !strings.Contains(err.Error(), tt.mentions) {
				t.Fatalf("CheckProgram = %v, want code %s naming %q", err, tt.code, tt.mentions)
			}
		})
	}
}
