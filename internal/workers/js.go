package workers

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/caddy-runtime/runtime/internal/config"
)

// CodeJSEngineUnavailable refuses a JavaScript worker whose engine this server does not have.
const CodeJSEngineUnavailable = "JS_ENGINE_UNAVAILABLE"

// loaderFiles are the loaders the binary carries: for each engine a module that imports the
// worker's entrypoint and serves its default export (see jsloader/*.mjs).
//
//go:embed jsloader/*.mjs
var loaderFiles embed.FS

// JSDir is the folder of JSHost in scratch_dir: its name has no "~", so sweepScratch, which
// removes the scratch folders of runtimes that are gone, leaves it.
const JSDir = ".js"

// JSHost runs JavaScript workers: it knows the engines (js_runtime) and writes the loaders, once,
// into its folder, where the Node engine's transpiled TypeScript goes too.
type JSHost struct {
	Engines config.JSEngines
	// Dir is the runtime's folder of loaders and transpiled modules (scratch_dir/.js, which
	// a worker_user reaches as it reaches its scratch folder, where state_dir is the runtime's
	// alone); a worker may read the loaders and its own transpiled modules there, by one
	// Landlock rule each, and nothing else of it.
	Dir string
	// Registry is the npm registry autoInstall reaches, alone (js_registry); "" (tests) leaves
	// each engine its default, reached as the worker reaches the network.
	Registry string
	// InstallTimeout bounds an autoInstall (js_install_timeout); 0 is DefaultJSInstallTimeout.
	InstallTimeout time.Duration

	once    sync.Once
	loaders string // the folder the loaders are in
	err     error
}

// checkEngine refuses a JavaScript worker whose manifest asks for an engine the server lacks.
func checkEngine(m Manifest, engines config.JSEngines) error {
	engine, _, ok := engines.Path(m.Runtime)
	if ok {
		return nil
	}
	if engine == "" {
		return fmt.Errorf("this server has no JavaScript engine to run %s: the operator installs bun, deno or node on the runtime's PATH, or sets js_runtime to one's path", m.Entrypoint)
	}
	return fmt.Errorf("runtime: %s asks for an engine this server does not have (it has %s; setting js_runtime, and bun, deno or node on the runtime's PATH): "+
		"write runtime: js to run in the server's default engine, or ask the operator to install %s", engine, engines, engine)
}

// loaderDir writes the loaders into a folder named after their content, once per process:
// read-only files that a later runtime of the same build finds in place.
func (h *JSHost) loaderDir() (string, error) {
	h.once.Do(func() {
		sum := sha256.New()
		entries, err := fs.ReadDir(loaderFiles, "jsloader")
		if err != nil {
			h.err = err
			return
		}
		files := map[string][]byte{}
		for _, e := range entries {
			body, _ := loaderFiles.ReadFile("jsloader/" + e.Name())
			files[e.Name()] = body
			fmt.Fprintf(sum, "%s\x00%d\x00", e.Name(), len(body))
			sum.Write(body)
		}
		if h.err = bundleLoaders(files); h.err != nil {
			return
		}
		h.loaders = filepath.Join(h.Dir, "loader-"+hex.EncodeToString(sum.Sum(nil))[:16])
		h.err = writeOnce(h.loaders, files)
	})
	return h.loaders, h.err
}

// bundleLoaders replaces each engine's loader in files with one module holding the loader and
// the modules it imports (common.mjs, nodehttp.mjs), so that an engine reads and compiles one
// file at every start rather than three (about half a millisecond of a Bun start). A module
// it imports dynamically (Bun's forward.mjs) stays its own, read only at the starts that take
// it. The modules stay beside it: Node's hooks are registered by their URL.
func bundleLoaders(files map[string][]byte) error {
	plugin := api.Plugin{Name: "jsloader", Setup: func(b api.PluginBuild) {
		b.OnResolve(api.OnResolveOptions{Filter: `^\./`}, func(a api.OnResolveArgs) (api.OnResolveResult, error) {
			if a.Kind == api.ResolveJSDynamicImport {
				return api.OnResolveResult{Path: a.Path, External: true}, nil // loaded only when taken
			}
			return api.OnResolveResult{Path: path.Base(a.Path), Namespace: "jsloader"}, nil
		})
		b.OnLoad(api.OnLoadOptions{Filter: `.*`, Namespace: "jsloader"}, func(a api.OnLoadArgs) (api.OnLoadResult, error) {
			body, ok := files[a.Path]
			if !ok {
				return api.OnLoadResult{}, fmt.Errorf("no loader module %s", a.Path)
			}
			contents := string(body)
			return api.OnLoadResult{Contents: &contents, Loader: api.LoaderJS}, nil
		})
	}}
	for _, engine := range []string{RuntimeBun, RuntimeDeno, RuntimeNode} {
		name := engine + ".mjs"
		result := api.Build(api.BuildOptions{EntryPoints: []string{"./" + name}, Bundle: true, Format: api.FormatESModule,
			Platform: api.PlatformNeutral, External: []string{"node:*"}, Plugins: []api.Plugin{plugin}, LogLevel: api.LogLevelSilent})
		if len(result.Errors) > 0 {
			return fmt.Errorf("bundling the %s loader: %s", engine, result.Errors[0].Text)
		}
		files[name] = result.OutputFiles[0].Contents
	}
	return nil
}

