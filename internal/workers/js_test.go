package workers

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/packages"
)

// TestJSKind: the entry is found as the older implementation found it (the manifest's
// entrypoint if that file exists, else the first of index.html, index.ts, index.js, …), and a
// JavaScript or TypeScript entry, or a JavaScript runtime, makes a JavaScript worker; an
// index.html found alone keeps the folder plain files.
func TestJSKind(t *testing.T) {
	for _, tt := range []struct {
		manifest string
		files    []string
		kind     Kind
		entry    string
	}{
		{"", []string{"index.ts"}, JS, "index.ts"},
		{"", []string{"index.mjs", "index.js"}, JS, "index.js"},
		{"", []string{"index.tsx"}, JS, "index.tsx"},
		{"", []string{"index.html", "index.ts"}, Files, ""},
		{"", []string{"app.ts"}, Files, ""},
		{"entrypoint: src/app.ts\n", []string{"src/app.ts", "index.js"}, JS, "src/app.ts"},
		{"entrypoint: gone.ts\n", []string{"index.js"}, JS, "index.js"},
		{"entrypoint: gone.ts\n", nil, JS, "gone.ts"},
		{"entrypoint: server\n", []string{"server", "index.ts"}, Process, "server"},
		{"command: [node, server.js]\n", []string{"server.js", "index.ts"}, Process, ""},
		{"runtime: bun\n", []string{"index.ts"}, JS, "index.ts"},
		{"runtime: bun\n", []string{"index.html", "index.js"}, JS, "index.js"},
		{"runtime: js\nentrypoint: gone.ts\n", []string{"index.html", "index.js"}, JS, "gone.ts"},
		{"runtime: js\nentrypoint: gone.ts\n", []string{"index.ts"}, JS, "index.ts"},
		{"runtime: js\nentrypoint: main.mts\n", []string{"main.mts"}, JS, "main.mts"},
		{"entrypoint: ../outside.ts\n", []string{"index.ts"}, JS, "index.ts"},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("name: a\n"+tt.manifest), 0o644)
		for _, f := range tt.files {
			os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
			os.WriteFile(filepath.Join(dir, f), []byte("export default {}\n"), 0o755)
		}
		root, _ := os.OpenRoot(dir)
		md, err := packages.ReadMetadata(root, ".")
		root.Close()
		if err != nil {
			t.Fatal(err)
		}
		m, err := ReadManifest(md)
		if err != nil || m.Kind() != tt.kind || m.Entrypoint != tt.entry {
			t.Errorf("%q with %v: kind %v entrypoint %q, %v; want %v %q", tt.manifest, tt.files, m.Kind(), m.Entrypoint, err, tt.kind, tt.entry)
		}
	}
}

