package runtime

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/caddy-runtime/runtime/"

// deps lists the runtime's own packages that pkg depends on, directly or not.
func deps(t *testing.T) map[string][]string {
	t.Helper()
	return depsWithPrefix(t, module)
}

// depsWithPrefix lists, for each of the runtime's packages, the packages whose import path
// starts with prefix that it depends on, directly or not, without the prefix. The runtime's
// packages are named by their path in the module without internal/ ("handlers" for
// handlers), so the rules below read as the layers they keep.
func depsWithPrefix(t *testing.T, prefix string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	all := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(p.ImportPath, module) {
			continue
		}
		var own []string
		for _, d := range p.Deps {
			if strings.HasPrefix(d, prefix) {
				own = append(own, strings.TrimPrefix(strings.TrimPrefix(d, prefix), "internal/"))
			}
		}
		all[strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "internal/")] = own
	}
	return all
}

// TestLayers keeps the dependencies one way: the management API (handlers) and the data plane
// (serving) know nothing of each other or of Caddy's glue, and the shared pieces below them
// know none of them.
func TestLayers(t *testing.T) {
	all := deps(t)
	for pkg, forbidden := range map[string][]string{
		"handlers": {"serving", "pluginhost", "cpanel", "caddymodule"},
		"serving":  {"handlers", "pluginhost", "cpanel", "caddymodule"},
		"cpanel":   {"handlers", "serving", "caddymodule"},
		"ui":       {"handlers", "serving", "caddymodule", "cpanel", "workers", "packages", "keystore", "plugins"},
		"envelope": {"handlers", "serving", "caddymodule", "workers", "packages", "keystore"},
		"trace":    {"handlers", "serving", "caddymodule", "workers", "packages", "keystore"},
		"metrics":  {"handlers", "serving", "caddymodule", "workers", "packages", "keystore"},
		"workers":  {"handlers", "serving", "caddymodule"},
		// The sealing of secrets is a leaf the settings check a key with.
		"secrets":  {"handlers", "serving", "caddymodule", "workers", "keystore", "config", "packages"},
		"packages": {"handlers", "serving", "caddymodule", "workers", "plugins"},
		"plugins":  {"handlers", "serving", "caddymodule"},
		// The Hrana wire types are shared by the guest driver (wasmdb, built for wasip1) and the
		// executor: a leaf of the standard library.
		"hrana": {"handlers", "serving", "caddymodule", "workers", "packages", "keystore", "config", "databases", "wasmdb", "trace", "envelope"},
		// The ordered start and stop of the state's parts is a leaf, knowing no part.
		"lifecycle": {"handlers", "serving", "caddymodule", "workers", "packages", "keystore", "config", "events"},
		// The WebAssembly engine is a leaf the data plane runs workers on.
		"wasm": {"handlers", "serving", "caddymodule", "workers", "packages", "keystore", "plugins", "pluginhost"},
		// Host names are a leaf the API, the data plane, the CLI and the settings share.
		"hosts": {"handlers", "serving", "caddymodule", "cpanel", "pluginhost", "workers", "packages", "keystore", "config"},
		// The package store is a leaf the API and the reconciler use: it knows none of them.
		"packagestore": {"handlers", "serving", "caddymodule", "cpanel", "pluginhost", "workers", "packages", "plugins", "keystore"},
		// The reconciler is an engine under the glue: it converges the catalogs (packages) with the
		// desired state (keystore) from the package store, and knows nothing of who drives it.
		"reconcile": {"handlers", "serving", "caddymodule", "cpanel", "pluginhost", "workers", "plugins", "filemanager", "cli", "client"},
		// The cluster composes the key store, the package store and the reconciler under the glue:
		// the API calls it through an interface of its own, and it knows no kind policy either.
		"cluster": {"handlers", "serving", "caddymodule", "cpanel", "pluginhost", "workers", "plugins", "filemanager", "cli", "client"},

		// The cron scheduler sends its ticks through the Dispatch the glue gives it: it knows
		// neither the API nor the data plane.
		"cron": {"handlers", "serving", "pluginhost", "caddymodule", "cpanel", "cli", "client"},

		// The plugin host is data plane too, in front of serving; it asks the API only through
		// the interfaces it declares.
		"pluginhost": {"handlers", "cpanel", "caddymodule"},
		// The command-line client speaks HTTP only: no server state.
		"client": {"handlers", "serving", "caddymodule", "cpanel", "workers", "keystore", "plugins", "filemanager"},
		"cli":    {"handlers", "serving", "caddymodule", "cpanel", "workers", "keystore", "plugins", "filemanager"},
	} {
		got, ok := all[pkg]
		if !ok {
			t.Errorf("package %s is missing", pkg)
		}
		for _, f := range forbidden {
			if slices.Contains(got, f) {
				t.Errorf("%s depends on %s", pkg, f)
			}
		}
	}
	// The wire contract is a leaf that handlers serves and client, cli and tests decode: it
	// holds types only.
	if got, ok := all["api"]; !ok || len(got) > 0 {
		t.Errorf("package api depends on %v (present: %v), want nothing of the runtime", got, ok)
	}
}