// writeOnce creates folder dir holding files (read-only), unless it exists: it is filled
// beside it and renamed into place, so a reader never sees it half written.
func writeOnce(dir string, files map[string][]byte) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	// Other accounts may pass through (worker_user), not list.
	if err := os.MkdirAll(filepath.Dir(dir), 0o711); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), body, 0o444); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, fs.ErrExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return err
		}
	}
	return nil
}

// jsStart is how a JavaScript worker starts: its command line, the folders it may read
// besides its own (the engine's and the loaders'), and its engine's defaults of the
// environment, which the manifest's env may change: env, and scratch's variables, each
// naming a folder in the worker's scratch (the engines' caches go there).
type jsStart struct {
	argv    []string
	reads   []string
	env     map[string]string
	scratch map[string]string
}

// start prepares the start of the JavaScript worker of manifest m in folder dir. Node cannot
// run TypeScript (20 has no type stripping): its modules are transpiled first (transpile).
func (h *JSHost) start(dir string, m Manifest) (jsStart, error) {
	if h == nil {
		return jsStart{}, errors.New("this runtime runs no JavaScript workers")
	}
	engine, binary, ok := h.Engines.Path(m.Runtime)
	if !ok {
		return jsStart{}, checkEngine(m, h.Engines)
	}
	loaders, err := h.loaderDir()
	if err != nil {
		return jsStart{}, fmt.Errorf("writing the JavaScript loaders into %s: %w", h.Dir, err)
	}
	entry, err := entryPath(dir, m.Entrypoint)
	if err != nil {
		return jsStart{}, err
	}
	s := jsStart{reads: []string{engineFolder(binary), loaders}, env: map[string]string{"NO_COLOR": "1"}, scratch: map[string]string{}}
	loader := filepath.Join(loaders, engine+".mjs")
	switch engine {
	case RuntimeBun:
		// The runtime merges the version's .env itself, checked at upload; Bun's own loading
		// (.env, .env.local, .env.production, …) would add what no check saw, on one engine.
		s.argv = []string{binary, "--no-env-file"}
		if m.LowMemory {
			s.argv = append(s.argv, "--smol")
		}
		s.argv = append(s.argv, loader, entry)
		s.scratch["BUN_INSTALL_CACHE_DIR"] = "bun-install"
		// Bun's transpiler cache would be written into a scratch folder no later start sees,
		// at every start: off.
		s.env["BUN_RUNTIME_TRANSPILER_CACHE_PATH"] = "0"
	case RuntimeDeno:
		s.argv = []string{binary, "run", "--allow-all", "--no-prompt"}
		// Deno resolves a package.json's dependencies from node_modules (autoInstall's, or
		// shipped) only when told to; else it looks for them in its own cache.
		if info, err := os.Stat(filepath.Join(dir, "node_modules")); err == nil && info.IsDir() {
			s.argv = append(s.argv, "--node-modules-dir=manual")
		}
		s.argv = append(s.argv, loader, entry)
		s.scratch["DENO_DIR"] = "deno"
		s.env["DENO_NO_UPDATE_CHECK"] = "1"
	default: // RuntimeNode
		s.argv = []string{binary, loader, entry}
		out, err := h.transpile(dir)
		if err != nil {
			return jsStart{}, err
		}
		if out != "" {
			s.argv = append(s.argv, out)
			s.reads = append(s.reads, out)
		}
	}
	return s, nil
}

// engineFolder is the folder a worker may read of its engine: the binary's, or the npm package
// it is the bin/ of (@oven/bun-linux-x64/bin/bun: the package's package.json beside bin/). A
// plain bin/ folder's parent (/root of /root/bin) is no engine's, and stays closed.
func engineFolder(binary string) string {
	dir := filepath.Dir(binary)
	if filepath.Base(dir) == "bin" {
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "package.json")); err == nil {
			return filepath.Dir(dir)
		}
	}
	return dir
}