// TestJSManifest: a JavaScript runtime runs a JavaScript module and nothing else, and only
// the engines the runtime knows are runtimes.
func TestJSManifest(t *testing.T) {
	for manifest, says := range map[string]string{
		"runtime: bun\ncommand: [bun, x.ts]\n":    "remove command",
		"runtime: deno\nmodule: app.wasm\n":       "remove module",
		"runtime: node\nentrypoint: index.html\n": "runtime: node runs a JavaScript or TypeScript module",
		"runtime: js\n": "add index.ts",
		"runtime: python\nentrypoint: index.py\n":            "or js, bun, deno or node for a JavaScript worker",
		"runtime: bun\nentrypoint: main.ts\nlowMemory: on\n": "",
	} {
		m, err := ReadManifest(manifestOnly(t, "name: a\n"+manifest))
		if says == "" {
			if err != nil || !m.LowMemory || m.Kind() != JS {
				t.Errorf("%q: %+v, %v", manifest, m, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want an error saying %q", manifest, err, says)
		}
	}
}

// TestJSAdmit: a JavaScript worker runs a process (process_workers) on an engine the server
// has (js_runtime); the refusal names the setting and the engines there are.
func TestJSAdmit(t *testing.T) {
	engines := config.JSEngines{Default: "node", Paths: map[string]string{"node": "/usr/bin/node"}}
	all := Policy{ProcessWorkers: config.Namespaces{All: true}, JSEngines: engines}
	for _, tt := range []struct {
		manifest string
		policy   Policy
		code     string
		says     string
	}{
		{"entrypoint: index.ts\n", all, "", ""},
		{"runtime: node\nentrypoint: index.ts\n", all, "", ""},
		{"runtime: bun\nentrypoint: index.ts\n", all, CodeJSEngineUnavailable, "runtime: bun asks for an engine this server does not have (it has node (default); setting js_runtime"},
		{"entrypoint: index.ts\n", Policy{ProcessWorkers: config.Namespaces{All: true}}, CodeJSEngineUnavailable, "has no JavaScript engine"},
		{"entrypoint: index.ts\n", Policy{JSEngines: engines}, CodeProcessWorkersDisabled, "a JavaScript worker (its entrypoint index.ts runs in a process of its own)"},
	} {
		err := Admit(manifestOnly(t, "name: a\n"+tt.manifest), tt.policy, nil)
		if tt.code == "" && err != nil || tt.code != "" && (!packages.IsCode(err, tt.code) || !strings.Contains(err.Error(), tt.says)) {
			t.Errorf("%q: %v; want %q saying %q", tt.manifest, err, tt.code, tt.says)
		}
	}
}

// TestJSStart: each engine runs the loader the binary carries, written once to the runtime's
// folder, read-only, with the worker's entrypoint; the engine's folder and the loaders' are
// its read paths, and Node gets its TypeScript transpiled outside the worker's folder.
func TestJSStart(t *testing.T) {
	state, app := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(app, "index.ts"), []byte("const n: number = 1;\nexport default { fetch: () => new Response(String(n)) };\n"), 0o644)
	h := &JSHost{Dir: filepath.Join(state, "js"), Engines: config.JSEngines{Default: "bun",
		Paths: map[string]string{"bun": "/opt/bun/bin/bun", "deno": "/opt/deno/deno", "node": "/usr/bin/node"}}}
	m := Manifest{Entrypoint: "index.ts", LowMemory: true}
	for runtime, want := range map[string]string{
		"":     "/opt/bun/bin/bun --no-env-file --smol LOADERS/bun.mjs APP/index.ts",
		"deno": "/opt/deno/deno run --allow-all --no-prompt LOADERS/deno.mjs APP/index.ts",
		"node": "/usr/bin/node LOADERS/node.mjs APP/index.ts TRANSPILED",
	} {
		m.Runtime = runtime
		s, err := h.start(app, m)
		if err != nil {
			t.Fatal(err)
		}
		names := []string{h.loaders, "LOADERS", app, "APP"}
		if len(s.reads) > 2 {
			names = append(names, s.reads[2], "TRANSPILED")
		}
		got := strings.NewReplacer(names...).Replace(strings.Join(s.argv, " "))
		if got != want {
			t.Errorf("runtime %q runs %q, want %q", runtime, got, want)
		}
		if want := map[string]string{"": "/opt/bun/bin", "deno": "/opt/deno", "node": "/usr/bin"}[runtime]; s.reads[0] != want || s.reads[1] != h.loaders {
			t.Errorf("runtime %q reads %v, want %s and the loaders", runtime, s.reads, want)
		}
	}
	// With node_modules (autoInstall's, or shipped) Deno resolves package.json's dependencies there.
	installed := t.TempDir()
	os.Mkdir(filepath.Join(installed, "node_modules"), 0o755)
	m.Runtime = "deno"
	if s, err := h.start(installed, m); err != nil || !slices.Contains(s.argv, "--node-modules-dir=manual") {
		t.Errorf("deno with node_modules runs %v (%v), want --node-modules-dir=manual", s.argv, err)
	}
	info, err := os.Stat(filepath.Join(h.loaders, "bun.mjs"))
	if err != nil || info.Mode().Perm() != 0o444 || !strings.HasPrefix(filepath.Base(h.loaders), "loader-") {
		t.Errorf("loader %s: %v, %v", h.loaders, info, err)
	}
	files, _ := filepath.Glob(filepath.Join(h.Dir, "transpiled", "*", "*.mjs"))
	if len(files) != 1 {
		t.Fatalf("transpiled %v", files)
	}
	if js, _ := os.ReadFile(files[0]); strings.Contains(string(js), ": number") || !strings.Contains(string(js), "new Response") {
		t.Errorf("transpiled module:\n%s", js)
	}
	if entries, _ := os.ReadDir(app); len(entries) != 1 {
		t.Errorf("the worker's folder changed: %v", entries)
	}
	m.Runtime = "deno"
	h.Engines = config.JSEngines{Default: "node", Paths: map[string]string{"node": "/usr/bin/node"}}
	if _, err := h.start(app, m); err == nil || !strings.Contains(err.Error(), "js_runtime") {
		t.Errorf("start on a missing engine: %v", err)
	}
}

// TestEngineFolder: an engine installed from npm may read its package, a binary in a plain
// bin/ folder only that folder.
func TestEngineFolder(t *testing.T) {
	pkg := t.TempDir()
	os.MkdirAll(filepath.Join(pkg, "bin"), 0o755)
	os.WriteFile(filepath.Join(pkg, "package.json"), []byte("{}"), 0o644)
	home := t.TempDir()
	for binary, want := range map[string]string{
		filepath.Join(pkg, "bin", "bun"):  pkg,
		filepath.Join(home, "bin", "bun"): filepath.Join(home, "bin"),
		"/usr/bin/node":                   "/usr/bin",
	} {
		if got := engineFolder(binary); got != want {
			t.Errorf("engineFolder(%s) = %s, want %s", binary, got, want)
		}
	}
}

// TestJSCheckProgram: a JavaScript worker's entrypoint is checked at upload as far as it can
// be without running it: it must parse and have a default export.
func TestJSCheckProgram(t *testing.T) {
	for _, tt := range []struct {
		file, source, says string
	}{
		{"index.ts", "export default { fetch(req: Request): Response { return new Response('x') } }\n", ""},
		{"index.js", "const app = { fetch: () => <p>hi</p> };\nexport { app as default };\n", ""},
		{"index.cjs", "module.exports = { fetch() {} };\n", ""},
		{"index.mts", "const x: number = ;\n", "entrypoint index.mts does not parse: line 1, column 19"},
		{"index.ts", "export const fetch = () => new Response('x');\n", "entrypoint index.ts has no default export"},
		{"index.js", "console.log('a script')\n", "has no default export"},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("name: a\n"), 0o644)
		os.WriteFile(filepath.Join(dir, tt.file), []byte(tt.source), 0o644)
		root, _ := os.OpenRoot(dir)
		md, err := packages.ReadMetadata(root, ".")
		if err == nil {
			err = CheckProgram(md, root, 0)
		}
		root.Close()
		if tt.says == "" && err != nil || tt.says != "" && (!packages.IsCode(err, CodeInvalidEntrypoint) || !strings.Contains(err.Error(), tt.says)) {
			t.Errorf("%s %q: %v; want INVALID_ENTRYPOINT saying %q", tt.file, tt.source, err, tt.says)
		}
	}
}