// TestCaddyStaysInTheGlue: only the Caddy glue, the command line registered with Caddy's
// commands, the plugin host and the binaries import Caddy; the API, the rest of the data plane
// and everything below them can be used and tested without it.
func TestCaddyStaysInTheGlue(t *testing.T) {
	glue := []string{
		"caddymodule", "cli", "cmd/runtime",
		// Plugins' routes and hooks are Caddy handlers, which the plugin host compiles and runs.
		"pluginhost",
	}
	for pkg, caddy := range depsWithPrefix(t, "github.com/caddyserver/") {
		if len(caddy) > 0 && !slices.Contains(glue, strings.TrimSuffix(pkg, "/")) {
			t.Errorf("%s imports Caddy (%s)", pkg, strings.Join(caddy[:min(3, len(caddy))], ", "))
		}
	}
	for _, pkg := range []string{"handlers", "serving", "trace"} {
		if _, ok := deps(t)[pkg]; !ok {
			t.Errorf("package %s is missing", pkg)
		}
	}
}

// TestCaddyModuleUsesTheAPIOnly checks that the Caddy glue uses package handlers only to build
// and mount the API: no JSON type of the API is built there.
func TestCaddyModuleUsesTheAPIOnly(t *testing.T) {
	// Cluster and Instances are what the API is given in cluster mode, as PluginHost is;
	// SecretsOptions is how it is given the secrets key.
	allowed := []string{"API", "New", "Options", "PluginHost", "Cluster", "Instances", "SecretsOptions", "APIKeyHeader", "SessionCookie", "HostSessionCookie"}
	files, err := filepath.Glob("caddymodule/*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "handlers" && !slices.Contains(allowed, sel.Sel.Name) {
				t.Errorf("%s: caddymodule uses handlers.%s", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}

// TestInternal keeps the public surface to what users import: the module's entry point (the
// root package, for xcaddy), the design card's four packages, the API client and its wire
// contract, and the programs; the rest lies under internal/, where no other module can import it.
func TestInternal(t *testing.T) {
	// The design card's four folders are public, as Caddy's modules/ are: the Caddy glue, the
	// management API, the runtime's database and units on disk.
	public := []string{"caddymodule", "handlers", "keystore", "packages", "api", "client", "cmd/runtime", "cmd/openapi", "bench", "bench/cmd/report", "integration", "integration/harness", "examples/hello-process", "examples/hello-wasm", "examples/db-wasm", "wasmdb"}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(pkg, module)
		if !ok || strings.HasPrefix(rel, "internal/") {
			continue
		}
		if !slices.Contains(public, rel) {
			t.Errorf("package %s is public: move it under internal/, or list it here if users import it", rel)
		}
	}
}

// TestArchitectureNamesEveryPackage keeps docs/architecture.md a map of the whole house: every
// package folder has its line there (the root package as runtime.go).
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(pkg, module)
		name := "`" + rel + "/`"
		if !ok {
			name = "`runtime.go`" // the root package
		}
		if !strings.Contains(string(doc), name) {
			t.Errorf("docs/architecture.md does not name the package folder %s: add a line for it", name)
		}
	}
}