// entryPath is the absolute path of the entrypoint in the worker's folder.
func entryPath(dir, entrypoint string) (string, error) {
	entry := filepath.Clean(filepath.FromSlash(entrypoint))
	if !filepath.IsLocal(entry) {
		return "", fmt.Errorf("entrypoint %q must be a path inside the worker", entrypoint)
	}
	return filepath.Join(dir, entry), nil
}

// maxChecked bounds the JavaScript entrypoint checkScriptSource parses: a larger one (a
// bundle) is left to its start.
const maxChecked = 8 << 20

// checkScriptSource tells what can be seen wrong with a JavaScript worker's entrypoint file
// (in tree) without running it: it does not parse (esbuild's error, with its line), or it has
// no default export ("" when neither). Whether the export has fetch or routes is left to the
// start, which reports the engine's output.
func checkScriptSource(tree *os.Root, file string) string {
	f, err := tree.Open(filepath.FromSlash(file))
	if err != nil {
		return "cannot be read: " + err.Error()
	}
	defer f.Close()
	source, err := io.ReadAll(io.LimitReader(f, maxChecked+1))
	if err != nil || len(source) > maxChecked {
		return ""
	}
	loader, ok := tsLoader(file)
	if !ok {
		loader = api.LoaderJSX // JavaScript, with the JSX that Bun and Deno take in .js files too
	}
	result := api.Build(api.BuildOptions{Stdin: &api.StdinOptions{Contents: string(source), Loader: loader, Sourcefile: file},
		Format: api.FormatESModule, Metafile: true, LogLevel: api.LogLevelSilent})
	if len(result.Errors) > 0 {
		e := result.Errors[0]
		if e.Location != nil {
			return fmt.Sprintf("does not parse: line %d, column %d: %s", e.Location.Line, e.Location.Column+1, e.Text)
		}
		return "does not parse: " + e.Text
	}
	var meta struct {
		Outputs map[string]struct {
			Exports []string `json:"exports"`
		} `json:"outputs"`
	}
	if json.Unmarshal([]byte(result.Metafile), &meta) != nil {
		return ""
	}
	for _, out := range meta.Outputs {
		if !slices.Contains(out.Exports, "default") {
			return "has no default export: export an object with fetch and/or routes, export default { fetch(request) { return new Response(\"hello\") } }"
		}
	}
	return ""
}

// maxTranspiled bounds the TypeScript files of one worker transpiled for Node.
const maxTranspiled = 10000

// transpile writes the JavaScript of each TypeScript module of the worker's folder dir (but
// node_modules) into a folder of its own in the runtime's (never into dir), named by the
// SHA-256 of its source, which Node's module hooks look it up by; "" when there is none.
// A module transpiled before is not transpiled again.
func (h *JSHost) transpile(dir string) (string, error) {
	sum := sha256.Sum256([]byte(dir))
	out := filepath.Join(h.Dir, "transpiled", hex.EncodeToString(sum[:])[:24])
	found := 0
	err := filepath.WalkDir(dir, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		loader, ok := tsLoader(d.Name())
		if !ok || !d.Type().IsRegular() {
			return nil
		}
		if found++; found > maxTranspiled {
			return fmt.Errorf("more than %d TypeScript files to transpile for Node: run the worker on bun or deno (runtime:), or ship JavaScript", maxTranspiled)
		}
		source, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(source)
		target := filepath.Join(out, hex.EncodeToString(sum[:])+".mjs")
		if _, err := os.Stat(target); err == nil {
			return nil
		}
		result := api.Transform(string(source), api.TransformOptions{Loader: loader, Format: api.FormatESModule,
			Target: api.ES2022, Sourcefile: file, Sourcemap: api.SourceMapInline})
		if len(result.Errors) > 0 {
			e := result.Errors[0]
			where := file
			if e.Location != nil {
				where = fmt.Sprintf("%s:%d:%d", file, e.Location.Line, e.Location.Column)
			}
			return fmt.Errorf("%s: %s", where, e.Text)
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		// A name of its own: two starts of the version may transpile at once.
		tmp, err := os.CreateTemp(out, ".tmp-*")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		_, err = tmp.Write(result.Code)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(tmp.Name(), 0o444)
		}
		if err != nil {
			return err
		}
		return os.Rename(tmp.Name(), target)
	})
	if err != nil || found == 0 {
		return "", err
	}
	return out, nil
}

// tsLoader is esbuild's loader of a TypeScript (or JSX) module by its name.
func tsLoader(name string) (api.Loader, bool) {
	switch strings.ToLower(path.Ext(name)) {
	case ".ts", ".mts", ".cts":
		return api.LoaderTS, true
	case ".tsx":
		return api.LoaderTSX, true
	case ".jsx":
		return api.LoaderJSX, true
	}
	return api.LoaderNone, false
}