// TestBundleLoaders: each engine's loader is one module, the ones it imported inlined, and
// keeps what it must not bundle: node: modules, and Node's hooks, registered by their URL.
func TestBundleLoaders(t *testing.T) {
	files := map[string][]byte{}
	entries, err := fs.ReadDir(loaderFiles, "jsloader")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		files[e.Name()], _ = loaderFiles.ReadFile("jsloader/" + e.Name())
	}
	if err := bundleLoaders(files); err != nil {
		t.Fatal(err)
	}
	for _, engine := range []string{RuntimeBun, RuntimeDeno, RuntimeNode} {
		body := string(files[engine+".mjs"])
		if strings.Contains(body, `from "./`) {
			t.Errorf("the %s loader still imports a module of its own:\n%s", engine, body)
		}
		if !strings.Contains(body, "function guard(") || !strings.Contains(body, "await import(") {
			t.Errorf("the %s loader lacks common.mjs's code:\n%s", engine, body)
		}
	}
	if node := string(files["node.mjs"]); !strings.Contains(node, `"./hooks.mjs"`) || !strings.Contains(node, `from "node:http"`) {
		t.Errorf("the node loader lost its hooks' URL or node:http:\n%s", node)
	}
	// The forwarder is read only by a start handed descriptor 3.
	if bun := string(files["bun.mjs"]); !strings.Contains(bun, `import("./forward.mjs")`) || strings.Contains(bun, "Bun.listen") {
		t.Errorf("the bun loader carries its forwarder rather than importing it when activated:\n%s", bun)
	}
}
