package config

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// JSEngineNames are the JavaScript engines the runtime knows, in the order js_runtime's
// default looks for them on PATH.
var JSEngineNames = []string{"bun", "deno", "node"}

// JSEngines are the JavaScript engines this server runs JavaScript workers with.
type JSEngines struct {
	// Default is the engine of js_runtime, which runs a worker whose manifest names none
	// (runtime: js, or only a JavaScript entrypoint); "" when the server has none.
	Default string
	// Paths holds each engine the server has, by name: js_runtime's, and every other one
	// found on PATH at start-up. Each path is absolute with its links resolved, so the
	// sandbox grants the folder the binary really is in.
	Paths map[string]string
}

// Path returns the binary of the engine a manifest asks for (its runtime; "" or js for the
// default), and false when the server has no such engine.
func (e JSEngines) Path(engine string) (name, path string, ok bool) {
	if engine == "" || engine == "js" {
		engine = e.Default
	}
	path, ok = e.Paths[engine]
	return engine, path, ok
}

// String lists the engines for messages: "bun (default), node", or "none".
func (e JSEngines) String() string {
	var names []string
	for _, name := range JSEngineNames {
		if _, ok := e.Paths[name]; ok {
			if name == e.Default {
				name += " (default)"
			}
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// jsEngines resolves js_runtime: bun, deno or node looked up on PATH, or the absolute path
// of one of them (its file name, e.g. node or bun-1.4, tells which); unset, the first of
// JSEngineNames found on PATH, and no engine at all when none is (JavaScript workers are then
// refused at upload). The other engines are looked up on PATH too, for manifests that name
// one (runtime: deno).
func (r resolver) jsEngines(v AppValues) (JSEngines, error) {
	e := JSEngines{Paths: map[string]string{}}
	for _, name := range JSEngineNames {
		if real, ok := r.lookPath(name); ok {
			e.Paths[name] = real
		}
	}
	written, fromEnv := r.pick("js_runtime", v.JSRuntime)
	switch {
	case written == "":
		for _, name := range JSEngineNames {
			if _, ok := e.Paths[name]; ok {
				e.Default = name
				break
			}
		}
	case slices.Contains(JSEngineNames, written):
		if _, ok := e.Paths[written]; !ok {
			return e, r.fail("js_runtime", fromEnv, written, fmt.Errorf("%s is not on the PATH: install it, or write the absolute path of its binary", written))
		}
		e.Default = written
	case filepath.IsAbs(written):
		name := engineOf(written)
		if name == "" {
			return e, r.fail("js_runtime", fromEnv, written, fmt.Errorf("the file name does not tell the engine: name a binary called bun, deno or node"))
		}
		real, err := realBinary(written)
		if err != nil {
			return e, r.fail("js_runtime", fromEnv, written, err)
		}
		e.Paths[name], e.Default = real, name
	default:
		return e, r.fail("js_runtime", fromEnv, written, fmt.Errorf("write bun, deno, node or the absolute path of one of their binaries"))
	}
	return e, nil
}

// lookPath finds the program name on the PATH the resolver's environment has, as a shell
// would, and returns its real path.
func (r resolver) lookPath(name string) (string, bool) {
	for _, dir := range filepath.SplitList(r.getenv("PATH")) {
		if !filepath.IsAbs(dir) {
			continue // a relative PATH entry would depend on the working directory
		}
		if real, err := realBinary(filepath.Join(dir, name)); err == nil {
			return real, true
		}
	}
	return "", false
}

// engineOf tells the engine from a binary's file name: bun, bun-1.4, node20 → bun, node.
func engineOf(path string) string {
	base := strings.ToLower(filepath.Base(path))
	for _, name := range JSEngineNames {
		if strings.HasPrefix(base, name) {
			return name
		}
	}
	return ""
}

// realBinary resolves path's links and checks it is an executable file.
func realBinary(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("cannot be found: %w", err)
	}
	info, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", real)
	}
	return real, nil
}

// MaxJSInstallTimeout bounds js_install_timeout: an upload waits for the install.
const MaxJSInstallTimeout = 30 * time.Minute

// ParseJSInstallTimeout parses js_install_timeout: a Go duration from 1s to 30m.
func ParseJSInstallTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("want a duration such as 2m or 90s")
	case d < time.Second:
		return 0, fmt.Errorf("too short; the shortest is 1s")
	case d > MaxJSInstallTimeout:
		return 0, fmt.Errorf("too long; the longest is 30m (an upload waits for the install)")
	}
	return d, nil
}

// DefaultJSRegistry is js_registry unset: npm's registry, which Bun, Deno and npm use by
// default.
const DefaultJSRegistry = "https://registry.npmjs.org/"

// jsRegistry resolves js_registry: the http or https URL of an npm registry, ending in a slash.
func (r resolver) jsRegistry(written string) (string, error) {
	raw, fromEnv := r.pick("js_registry", written)
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", r.fail("js_registry", fromEnv, raw, fmt.Errorf("write the http or https URL of an npm registry, such as https://registry.npmjs.org/, without credentials"))
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u.String(), nil
}
